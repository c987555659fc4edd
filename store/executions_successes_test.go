package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// runAt is a manual execution of job j scheduled for at.
func runAt(t testing.TB, s *Store, j *model.Job, at time.Time) *model.Execution {
	t.Helper()
	e, err := s.CreateManualExecution(context.Background(), j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// lastSuccess is job id's LastSuccessAt as GetJob and ListJobs read it
// (failing unless they agree).
func lastSuccess(t testing.TB, s *Store, j *model.Job) *time.Time {
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

func succeeded(e *model.Execution, at time.Time) model.AttemptEvent {
	return model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: at, Type: domain.EventSucceeded}
}

func TestJobLastSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	j := mustCreate(t, s, testJob("nightly", nil))
	other := mustCreate(t, s, testJob("other", nil))
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
	record(t, s, model.AttemptEvent{ID: e2.ID, Attempt: 1, Executor: "x", At: t0.Add(time.Hour), Type: domain.EventFailed,
		Final: true, Error: "boom"})
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end1) {
		t.Fatalf("after a failure: %v, want %v", got, end1)
	}

	// A success that ended before the recorded one, reported late, does
	// not move it back; nor does a repeated report of the newer one.
	end3 := t0.Add(3 * time.Hour)
	record(t, s, succeeded(e3, end3))
	record(t, s, succeeded(e3, end3.Add(time.Hour)))
	e4 := runAt(t, s, j, t0.Add(-time.Hour))
	record(t, s, succeeded(e4, t0))
	if got := lastSuccess(t, s, j); got == nil || !got.Equal(end3) {
		t.Fatalf("after a late, older success: %v, want %v", got, end3)
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1 AND execution_id = $2", j.ID, e3.ID); n != 1 {
		t.Fatalf("the row does not name execution %s", e3.ID)
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
	if _, err := s.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1", j.ID); n != 0 {
		t.Fatalf("%d rows of the deleted job", n)
	}
}

// Several successes of one job in one batch keep the latest, whatever
// their order; the batch's other jobs get theirs.
func TestJobLastSuccessInOneBatch(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := baseTime()
	a, b := mustCreate(t, s, testJob("a", nil)), mustCreate(t, s, testJob("b", nil))
	a1, a2, a3 := runAt(t, s, a, t0), runAt(t, s, a, t0.Add(time.Second)), runAt(t, s, a, t0.Add(2*time.Second))
	b1 := runAt(t, s, b, t0)
	record(t, s,
		succeeded(a2, t0.Add(5*time.Minute)),
		model.AttemptEvent{ID: a3.ID, Attempt: 1, Executor: "x", At: t0.Add(9 * time.Minute), Type: domain.EventFailed, Final: true},
		succeeded(a1, t0.Add(7*time.Minute)),
		succeeded(b1, t0.Add(time.Minute)),
		succeeded(a2, t0.Add(8*time.Minute)), // a repeat: ignored
	)
	if got := lastSuccess(t, s, a); got == nil || !got.Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("a: %v, want the latest success %v", got, t0.Add(7*time.Minute))
	}
	if got := lastSuccess(t, s, b); got == nil || !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("b: %v", got)
	}
}

// A success of a deleted job's execution, recorded after the deletion,
// leaves no row behind.
func TestLastSuccessOfDeletedJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	j := mustCreate(t, s, testJob("gone", nil))
	e := runAt(t, s, j, baseTime())
	if _, err := s.DeleteJob(ctx, j.ID); err != nil {
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
	for _, j := range []*model.Job{ok, never, plain, done, off} {
		mustCreate(t, s, j)
	}
	setState(t, s, done.ID, domain.JobCompleted, nil)
	end := baseTime().Add(time.Minute)
	for _, j := range []*model.Job{ok, plain} {
		record(t, s, succeeded(runAt(t, s, j, baseTime()), end))
	}

	got, err := s.ListAlertedJobSuccesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b model.JobLastSuccess) int { return strings.Compare(a.Name, b.Name) })
	want := []model.JobLastSuccess{{Namespace: "etl", Name: "never", At: never.CreatedAt}, {Namespace: "default", Name: "ok", At: end}}
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
	got, err = s.ListAlertedJobSuccesses(ctx)
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
	got, err := s.ListAlertedJobSuccesses(ctx)
	if err != nil || len(got) != 20 {
		t.Fatalf("%d alerted jobs, %v; want 20", len(got), err)
	}
}

// Every job gets its job_successes row when it is created, however it is
// created (one at a time, or in batches of either size: an INSERT for a
// few, COPY for many), so that recording a success only ever updates a
// row; a job that has not succeeded has one with no success.
func TestJobsAreCreatedWithTheirSuccessRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	one := mustCreate(t, s, testJob("one", nil))
	var few, many []*model.Job
	for i := range 3 {
		few = append(few, testJob(fmt.Sprintf("few%d", i), nil))
	}
	for i := range maxInsertedJobs + 10 {
		many = append(many, testJob(fmt.Sprintf("many%d", i), nil))
	}
	for _, batch := range [][]*model.Job{few, many} {
		if err := s.CopyJobs(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	want := 1 + len(few) + len(many)
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE last_success_at IS NULL AND execution_id IS NULL"); n != want {
		t.Fatalf("%d empty rows, want one for each of the %d jobs created", n, want)
	}
	if n := count(t, s, "SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM job_successes s WHERE s.job_id = j.id)"); n != 0 {
		t.Fatalf("%d jobs without a row", n)
	}
	// A name conflict creates neither the job nor a row.
	if err := s.CreateJob(ctx, testJob("one", nil)); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second job named one: %v, want ErrConflict", err)
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes"); n != want {
		t.Fatalf("%d rows after a conflicting create, want %d", n, want)
	}
	if got := lastSuccess(t, s, one); got != nil {
		t.Fatalf("a new job's last success: %v", got)
	}
	end := baseTime().Add(time.Minute)
	last := many[len(many)-1] // a name no other is a prefix of
	record(t, s, succeeded(runAt(t, s, last, baseTime()), end))
	if got := lastSuccess(t, s, last); got == nil || !got.Equal(end) {
		t.Fatalf("after a success: %v, want %v", got, end)
	}
}
