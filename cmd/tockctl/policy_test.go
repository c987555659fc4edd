package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

// jobs create takes the missed-run and overlap policies, the schedule's
// window and max_runs, and jitter; the job's JSON has them, and jobs
// get shows them below the job's row.
func TestCreateWithPolicies(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	var j models.Job
	out := ok(t, u, "-o", "json", "jobs", "create", "--name", "bounded", "--cron", "0 0 * * * *", "--custom", "w",
		"--missed", "all", "--grace", "5m", "--missed-max", "10", "--overlap", "skip",
		"--start-at", "2036-01-01T00:00:00Z", "--end-at", "2036-12-31T00:00:00+01:00", "--max-runs", "5", "--jitter", "30s")
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	s := j.Schedule
	if j.Missed == nil || deref(j.Missed.Policy) != models.MissedPolicyPolicyAll || deref(j.Missed.Grace) != "5m" ||
		deref(j.Missed.Max) != 10 || deref(j.Overlap) != models.OverlapSkip || j.Runs == nil || *j.Runs != 0 ||
		s.StartAt == nil || !s.StartAt.Equal(mustTime(t, "2036-01-01T00:00:00Z")) ||
		s.EndAt == nil || !s.EndAt.Equal(mustTime(t, "2036-12-30T23:00:00Z")) ||
		deref(s.MaxRuns) != 5 || deref(s.Jitter) != "30s" {
		t.Fatalf("created %s", out)
	}

	out = ok(t, u, "jobs", "get", j.Id.String())
	if r := rows(t, out, jobHeader); len(r) != 1 || !strings.Contains(r[0], "bounded") {
		t.Errorf("get:\n%s", out)
	}
	for _, want := range []string{
		"\nmissed:   all (grace 5m, max 10)\n",
		"\noverlap:  skip\n",
		"\nruns:     0 of max_runs 5\n",
		"\nwindow:   from 2036-01-01T00:00:00Z until 2036-12-30T23:00:00Z\n",
		"\njitter:   30s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get lacks %q:\n%s", want, out)
		}
	}

	// A one-shot job takes --jitter; without a schedule flag it runs
	// once, now, jittered.
	var k models.Job
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "create", "--name", "soon", "--jitter", "2s", "--custom", "w")), &k); err != nil {
		t.Fatal(err)
	}
	if deref(k.Schedule.Jitter) != "2s" || k.Schedule.Cron != nil || k.Schedule.At != nil || k.Schedule.In != nil {
		t.Errorf("--jitter alone: schedule %+v", k.Schedule)
	}
}

// jobs update --missed and --overlap change the policies; a missed-run
// flag replaces the whole missed-run policy and keeps the overlap one; a
// window flag comes with --cron; the server checks the values.
func TestUpdatePolicies(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "hourly", "--cron", "0 0 * * * *", "--custom", "w"))

	out := ok(t, u, "jobs", "update", id, "--missed", "latest", "--grace", "2m", "--overlap", "buffer_one")
	if !strings.Contains(out, "\nmissed:   latest (grace 2m") || !strings.Contains(out, "\noverlap:  buffer_one\n") {
		t.Errorf("update output:\n%s", out)
	}
	j := getJob(t, u, id)
	if deref(j.Missed.Policy) != models.MissedPolicyPolicyLatest || deref(j.Missed.Grace) != "2m" || deref(j.Overlap) != models.OverlapBufferOne {
		t.Errorf("after --missed latest --grace 2m --overlap buffer_one: missed %+v overlap %v", deref(j.Missed), deref(j.Overlap))
	}
	ok(t, u, "jobs", "update", id, "--missed", "all")
	j = getJob(t, u, id)
	if deref(j.Missed.Policy) != models.MissedPolicyPolicyAll || deref(j.Missed.Grace) == "2m" || deref(j.Overlap) != models.OverlapBufferOne {
		t.Errorf("after --missed all: missed %+v overlap %v; want the default grace and the overlap kept", deref(j.Missed), deref(j.Overlap))
	}

	out = ok(t, u, "jobs", "update", id, "--cron", "0 30 * * * *", "--start-at", "2036-01-01T00:00:00Z", "--max-runs", "3", "--jitter", "1s")
	if !strings.Contains(out, "\nwindow:   from 2036-01-01T00:00:00Z\n") {
		t.Errorf("update output:\n%s", out)
	}
	j = getJob(t, u, id)
	if deref(j.Schedule.Cron) != "0 30 * * * *" || j.Schedule.StartAt == nil || !j.Schedule.StartAt.Equal(mustTime(t, "2036-01-01T00:00:00Z")) ||
		deref(j.Schedule.MaxRuns) != 3 || deref(j.Schedule.Jitter) != "1s" || j.Schedule.EndAt != nil {
		t.Errorf("after a windowed schedule: %+v", j.Schedule)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"bad overlap", []string{"--overlap", "queue"}, []string{"error: ", "\n  overlap: "}},
		{"bad missed", []string{"--missed", "some", "--missed-max", "0"}, []string{"\n  missed.policy: ", "\n  missed.max: "}},
		{"bad grace", []string{"--grace", "10ms"}, []string{"\n  missed.grace: "}},
		{"bad jitter", []string{"--in", "1h", "--jitter", "forever"}, []string{"\n  schedule.jitter: "}},
		{"max runs 0", []string{"--cron", "@hourly", "--max-runs", "0"}, []string{"\n  schedule.max_runs: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tockctl(t, u, append([]string{"jobs", "update", id}, tc.args...)...).failed(t, 1, tc.stderr...)
		})
	}
}

