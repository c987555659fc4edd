package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/jobfile"
	"github.com/tock-sched/tock/store/storetest"
)

// Jobs of every kind, exported with tockctl export and read back with
// jobfile.ParseDir, are created again in a second namespace from the
// files; the API then shows each copy as it shows its original, but for
// what the server makes (id, bucket, times) and the namespace.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	hs := fileServer(t)
	const secret = "Bearer exp0rt-s3cret"
	jobs := jobKinds(secret)
	for _, j := range jobs {
		post(t, hs.URL, j)
	}

	dir := t.TempDir()
	if got := ok(t, hs.URL, "export", "--namespace", "src", "--dir", dir); got != fmt.Sprintf("exported %d jobs to %s\n", len(jobs), dir) {
		t.Errorf("export printed %q", got)
	}
	hook, err := os.ReadFile(filepath.Join(dir, "src", "pay-hook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(hook), "s3cret") || !strings.Contains(string(hook),
		"  secret_headers:\n    # Set TOCK_SECRET_PAY_HOOK_AUTHORIZATION to this header's value before applying: the API never shows it.\n"+
			"    Authorization: {env: TOCK_SECRET_PAY_HOOK_AUTHORIZATION}\n") {
		t.Errorf("pay-hook.yaml:\n%s", hook)
	}

	parsed, err := jobfile.ParseDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed) != len(jobs) {
		t.Fatalf("parsed %d jobs, want %d", len(parsed), len(jobs))
	}
	env := map[string]string{"TOCK_SECRET_PAY_HOOK_AUTHORIZATION": secret}
	if err := jobfile.Resolve(parsed, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile); err != nil {
		t.Fatal(err)
	}
	for _, j := range parsed {
		if j.Namespace == nil || *j.Namespace != "src" {
			t.Fatalf("%s: namespace %v", j.Name, j.Namespace)
		}
		dst := "dst"
		j.Namespace = &dst
		body, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		post(t, hs.URL, string(body))
	}

	src, dst := list(t, hs.URL, "src"), list(t, hs.URL, "dst")
	if len(src) != len(dst) {
		t.Fatalf("%d jobs in src, %d in dst", len(src), len(dst))
	}
	for i := range src {
		a, b := comparable(t, src[i], src), comparable(t, dst[i], dst)
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.MarshalIndent(a, "", "  ")
			jb, _ := json.MarshalIndent(b, "", "  ")
			t.Errorf("%s differs:\nsrc %s\ndst %s", src[i].Name, ja, jb)
		}
	}
}

// comparable is a job without what the server makes or the namespace,
// its upstreams named from the jobs of its namespace.
func comparable(t *testing.T, j models.Job, all []models.Job) models.Job {
	j.Id, j.Bucket, j.Namespace = [16]byte{}, 0, ""
	j.CreatedAt, j.UpdatedAt = time.Time{}, time.Time{}
	j.NextRunAt, j.LastRunAt, j.LastSuccessAt = nil, nil, nil
	if j.DependsOn != nil {
		ups := append([]models.Upstream(nil), *j.DependsOn...)
		for i := range ups {
			for _, o := range all {
				if o.Id == ups[i].JobId {
					ups[i].Name = &o.Name
				}
			}
			if ups[i].Name == nil {
				t.Errorf("%s: upstream %s is not in its namespace", j.Name, ups[i].JobId)
			}
			ups[i].JobId, ups[i].Namespace = [16]byte{}, nil
		}
		j.DependsOn = &ups
	}
	if j.Payload != nil { // compared as JSON values
		var v any
		_ = json.Unmarshal(*j.Payload, &v)
		b, _ := json.Marshal(v)
		raw := json.RawMessage(b)
		j.Payload = &raw
	}
	return j
}

func post(t *testing.T, url, body string) {
	t.Helper()
	r, err := http.Post(url+"/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/jobs %s: %d %s", body, r.StatusCode, b)
	}
}

