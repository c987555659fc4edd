package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// getJob is the job as -o json jobs get prints it.
func getJob(t *testing.T, u, id string) models.Job {
	t.Helper()
	var j models.Job
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "get", id)), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestJobsUpdate(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "report", "--cron", "0 30 9 * * MON-FRI",
		"--http", "https://example.com/hook", "--payload", `{"k":"v"}`, "--timeout", "30s", "--max-attempts", "3"))

	// Flags: a new schedule, handler, payload and priority; the rest stays.
	out := ok(t, u, "jobs", "update", id, "--cron", "0 0 10 * * *", "--tz", "Europe/Berlin", "--custom", "send-email",
		"--payload", `{"k":2}`, "--priority", "low")
	r := rows(t, out, jobHeader)
	if len(r) != 1 || !strings.Contains(r[0], id) || !strings.Contains(r[0], "cron 0 0 10 * * * (Europe/Berlin)") ||
		!strings.Contains(r[0], "custom send-email") || !strings.Contains(r[0], "active") {
		t.Fatalf("update output:\n%s", out)
	}
	j := getJob(t, u, id)
	if compact(t, *j.Payload) != `{"k":2}` || *j.Priority != "low" || deref(j.Timeout) != "30s" || *j.Retry.MaxAttempts != 3 {
		t.Errorf("after update: payload %s priority %v timeout %v retry %+v", deref(j.Payload), deref(j.Priority), deref(j.Timeout), j.Retry)
	}

	// --pause after a change; a paused job stays paused when its
	// schedule changes; --resume.
	if r := rows(t, ok(t, u, "jobs", "update", id, "--no-timeout", "--pause"), jobHeader); !strings.Contains(r[0], "paused") {
		t.Errorf("--pause: %v", r)
	}
	if j := getJob(t, u, id); j.Timeout != nil || j.State != models.JobStatePaused {
		t.Errorf("after --no-timeout --pause: timeout %v, state %s", deref(j.Timeout), j.State)
	}
	if r := rows(t, ok(t, u, "jobs", "update", id, "--in", "1h"), jobHeader); !strings.Contains(r[0], "paused") || !strings.Contains(r[0], "in 1h") {
		t.Errorf("new schedule of a paused job: %v", r)
	}
	if r := rows(t, ok(t, u, "jobs", "update", id, "--resume"), jobHeader); !strings.Contains(r[0], "active") {
		t.Errorf("--resume: %v", r)
	}

	// -f: a merge body, with flags on top; null removes the payload.
	path := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(path, []byte(`{"payload": null, "retry": {"max_attempts": 7}, "handler": {"type": "nats", "subject": "a.b"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, u, "jobs", "update", id, "-f", path, "--custom", "other")
	j = getJob(t, u, id)
	if j.Payload != nil || *j.Retry.MaxAttempts != 7 || j.Handler.Type != models.HandlerTypeCustom || deref(j.Handler.Name) != "other" {
		t.Errorf("after -f: payload %s retry %+v handler %+v", deref(j.Payload), j.Retry, j.Handler)
	}
	// From standard input, and -o json prints the API's JSON; a retry of
	// {} is the cluster's default policy again.
	res := tockctlIn(t, u, `{"timeout": "1m", "retry": {}}`, "-o", "json", "jobs", "update", id, "-f", "-")
	if res.code != 0 {
		t.Fatalf("-f -: %+v", res)
	}
	var k models.Job
	if err := json.Unmarshal([]byte(res.stdout), &k); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if deref(k.Timeout) != "1m" || (k.Retry != nil && deref(k.Retry.MaxAttempts) == 7) {
		t.Errorf("after -f -: %s", res.stdout)
	}
}

func TestJobsUpdateErrors(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "j", "--in", "1h", "--custom", "w"))
	notJSON := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(notJSON, []byte(`[1]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"nothing to change", []string{"jobs", "update", id}, 1, []string{"error: nothing to change"}},
		{"field errors", []string{"jobs", "update", id, "--cron", "every day", "--http", "ftp://x"}, 1,
			[]string{"error: ", "\n  schedule.cron: ", "\n  handler.url: "}},
		{"unknown field", []string{"jobs", "update", id, "-f", "-"}, 1, []string{"\n  name: "}},
		{"unknown job", []string{"jobs", "update", "0194f3b4-0000-7000-8000-000000000000", "--in", "1s"}, 1, []string{"error: No job with id"}},
		{"bad id", []string{"jobs", "update", "nope", "--in", "1s"}, 1, []string{"error: id: must be a UUID"}},
		{"not an object", []string{"jobs", "update", id, "-f", notJSON}, 1, []string{"want one JSON object"}},
		{"payload not JSON", []string{"jobs", "update", id, "--payload", "{"}, 1, []string{"error: --payload is not valid JSON"}},
		{"pause and resume", []string{"jobs", "update", id, "--pause", "--resume"}, 2, []string{"can't be used together"}},
		{"payload and no payload", []string{"jobs", "update", id, "--payload", "1", "--no-payload"}, 2, []string{"can't be used together"}},
		{"default retry and backoff", []string{"jobs", "update", id, "--default-retry", "--backoff", "1s"}, 1, []string{"--default-retry cannot be used"}},
		{"tz without cron", []string{"jobs", "update", id, "--tz", "UTC"}, 1, []string{"--tz needs --cron"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tockctlIn(t, u, `{"name": "renamed"}`, tc.args...)
			res.failed(t, tc.code, tc.stderr...)
		})
	}
}