// The window flags need --cron, update's --jitter a schedule flag, and
// the times RFC 3339, all checked before any request; -f refuses the
// new flags as it does the other single-job flags.
func TestPolicyFlagErrors(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "j", "--cron", "@hourly", "--custom", "w", "--jitter", "5s"))
	path := writeFile(t, jobLine("from-file"))
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"create start-at without cron", []string{"jobs", "create", "--name", "x", "--custom", "w", "--in", "1h", "--start-at", "2036-01-01T00:00:00Z"}, "--start-at needs --cron"},
		{"create end-at without cron", []string{"jobs", "create", "--name", "x", "--custom", "w", "--end-at", "2036-01-01T00:00:00Z"}, "--end-at needs --cron"},
		{"create max-runs without cron", []string{"jobs", "create", "--name", "x", "--custom", "w", "--at", "2036-01-01T00:00:00Z", "--max-runs", "2"}, "--max-runs needs --cron"},
		{"create start-at not RFC 3339", []string{"jobs", "create", "--name", "x", "--custom", "w", "--cron", "@hourly", "--start-at", "tomorrow"}, `--start-at "tomorrow" is not an RFC 3339 time`},
		{"update start-at without cron", []string{"jobs", "update", id, "--start-at", "2036-01-01T00:00:00Z"}, "--start-at needs --cron"},
		{"update end-at not RFC 3339", []string{"jobs", "update", id, "--cron", "@hourly", "--end-at", "2036-01-01"}, `--end-at "2036-01-01" is not an RFC 3339 time`},
		{"update jitter alone", []string{"jobs", "update", id, "--jitter", "1s"}, "--jitter needs --cron, --at, --in or --now"},
		{"file with policy flags", []string{"jobs", "create", "-f", path, "--max-runs", "3", "--overlap", "skip"}, "--max-runs, --overlap cannot be used with --file"},
		{"file with window flags", []string{"jobs", "create", "-f", path, "--start-at", "2036-01-01T00:00:00Z", "--missed", "all"}, "--start-at, --missed cannot be used with --file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tockctl(t, u, tc.args...).failed(t, 1, tc.stderr)
		})
	}
	// None of them reached the server: the job is as created, and the
	// file's job was not.
	if j := getJob(t, u, id); deref(j.Schedule.Jitter) != "5s" || j.Schedule.StartAt != nil {
		t.Errorf("job changed: %+v", j.Schedule)
	}
	if r := rows(t, ok(t, u, "jobs", "list"), jobHeader); len(r) != 1 {
		t.Errorf("jobs: %v", r)
	}
}

const skipHeader = "FIRST LAST RUNS REASON RECORDED DETAIL"

