package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// server runs the real API over a real store on a fresh database.
func server(t *testing.T) (*httptest.Server, *store.Store) {
	t.Helper()
	st := storetest.New(t, 16)
	srv, err := api.New(api.Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Open:     true, // keys_test.go serves one that needs keys
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, st
}

// result is one tockctl run.
type result struct {
	code           int
	stdout, stderr string
}

// tockctl runs the command against url.
// failed checks that a run failed with exit code code, printed nothing
// on stdout, and said each of stderr on stderr.
func (res result) failed(t *testing.T, code int, stderr ...string) {
	t.Helper()
	if res.code != code {
		t.Errorf("exit %d, want %d; stderr %q", res.code, code, res.stderr)
	}
	for _, want := range stderr {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q lacks %q", res.stderr, want)
		}
	}
	if res.stdout != "" {
		t.Errorf("stdout %q", res.stdout)
	}
}

func tockctl(t *testing.T, url string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"--server", url}, args...), strings.NewReader(""), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// ok runs the command and fails the test unless it succeeds.
func ok(t *testing.T, url string, args ...string) string {
	t.Helper()
	r := tockctl(t, url, args...)
	if r.code != 0 {
		t.Fatalf("tockctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// rows is a table's lines after its header, up to the blank line that
// ends it (a single job's or execution's details follow one).
func rows(t *testing.T, table, header string) []string {
	t.Helper()
	table, _, _ = strings.Cut(strings.TrimRight(table, "\n"), "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) == 0 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), header) {
		t.Fatalf("table header %q, want %q\n%s", lines[0], header, table)
	}
	return lines[1:]
}

const (
	jobHeader  = "ID NAME STATE SCHEDULE HANDLER NEXT RUN"
	execHeader = "ID JOB SCHEDULED FOR STATE ATTEMPTS DISPATCHED STARTED FINISHED"
)

func TestJobsLifecycle(t *testing.T) {
	t.Parallel()
	hs, st := server(t)
	u := hs.URL

	out := ok(t, u, "jobs", "create", "--name", "nightly-report", "--cron", "0 30 9 * * MON-FRI", "--tz", "Europe/Berlin",
		"--http", "https://example.com/hook", "--method", "PUT", "--header", "X-Team=abc",
		"--payload", `{"k":"v"}`, "--timeout", "30s", "--max-attempts", "3")
	r := rows(t, out, jobHeader)
	if len(r) != 1 || !strings.Contains(r[0], "nightly-report") || !strings.Contains(r[0], "active") ||
		!strings.Contains(r[0], "cron 0 30 9 * * MON-FRI (Europe/Berlin)") || !strings.Contains(r[0], "http PUT https://example.com/hook") {
		t.Fatalf("create output:\n%s", out)
	}
	id := uuidRE.FindString(r[0])
	if id == "" {
		t.Fatalf("no id in %q", r[0])
	}

	ok(t, u, "jobs", "create", "--name", "ping", "--in", "1h", "--nats", "ops.ping", "--wait-reply")
	ok(t, u, "jobs", "create", "--name", "mail", "--namespace", "team-a", "--custom", "send-email")

	// -o json prints the API's JSON.
	var j models.Job
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "get", id)), &j); err != nil {
		t.Fatal(err)
	}
	if j.Id.String() != id || j.Name != "nightly-report" || *j.Retry.MaxAttempts != 3 || *j.Timeout != "30s" ||
		(*j.Handler.Headers)["X-Team"] != "abc" || compact(t, *j.Payload) != `{"k":"v"}` {
		t.Errorf("job JSON: %+v", j)
	}

	out = ok(t, u, "jobs", "list")
	r = rows(t, out, jobHeader)
	if len(r) != 3 || !strings.Contains(r[0], "nightly-report") || !strings.Contains(r[1], "ping") ||
		!strings.Contains(r[1], "nats ops.ping (wait reply)") || !strings.Contains(r[2], "team-a/mail") {
		t.Errorf("list:\n%s", out)
	}
	if r := rows(t, ok(t, u, "jobs", "list", "--prefix", "ni"), jobHeader); len(r) != 1 {
		t.Errorf("list --prefix ni: %v", r)
	}

	out = ok(t, u, "jobs", "get", id)
	if r := rows(t, out, jobHeader); len(r) != 1 || !strings.Contains(r[0], id) {
		t.Errorf("get:\n%s", out)
	}

	// Pause: the state shows, and the job lists as paused.
	out = ok(t, u, "jobs", "pause", id)
	if r := rows(t, out, jobHeader); !strings.Contains(r[0], "paused") || !strings.HasSuffix(strings.TrimSpace(r[0]), "-") {
		t.Errorf("pause:\n%s", out)
	}
	if r := rows(t, ok(t, u, "jobs", "list", "--state", "paused"), jobHeader); len(r) != 1 || !strings.Contains(r[0], id) {
		t.Errorf("list --state paused: %v", r)
	}

	// Run: a manual execution, listed and shown.
	out = ok(t, u, "jobs", "run", id)
	r = rows(t, out, execHeader)
	if len(r) != 1 || !strings.Contains(r[0], "nightly-report") || !strings.Contains(r[0], "queued (manual)") {
		t.Fatalf("run:\n%s", out)
	}
	execID := uuidRE.FindString(r[0])
	// With --idempotency-key, running again answers the first run.
	keyed := uuidRE.FindString(rows(t, ok(t, u, "jobs", "run", id, "--idempotency-key", "run-1"), execHeader)[0])
	if again := ok(t, u, "jobs", "run", id, "--idempotency-key", "run-1"); !strings.Contains(again, keyed) {
		t.Errorf("run again with the same key: want execution %s\n%s", keyed, again)
	}
	// (Gone again, so that the run above is the job's only execution.)
	if _, err := st.Pool().Exec(context.Background(), "DELETE FROM executions WHERE id = $1", uuid.MustParse(keyed)); err != nil {
		t.Fatal(err)
	}
	out = ok(t, u, "executions", "list", "--job", id)
	if r := rows(t, out, execHeader); len(r) != 1 || !strings.Contains(r[0], execID) {
		t.Errorf("executions list:\n%s", out)
	}
	out = ok(t, u, "executions", "get", execID)
	if r := rows(t, out, execHeader); len(r) != 1 || !strings.Contains(r[0], execID) {
		t.Errorf("executions get:\n%s", out)
	}
	// What tock did to it by itself (a rescue's note) is shown with it.
	if _, err := st.Pool().Exec(context.Background(), `INSERT INTO execution_notes (execution_id, scheduled_for, at, kind, note)
		SELECT id, scheduled_for, now(), 'rescued', 'published again as dispatch 1' FROM executions WHERE id = $1`,
		uuid.MustParse(execID)); err != nil {
		t.Fatal(err)
	}
	if out = ok(t, u, "executions", "get", execID); !strings.Contains(out, "what tock did:") ||
		!strings.Contains(out, "rescued  published again as dispatch 1") {
		t.Errorf("executions get of a rescued execution: no note\n%s", out)
	}
	var list models.ExecutionList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "executions", "list", "--job", id)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Id.String() != execID || !list.Items[0].Manual {
		t.Errorf("executions list JSON: %+v", list)
	}

	out = ok(t, u, "jobs", "resume", id)
	if r := rows(t, out, jobHeader); !strings.Contains(r[0], "active") {
		t.Errorf("resume:\n%s", out)
	}

	if out := ok(t, u, "jobs", "delete", id); !strings.Contains(out, "deleted job "+id) {
		t.Errorf("delete: %q", out)
	}
	res := tockctl(t, u, "jobs", "get", id)
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: No job with id "+id) || res.stdout != "" {
		t.Errorf("get after delete: %+v", res)
	}
}

