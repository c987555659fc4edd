package main

import (
	"strings"
	"testing"
)

// namespaces set gives a namespace its retention; namespaces lists it;
// a bad retention is the server's 400, exit code 1.
func TestNamespacesCommands(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	ok(t, u, "jobs", "create", "--name", "ns-job", "--namespace", "team-a", "--in", "1h", "--custom", "w")
	if out := ok(t, u, "namespaces", "set", "team-a", "--retention", "30d"); !strings.Contains(out, "30d") {
		t.Errorf("set:\n%s", out)
	}
	r := rows(t, ok(t, u, "namespaces"), "NAMESPACE")
	if len(r) != 1 || !strings.Contains(r[0], "team-a") || !strings.Contains(r[0], "30d") || !strings.Contains(r[0], "yes") {
		t.Errorf("list: %v", r)
	}
	if res := tockctl(t, u, "namespaces", "set", "team-a", "--retention", "5m"); res.code != 1 || !strings.Contains(res.stderr, "retention") {
		t.Errorf("a bad retention: exit %d, stderr %s", res.code, res.stderr)
	}
}