func list(t *testing.T, url, ns string) []models.Job {
	t.Helper()
	out := ok(t, url, "-o", "json", "jobs", "list", "--namespace", ns, "--all")
	var l models.JobList
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// Names the API allows cannot make a path leave --dir or hide a file.
func TestExportFileName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"pay-hook": "pay-hook", "a.b_c": "a.b_c", ".": "%2E", "..": "%2E.", ".env": "%2Eenv", "a/b": "a%2Fb"} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// fileServer serves the API over a fresh store, open, with a secret key.
func fileServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, err := api.New(api.Config{Store: storetest.New(t, 16), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(), Secrets: testenv.Keyring(t), Open: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// jobKinds are jobs of every kind in namespace src, as POST /v1/jobs
// bodies: every schedule form, handler, policy, labels, dependencies (a
// chain too), a secret header of value secret.
func jobKinds(secret string) []string {
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	return []string{
		// An upstream first: files are read in order of their names.
		`{"name": "a-import", "namespace": "src", "schedule": {"cron": "15 30 2 * * *", "timezone": "Europe/Berlin", "jitter": "5s"},
		  "handler": {"type": "nats", "subject": "imports.nightly", "wait_reply": true}}`,
		`{"name": "at-once", "namespace": "src", "schedule": {"at": "` + at + `"}, "handler": {"type": "custom", "name": "mailer",
		  "log": {"cap_bytes": 4096, "policy": "head"}}, "payload": {"to": ["ops@example.com"], "n": 1e3, "z": null}}`,
		`{"name": "in-a-bit", "namespace": "src", "schedule": {"in": "90m"}, "handler": {"type": "custom", "name": "mailer"},
		  "priority": "high", "timeout": "45s", "description": "Sends the digest."}`,
		`{"name": "held", "namespace": "src", "schedule": {"cron": "0 0 * * * *"}, "handler": {"type": "custom", "name": "mailer"}, "paused": true}`,
		`{"name": "now", "namespace": "src", "handler": {"type": "custom", "name": "mailer"}, "priority": "low", "payload": "just text"}`,
		`{"name": "pay-hook", "namespace": "src", "schedule": {"cron": "0 */5 * * * MON-FRI", "start_at": "2026-01-01T00:00:00Z",
		  "end_at": "2036-12-31T23:59:59Z", "max_runs": 500},
		  "handler": {"type": "http", "url": "https://pay.example.com/hook", "method": "PUT", "headers": {"X-Team": "payments"},
		    "secret_headers": {"Authorization": "` + secret + `"}},
		  "retry": {"max_attempts": 7, "initial_backoff": "2s", "max_backoff": "2m", "multiplier": 1.5, "jitter": "equal"},
		  "missed": {"policy": "all", "grace": "2m", "max": 10}, "overlap": "buffer_one",
		  "labels": {"team": "payments", "tier": "gold"}}`,
		`{"name": "report", "namespace": "src", "schedule": {"cron": "@every 1h", "anchor": "2026-07-01T09:00:00Z"},
		  "handler": {"type": "custom", "name": "reporter"},
		  "depends_on": [{"job": "a-import"}, {"job": "pay-hook", "on": "any"}], "depends_mode": "any",
		  "depends_match": {"latest_within": "6h"}, "wait_timeout": "2h", "on_timeout": "run", "on_upstream_skipped": "run"}`,
		`{"name": "sync-acme", "namespace": "src", "schedule": {"cron": "*/30 * * * * *"}, "handler": {"type": "custom", "name": "syncer"},
		  "labels": {"customer": "acme"}, "payload": {"account": 7},
		  "concurrency": {"key": "{{ .labels.customer }}", "limit": 2, "on_limit": "skip"},
		  "rate_limit": {"key": "partner-{{ .payload.account }}", "limit": 100, "per": "1m", "burst": 10}}`,
		`{"name": "z-chain", "namespace": "src", "handler": {"type": "custom", "name": "reporter"}, "depends_on": [{"job": "report", "on": "failure"}]}`,
	}
}

// A job's calendars and on_excluded survive export and apply, and
// tockctl shows them with the job.
func TestExportCalendars(t *testing.T) {
	t.Parallel()
	hs := fileServer(t)
	for _, ns := range []string{"src", "dst"} {
		r, err := http.Post(hs.URL+"/v1/calendars", "application/json",
			strings.NewReader(`{"namespace": "`+ns+`", "name": "holidays", "dates": ["2030-12-25"]}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("create calendar in %s: %d", ns, r.StatusCode)
		}
	}
	post(t, hs.URL, `{"name": "nightly", "namespace": "src", "schedule": {"cron": "0 0 3 * * *"}, "handler": {"type": "custom", "name": "n"},
		"calendars": ["holidays"], "on_excluded": "next_allowed"}`)
	dir := t.TempDir()
	ok(t, hs.URL, "export", "--namespace", "src", "--dir", dir)
	file, err := os.ReadFile(filepath.Join(dir, "src", "nightly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), "calendars: [holidays]\non_excluded: next_allowed\n") {
		t.Errorf("nightly.yaml:\n%s", file)
	}
	// The same file in namespace dst, applied as a set.
	moved := t.TempDir()
	if err := os.WriteFile(filepath.Join(moved, "nightly.yaml"), []byte(strings.Replace(string(file), "namespace: src", "namespace: dst", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, hs.URL, "apply", "-f", moved, "--set", "cal")
	src, dst := list(t, hs.URL, "src"), list(t, hs.URL, "dst")
	if len(dst) != 1 || !reflect.DeepEqual(dst[0].Calendars, src[0].Calendars) || deref(dst[0].OnExcluded) != models.OnExcludedNextAllowed {
		t.Fatalf("applied: %+v", dst)
	}
	if out := ok(t, hs.URL, "jobs", "get", src[0].Id.String()); !strings.Contains(out, "\ncalendars:  holidays (on_excluded next_allowed)\n") {
		t.Errorf("jobs get:\n%s", out)
	}
	if out := ok(t, hs.URL, "jobs", "update", src[0].Id.String(), "--on-excluded", "skip"); !strings.Contains(out, "\ncalendars:  holidays (on_excluded skip)\n") {
		t.Errorf("jobs update --on-excluded:\n%s", out)
	}
	if out := ok(t, hs.URL, "jobs", "update", src[0].Id.String(), "--no-calendars"); strings.Contains(out, "calendars") {
		t.Errorf("jobs update --no-calendars:\n%s", out)
	}
}
