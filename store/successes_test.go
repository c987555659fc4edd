package store

import (
	"github.com/tock-sched/tock/domain"

	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// runAt is a manual execution of job j scheduled for at.
func runAt(t testing.TB, s *Store, j *Job, at time.Time) *Execution {
	t.Helper()
	e, err := s.RunNow(context.Background(), j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// lastSuccess is job id's LastSuccessAt as GetJob and ListJobs read it
// (failing unless they agree).
func lastSuccess(t testing.TB, s *Store, j *Job) *time.Time {
	t.Helper()
	ctx := context.Background()
	got, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := s.ListJobs(ctx, JobFilter{Namespace: j.Namespace, NamePrefix: j.Name})
	if err != nil || len(list) != 1 {
		t.Fatalf("list %s: %d jobs, %v", j.Name, len(list), err)
	}
	if a, b := got.LastSuccessAt, list[0].LastSuccessAt; (a == nil) != (b == nil) || (a != nil && !a.Equal(*b)) {
		t.Fatalf("GetJob's last success %v, ListJobs' %v", a, b)
	}
	return got.LastSuccessAt
}

func succeeded(e *Execution, at time.Time) AttemptEvent {
	return AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: at, Type: domain.EventSucceeded}
}

// alerted is the label set that makes the recorder keep a job's last
// success in job_successes; without it the last success is read from the
// history.
var alerted = domain.Labels{AlertLabel: "true"}

// trackedJob is testJob("name"), labelled alerted when tracked.
func trackedJob(name string, tracked bool) *Job {
	j := testJob(name, nil)
	if tracked {
		j.Labels = alerted
	}
	return j
}

func TestJobLastSuccess(t *testing.T) {
	t.Parallel()
	for _, tracked := range []bool{false, true} {
		t.Run(map[bool]string{false: "from history", true: "alerted"}[tracked], func(t *testing.T) {
			t.Parallel()
			testJobLastSuccess(t, tracked)
		})
	}
}

func testJobLastSuccess(t *testing.T, tracked bool) {
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	j := mustCreate(t, s, trackedJob("nightly", tracked))
	other := mustCreate(t, s, trackedJob("other", tracked))
	if got := lastSuccess(t, s, j); got != nil {
		t.Fatalf("before any success: %v", got)
	}

	e1, e2, e3 := runAt(t, s, j, t0), runAt(t, s, j, t0.Add(time.Minute)), runAt(t, s, j, t0.Add(2*time.Minute))
	end1 := t0.Add(10*time.Second + 123*time.Millisecond)
	record(t, s, succeeded(e1, end1))
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end1) || !got.Equal(*get(t, s, e1.ID).FinishedAt) {
		t.Fatalf("after a success: %v, want %v", got, end1)
	}
	if got := lastSuccess(t, s, other); got != nil {
		t.Fatalf("another job's success moved this one's: %v", got)
	}

	// A failure, final or not, leaves it.
	record(t, s, AttemptEvent{ID: e2.ID, Attempt: 1, Executor: "x", At: t0.Add(time.Hour), Type: domain.EventFailed,
		Final: true, Error: "boom"})
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end1) {
		t.Fatalf("after a failure: %v, want %v", got, end1)
	}

	// A success of an earlier run, reported late, does not move it back;
	// nor does a repeated report of the newer one.
	end3 := t0.Add(3 * time.Hour)
	record(t, s, succeeded(e3, end3))
	record(t, s, succeeded(e3, end3.Add(time.Hour)))
	e4 := runAt(t, s, j, t0.Add(-time.Hour))
	record(t, s, succeeded(e4, t0))
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end3) {
		t.Fatalf("after a late, older success: %v, want %v", got, end3)
	}
	// Only an alerted job has a row, and the recorder keeps it; the
	// others' successes write nothing beside their executions.
	rows := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1 AND execution_id = $2", j.ID, e3.ID)
	if all := count(t, s, "SELECT count(*) FROM job_successes"); (tracked && (rows != 1 || all != 2)) || (!tracked && all != 0) {
		t.Fatalf("alerted %v: %d rows in job_successes, %d naming execution %s", tracked, all, rows, e3.ID)
	}

	// Pausing the job (an update) keeps it, and the update's result
	// shows it.
	paused, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	paused.State, paused.NextRunAt = domain.JobPaused, nil
	if err := s.UpdateJob(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if paused.LastSuccessAt == nil || !paused.LastSuccessAt.Equal(end3) {
		t.Fatalf("UpdateJob's result: last success %v, want %v", paused.LastSuccessAt, end3)
	}

	// Deleting the job deletes its row.
	if err := s.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1", j.ID); n != 0 {
		t.Fatalf("%d rows of the deleted job", n)
	}
}

