package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/storetest"
)

// tockctl shows a job's secret headers by name only: the table's details
// name them, and -o json prints the API's "***".
func TestJobsGetHidesSecrets(t *testing.T) {
	t.Parallel()
	keys := testenv.Keyring(t)
	srv, err := api.New(api.Config{Store: storetest.New(t, 16), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(), Secrets: keys, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	const value = "Bearer ctl-s3cret-1f2e"
	job := `{"name": "hook", "schedule": {"in": "1h"}, "handler": {"type": "http", "url": "https://example.com/hook",` +
		` "headers": {"X-Team": "payments", "Cookie": "sid=ctl-s3cret"}, "secret_headers": {"Authorization": "` + value + `"}}}`
	var out strings.Builder
	code := run([]string{"--server", hs.URL, "jobs", "create", "-f", "-"}, strings.NewReader(job+"\n"), &out, io.Discard)
	if code != 0 || strings.Contains(out.String(), "s3cret") {
		t.Fatalf("create -f: exit %d, %s", code, out.String())
	}
	id := uuidRE.FindString(ok(t, hs.URL, "jobs", "list"))
	text := ok(t, hs.URL, "jobs", "get", id)
	if strings.Contains(text, "s3cret") || !regexp.MustCompile(`secret headers:\s+Authorization\n`).MatchString(text) {
		t.Errorf("jobs get:\n%s", text)
	}
	js := ok(t, hs.URL, "-o", "json", "jobs", "get", id)
	if strings.Contains(js, "s3cret") || !strings.Contains(js, `"Authorization": "***"`) || !strings.Contains(js, `"Cookie": "***"`) ||
		!strings.Contains(js, `"X-Team": "payments"`) {
		t.Errorf("jobs get -o json:\n%s", js)
	}
	if l := ok(t, hs.URL, "-o", "json", "jobs", "list"); strings.Contains(l, "s3cret") {
		t.Errorf("jobs list -o json:\n%s", l)
	}
}