func TestListAllPages(t *testing.T) {
	t.Parallel()
	hs, st := server(t)
	u := hs.URL
	for i := range 5 {
		ok(t, u, "jobs", "create", "--name", fmt.Sprintf("job-%d", i), "--in", "1h", "--custom", "worker")
	}
	res := tockctl(t, u, "jobs", "list", "--limit", "2")
	if res.code != 0 || len(rows(t, res.stdout, jobHeader)) != 2 || !strings.Contains(res.stderr, "--all") {
		t.Errorf("one page: %+v", res)
	}
	if r := rows(t, ok(t, u, "jobs", "list", "--limit", "2", "--all"), jobHeader); len(r) != 5 {
		t.Errorf("--all: %d rows", len(r))
	}
	var all models.JobList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "list", "--limit", "2", "--all")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 5 || all.NextCursor != nil {
		t.Errorf("--all JSON: %d items", len(all.Items))
	}

	// Executions over pages, newest first.
	id := all.Items[0].Id
	now, err := st.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := st.CreateManualExecution(context.Background(), id, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	r := rows(t, ok(t, u, "executions", "list", "--job", id.String(), "--limit", "1", "--all"), execHeader)
	if len(r) != 3 || !strings.Contains(r[0], now.Add(2*time.Second).UTC().Format(time.RFC3339)) {
		t.Errorf("executions --all:\n%s", strings.Join(r, "\n"))
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	ok(t, u, "jobs", "create", "--name", "taken", "--custom", "w")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"duplicate name", []string{"jobs", "create", "--name", "taken", "--custom", "w"}, 1,
			[]string{`error: A job named "taken" already exists in namespace "default".`}},
		{"field errors", []string{"jobs", "create", "--name", "bad name", "--cron", "0 0 * * * *", "--tz", "Mars/Base", "--http", "ftp://x"}, 1,
			[]string{"error: ", "\n  name: ", "\n  schedule.timezone: ", "Mars/Base", "\n  handler.url: "}},
		{"bad state", []string{"jobs", "list", "--state", "sleeping"}, 1, []string{"\n  state: "}},
		{"bad id", []string{"jobs", "get", "nope"}, 1, []string{"error: id: must be a UUID"}},
		{"unknown execution", []string{"executions", "get", "0194f3b4-0000-7000-8000-000000000000"}, 1, []string{"error: No execution with id"}},
		{"payload not JSON", []string{"jobs", "create", "--name", "p", "--custom", "w", "--payload", "{"}, 1, []string{"error: --payload is not valid JSON"}},
		{"no handler", []string{"jobs", "create", "--name", "x"}, 2, []string{"--http", "--nats", "--custom"}},
		{"two handlers", []string{"jobs", "create", "--name", "x", "--custom", "a", "--nats", "b"}, 2, []string{"can't be used together"}},
		{"two schedules", []string{"jobs", "create", "--name", "x", "--custom", "a", "--in", "1s", "--now"}, 2, []string{"can't be used together"}},
		{"tz without cron", []string{"jobs", "create", "--name", "x", "--custom", "a", "--tz", "UTC"}, 1, []string{"--tz needs --cron"}},
		{"unknown command", []string{"jobs", "frobnicate"}, 2, []string{"tockctl: error:"}},
		{"bad output", []string{"-o", "yaml", "jobs", "list"}, 2, []string{"tockctl: error:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tockctl(t, u, tc.args...)
			res.failed(t, tc.code, tc.stderr...)
		})
	}
}

func TestServerDown(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(nil)
	u := hs.URL
	hs.Close()
	res := tockctl(t, u, "jobs", "list")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: GET "+u+"/v1/jobs: ") {
		t.Errorf("%+v", res)
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &errOut); code != 0 {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{"jobs create", "executions list", "--server", "TOCK_SERVER"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
