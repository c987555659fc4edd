package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// tockctl concurrency: the keys in use, and one key's holder and queue in
// the order they will start.
func TestConcurrencyCommand(t *testing.T) {
	t.Parallel()
	hs := fileServer(t)
	post(t, hs.URL, `{"name": "sync", "labels": {"customer": "acme"}, "handler": {"type": "custom", "name": "syncer"},
		"schedule": {"cron": "0 0 3 * * *"}, "concurrency": {"key": "{{ .labels.customer }}", "limit": 1}}`)
	if out := ok(t, hs.URL, "concurrency"); strings.Contains(out, "acme") {
		t.Fatalf("a key before any execution:\n%s", out)
	}
	id := list(t, hs.URL, "default")[0].Id.String()
	var runs []string
	for range 3 {
		var x models.Execution
		if err := json.Unmarshal([]byte(ok(t, hs.URL, "-o", "json", "jobs", "run", id)), &x); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, x.Id.String())
	}
	if out := ok(t, hs.URL, "concurrency"); !strings.Contains(out, "acme  namespace  1     2") {
		t.Fatalf("concurrency:\n%s", out)
	}
	out := ok(t, hs.URL, "concurrency", "acme")
	h, w1, w2 := strings.Index(out, "holding    "+runs[0]), strings.Index(out, "waiting 1  "+runs[1]), strings.Index(out, "waiting 2  "+runs[2])
	if !strings.HasPrefix(out, "acme (namespace): 1 held, 2 waiting\n") || h < 0 || w1 < h || w2 < w1 {
		t.Fatalf("concurrency acme:\n%s", out)
	}
}