// Several successes of one job in one batch: an alerted job keeps the one
// that ended latest, whatever their order; a job read from its history
// shows the end of its latest-scheduled success. The batch's other jobs
// get theirs.
func TestJobLastSuccessInOneBatch(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := baseTime()
	for _, tracked := range []bool{false, true} {
		name := map[bool]string{false: "h", true: "t"}[tracked]
		a, b := mustCreate(t, s, trackedJob(name+"a", tracked)), mustCreate(t, s, trackedJob(name+"b", tracked))
		a1, a2, a3 := runAt(t, s, a, t0), runAt(t, s, a, t0.Add(time.Second)), runAt(t, s, a, t0.Add(2*time.Second))
		b1 := runAt(t, s, b, t0)
		record(t, s,
			succeeded(a2, t0.Add(5*time.Minute)),
			AttemptEvent{ID: a3.ID, Attempt: 1, Executor: "x", At: t0.Add(9 * time.Minute), Type: domain.EventFailed, Final: true},
			succeeded(a1, t0.Add(7*time.Minute)),
			succeeded(b1, t0.Add(time.Minute)),
			succeeded(a2, t0.Add(8*time.Minute)), // a repeat: ignored
		)
		want := t0.Add(5 * time.Minute) // a2's: the latest run that succeeded
		if tracked {
			want = t0.Add(7 * time.Minute) // a1's: the success that ended last
		}
		if got := lastSuccess(t, s, a); got == nil || !got.Equal(want) {
			t.Fatalf("alerted %v: a: %v, want %v", tracked, got, want)
		}
		if got := lastSuccess(t, s, b); got == nil || !got.Equal(t0.Add(time.Minute)) {
			t.Fatalf("alerted %v: b: %v", tracked, got)
		}
	}
}

// A success of a deleted alerted job's execution, recorded after the
// deletion, leaves no row behind.
func TestLastSuccessOfDeletedJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	j := mustCreate(t, s, trackedJob("gone", true))
	e := runAt(t, s, j, baseTime())
	if n := count(t, s, "SELECT count(*) FROM job_successes"); n != 1 {
		t.Fatalf("%d rows for an alerted job", n)
	}
	if err := s.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	record(t, s, succeeded(e, baseTime()))
	if got := get(t, s, e.ID); got.State != domain.ExecSucceeded {
		t.Fatalf("execution %s", got.State)
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes"); n != 0 {
		t.Fatalf("%d rows for a deleted job", n)
	}
}

// job_successes follows the alert label, however jobs are written: a job
// gets its row when it is created or patched with the label (seeded from
// its history), keeps it while labelled, and loses it with the label.
func TestTrackedSuccessesFollowTheLabel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	rowOf := func(j *Job) (n int, at *time.Time) {
		t.Helper()
		err := s.pool.QueryRow(ctx, "SELECT count(*), max(last_success_at) FROM job_successes WHERE job_id = $1", j.ID).
			Scan(&n, &at)
		if err != nil {
			t.Fatal(err)
		}
		return n, at
	}
	relabel := func(j *Job, l domain.Labels) {
		t.Helper()
		got, err := s.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		got.Labels = l
		if err := s.UpdateJob(ctx, got); err != nil {
			t.Fatal(err)
		}
	}

	j := mustCreate(t, s, trackedJob("later", false))
	end1 := t0.Add(time.Minute)
	record(t, s, succeeded(runAt(t, s, j, t0), end1))
	if n, _ := rowOf(j); n != 0 {
		t.Fatalf("an unlabelled job has %d rows", n)
	}
	relabel(j, domain.Labels{AlertLabel: "true", "team": "a"})
	if n, at := rowOf(j); n != 1 || at == nil || !at.Equal(end1) {
		t.Fatalf("labelled: %d rows, last success %v, want the history's %v", n, at, end1)
	}
	end2 := t0.Add(2 * time.Hour)
	record(t, s, succeeded(runAt(t, s, j, t0.Add(time.Hour)), end2))
	if n, at := rowOf(j); n != 1 || at == nil || !at.Equal(end2) {
		t.Fatalf("after a success: %d rows, %v, want %v", n, at, end2)
	}
	relabel(j, domain.Labels{AlertLabel: "true", "team": "b"}) // another label: the row stays
	if n, at := rowOf(j); n != 1 || !at.Equal(end2) {
		t.Fatalf("relabelled: %d rows, %v", n, at)
	}
	relabel(j, domain.Labels{AlertLabel: "false"})
	if n, _ := rowOf(j); n != 0 {
		t.Fatalf("unlabelled: %d rows", n)
	}
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end2) {
		t.Fatalf("unlabelled, from history: %v, want %v", got, end2)
	}

	// Created with the label, one at a time and in batches of either
	// size (an INSERT for a few, COPY for many): a row each, with no
	// success yet.
	one := mustCreate(t, s, trackedJob("one", true))
	var few, many []*Job
	for i := range 3 {
		few = append(few, trackedJob(fmt.Sprintf("few%d", i), true))
	}
	for i := range maxInsertedJobs + 10 {
		many = append(many, trackedJob(fmt.Sprintf("many%d", i), i%2 == 0))
	}
	for _, batch := range [][]*Job{few, many} {
		if err := s.CreateJobs(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	want := 1 + len(few) + (len(many)+1)/2
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE last_success_at IS NULL"); n != want {
		t.Fatalf("%d empty rows for the jobs created labelled, want %d", n, want)
	}
	if got := lastSuccess(t, s, one); got != nil {
		t.Fatalf("a new alerted job's last success: %v", got)
	}
}

func TestAlertedJobSuccesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	alert := domain.Labels{AlertLabel: "true", "team": "data"}
	ok, never, plain, done, off := testJob("ok", nil), testJob("never", nil), testJob("plain", nil),
		testJob("done", nil), testJob("off", nil)
	ok.Labels, never.Labels, done.Labels = alert, alert, alert
	never.Namespace = "etl"
	off.Labels = domain.Labels{AlertLabel: "false"}
	for _, j := range []*Job{ok, never, plain, done, off} {
		mustCreate(t, s, j)
	}
	setState(t, s, done.ID, domain.JobCompleted, nil)
	end := baseTime().Add(time.Minute)
	for _, j := range []*Job{ok, plain} {
		record(t, s, succeeded(runAt(t, s, j, baseTime()), end))
	}

	got, err := s.AlertedJobSuccesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b JobLastSuccess) int { return strings.Compare(a.Name, b.Name) })
	want := []JobLastSuccess{{Namespace: "etl", Name: "never", At: never.CreatedAt}, {Namespace: "default", Name: "ok", At: end}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Namespace != want[i].Namespace || got[i].Name != want[i].Name || !got[i].At.Equal(want[i].At) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}

	// A job older than tracking counts from when tracking began.
	since := never.CreatedAt.Add(time.Hour)
	if _, err := s.pool.Exec(ctx, "UPDATE cluster SET successes_since = $1", since); err != nil {
		t.Fatal(err)
	}
	got, err = s.AlertedJobSuccesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.Name == "never" && !g.At.Equal(since) {
			t.Fatalf("never succeeded, created before tracking: %v, want %v", g.At, since)
		}
	}
}

// The metric's query reads the alert index, not the jobs: among many
// unlabelled jobs it stays cheap.
func TestAlertedJobSuccessesUseTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO jobs (id, bucket, namespace, name, schedule, handler, state, created_at, updated_at, labels)
		SELECT id, ('x' || substr(md5(id::text), 1, 8))::bit(32)::int & 15, 'default', 'j' || i,
			'{"cron": "0 0 * * * *"}', '{"type": "nats", "subject": "a"}', 'paused', now(), now(),
			CASE WHEN i % 1000 = 0 THEN '{"tock.io/alert": "true"}'::jsonb WHEN i % 2 = 0 THEN '{"team": "x"}' END
		FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 20000) i) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	var plan []string
	rows, err := s.pool.Query(ctx, "EXPLAIN "+alertedSuccessesSQL)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, l)
	}
	// Postgres names a partition's index after its columns: jobs_alert's
	// is jobs_bNNN_namespace_name_idx (no other index has them).
	scans := 0
	for _, l := range plan {
		if strings.Contains(l, " on jobs_b") {
			scans++
			if !strings.Contains(l, "_namespace_name_idx on jobs_b") {
				t.Errorf("a partition read without the alert index: %s", l)
			}
		}
	}
	if scans == 0 || t.Failed() {
		t.Fatalf("plan:\n%s", strings.Join(plan, "\n"))
	}
	got, err := s.AlertedJobSuccesses(ctx)
	if err != nil || len(got) != 20 {
		t.Fatalf("%d alerted jobs, %v; want 20", len(got), err)
	}
}