// jobs skips lists a job's skipped ranges: none as an empty table or
// {"items":[]}, some as rows, newest first, a page at a time; an
// unknown job is the server's 404, exit code 1.
func TestJobSkips(t *testing.T) {
	t.Parallel()
	hs, st := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "hourly", "--cron", "@hourly", "--custom", "w"))

	if r := rows(t, ok(t, u, "jobs", "skips", id), skipHeader); len(r) != 0 {
		t.Errorf("no skips: %v", r)
	}
	for _, args := range [][]string{{"-o", "json", "jobs", "skips", id}, {"-o", "json", "jobs", "skips", id, "--all"}} {
		if got := compact(t, []byte(ok(t, u, args...))); got != `{"items":[]}` {
			t.Errorf("%v: %s", args, got)
		}
	}
	tockctl(t, u, "jobs", "skips", uuid.NewString()).failed(t, 1, "error: No job with id")
	tockctl(t, u, "jobs", "skips", "nope").failed(t, 1, "error: id: must be a UUID")

	// Two ranges, recorded as the scanner would.
	for _, k := range []struct {
		first, last string
		runs        int64
		reason      string
	}{
		{"2036-01-01T00:00:00Z", "2036-01-01T02:00:00Z", 3, "missed"},
		{"2036-01-02T00:00:00Z", "2036-01-02T00:00:00Z", 1, "overlap"},
	} {
		if _, err := st.Pool().Exec(context.Background(), `INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, namespace, job_name)
			VALUES ($1, $2, $3, $4, $5, 'default', 'hourly')`, uuid.MustParse(id), mustTime(t, k.first), mustTime(t, k.last), k.runs, k.reason); err != nil {
			t.Fatal(err)
		}
	}
	r := rows(t, ok(t, u, "jobs", "skips", id), skipHeader)
	if len(r) != 2 || strings.Join(strings.Fields(r[0])[:4], " ") != "2036-01-02T00:00:00Z 2036-01-02T00:00:00Z 1 overlap" ||
		strings.Join(strings.Fields(r[1])[:4], " ") != "2036-01-01T00:00:00Z 2036-01-01T02:00:00Z 3 missed" {
		t.Errorf("skips:\n%s", strings.Join(r, "\n"))
	}
	res := tockctl(t, u, "jobs", "skips", id, "--limit", "1")
	if res.code != 0 || len(rows(t, res.stdout, skipHeader)) != 1 || !strings.Contains(res.stderr, "more skipped runs: --cursor ") {
		t.Errorf("one page: %+v", res)
	}
	var all models.SkippedRunList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "skips", id, "--limit", "1", "--all")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 2 || all.Items[1].Runs != 3 || all.Items[1].Reason != models.SkippedRunReasonMissed || all.NextCursor != nil {
		t.Errorf("--all JSON: %+v", all)
	}
}

// executions get shows a jittered run's due_at and a backfill's mark
// below the execution's row.
func TestExecutionDueAtAndBackfill(t *testing.T) {
	t.Parallel()
	hs, st := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "hourly", "--cron", "@hourly", "--custom", "w"))
	ctx := context.Background()
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateManualExecution(ctx, uuid.MustParse(id), now)
	if err != nil {
		t.Fatal(err)
	}
	if out := ok(t, u, "executions", "get", e.ID.String()); strings.Contains(out, "due at:") || strings.Contains(out, "backfill:") {
		t.Errorf("a plain run:\n%s", out)
	}
	due := now.Add(17 * time.Second)
	if _, err := st.Pool().Exec(ctx, "UPDATE executions SET due_at = $2, backfill = true WHERE id = $1", e.ID, due); err != nil {
		t.Fatal(err)
	}
	out := ok(t, u, "executions", "get", e.ID.String())
	if r := rows(t, out, execHeader); len(r) != 1 || !strings.Contains(r[0], e.ID.String()) {
		t.Errorf("executions get:\n%s", out)
	}
	for _, want := range []string{"\ndue at:    " + due.UTC().Format(time.RFC3339) + "\n", "\nbackfill:  yes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("executions get lacks %q:\n%s", want, out)
		}
	}
}
