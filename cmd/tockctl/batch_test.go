package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// batchServer is server with a count of the batch requests it answered.
func batchServer(t *testing.T) (*httptest.Server, *store.Store, *atomic.Int64) {
	t.Helper()
	st := storetest.New(t, 16)
	srv, err := api.New(api.Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Open:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var batches atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs:batch" {
			batches.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, st, &batches
}

// tockctlIn runs the command against url with stdin.
func tockctlIn(t *testing.T, url, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"--server", url}, args...), strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// jobLine is a valid job as one line of a jobs file.
func jobLine(name string) string {
	return fmt.Sprintf(`{"name": %q, "schedule": {"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"}, "handler": {"type": "custom", "name": "worker"}}`, name)
}

func writeFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func countJobs(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.Pool().QueryRow(context.Background(), "SELECT count(*) FROM jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateFromFile(t *testing.T) {
	t.Parallel()
	hs, st, batches := batchServer(t)
	u := hs.URL
	ok(t, u, "jobs", "create", "--name", "taken", "--custom", "w")

	path := writeFile(t,
		jobLine("first"), // 1
		jobLine("second"),
		"", // 3: blank, skipped
		`{"name": "bad-cron", "schedule": {"cron": "every day"}, "handler": {"type": "custom", "name": "w"}}`,
		`{"name": "not json",`,
		jobLine("first"), // 6: the name of line 1
		jobLine("taken"), // 7: a stored job's name
		`{"name": "two bad", "handler": {"type": "smtp"}}`,
		`[1, 2]`,
		jobLine("last"), // 10, no newline after it
	)
	res := tockctl(t, u, "jobs", "create", "-f", path)
	if res.code != 1 {
		t.Errorf("exit %d, want 1: some jobs failed", res.code)
	}
	for _, want := range []string{
		"line 4: schedule.cron: ",
		"line 5: not valid JSON",
		`line 6: A job named "first" in namespace "default" comes earlier in this request (line 1).`,
		`line 7: A job named "taken" already exists in namespace "default".`,
		"line 8: 2 fields are invalid\n  name: ",
		"\n  handler.type: ",
		"line 9: job: must be a JSON object",
		"error: 6 of 9 jobs in " + path + " were not created",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Index(res.stderr, "line 4:") > strings.Index(res.stderr, "line 5:") {
		t.Errorf("failures out of line order:\n%s", res.stderr)
	}
	if want := "created 3 jobs from " + path + "; 6 failed\n"; res.stdout != want {
		t.Errorf("stdout %q, want %q", res.stdout, want)
	}
	if n := countJobs(t, st); n != 4 {
		t.Errorf("%d jobs stored, want 4 (taken, first, second, last)", n)
	}
	if b := batches.Load(); b != 1 {
		t.Errorf("%d batch requests for 9 jobs, want 1", b)
	}
	out := ok(t, u, "jobs", "list", "--prefix", "l")
	if r := rows(t, out, jobHeader); len(r) != 1 || !strings.Contains(r[0], "last") || !strings.Contains(r[0], "cron 0 30 9 * * MON-FRI (Europe/Berlin)") {
		t.Errorf("the job of the last line:\n%s", out)
	}
}

// Over a thousand jobs go in several requests; line numbers stay right
// across them; standard input works as a file.
func TestCreateFromStdinInChunks(t *testing.T) {
	t.Parallel()
	hs, st, batches := batchServer(t)
	const n = 2*api.MaxBatchJobs + 500
	var lines []string
	for i := 1; i <= n; i++ {
		if i == 1500 || i == n {
			lines = append(lines, `{"name": "bad", "handler": {"type": "custom", "name": "w"}, "timeout": "forever"}`)
			continue
		}
		lines = append(lines, jobLine(fmt.Sprintf("job-%05d", i)))
	}
	res := tockctlIn(t, hs.URL, strings.Join(lines, "\n")+"\n", "jobs", "create", "-f", "-")
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	want := fmt.Sprintf("line 1500: timeout: must be a duration such as 1s, 1m30s or 2h\nline %d: timeout: ", n)
	if !strings.Contains(res.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
	}
	if want := fmt.Sprintf("created %d jobs from stdin; 2 failed\n", n-2); res.stdout != want {
		t.Errorf("stdout %q, want %q", res.stdout, want)
	}
	if got := countJobs(t, st); got != n-2 {
		t.Errorf("%d jobs stored, want %d", got, n-2)
	}
	if b := batches.Load(); b != 3 {
		t.Errorf("%d batch requests for %d jobs, want 3", b, n)
	}

	// All good: exit 0.
	res = tockctlIn(t, hs.URL, jobLine("fine-1")+"\n"+jobLine("fine-2")+"\n", "jobs", "create", "-f", "-")
	if res.code != 0 || res.stdout != "created 2 jobs from stdin; 0 failed\n" || res.stderr != "" {
		t.Errorf("%+v", res)
	}
}

func TestCreateFromFileJSON(t *testing.T) {
	t.Parallel()
	hs, _, _ := batchServer(t)
	path := writeFile(t, jobLine("a"), `nope`, jobLine("a"))
	res := tockctl(t, hs.URL, "-o", "json", "jobs", "create", "-f", path)
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	var rep fileReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if rep.Created != 1 || rep.Failed != 2 || len(rep.Items) != 3 {
		t.Fatalf("report %+v", rep)
	}
	for i, want := range []int{201, 400, 409} {
		it := rep.Items[i]
		if it.Line != i+1 || it.Status != want || (want == 201) != (it.Job != nil) || (want != 201) != (it.Problem != nil) {
			t.Errorf("item %d: %+v", i, it)
		}
	}
	if rep.Items[0].Job.Name != "a" {
		t.Errorf("created job %+v", rep.Items[0].Job)
	}
	if strings.Contains(res.stderr, "line ") {
		t.Errorf("-o json printed failures on stderr too: %s", res.stderr)
	}
}

func TestCreateFromFileErrors(t *testing.T) {
	t.Parallel()
	hs, _, _ := batchServer(t)
	u := hs.URL
	path := writeFile(t, jobLine("a"))
	down := httptest.NewServer(nil)
	down.Close()
	for _, tc := range []struct {
		name   string
		url    string
		args   []string
		code   int
		stderr []string
	}{
		{"a job flag with -f", u, []string{"jobs", "create", "-f", path, "--cron", "* * * * * *", "--priority", "high"}, 1,
			[]string{"--cron, --priority cannot be used with --file"}},
		{"--name with -f", u, []string{"jobs", "create", "-f", path, "--name", "x"}, 2, []string{"can't be used together"}},
		{"a handler with -f", u, []string{"jobs", "create", "-f", path, "--custom", "x"}, 2, []string{"can't be used together"}},
		{"neither -f nor --name", u, []string{"jobs", "create", "--custom", "x"}, 2, []string{"--name", "--file"}},
		{"no such file", u, []string{"jobs", "create", "-f", filepath.Join(t.TempDir(), "none.jsonl")}, 1, []string{"no such file"}},
		{"server down", down.URL, []string{"jobs", "create", "-f", path}, 1, []string{"error: lines 1 to 1: POST ", "were not created"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tockctl(t, tc.url, tc.args...)
			if res.code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", res.code, tc.code, res.stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr %q lacks %q", res.stderr, want)
				}
			}
		})
	}
}
