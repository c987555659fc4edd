package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Tests of an execution's life after it fires: retries and deferrals
// waiting in the outbox, lost attempts, cancellation and re-drive.

// record records events in one batch and fails on any error.
func record(t testing.TB, s *Store, evs ...model.AttemptEvent) {
	t.Helper()
	res, err := s.RecordAttemptEvents(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("event %d (%+v): %v", i, evs[i], r)
		}
	}
}

func get(t testing.TB, s *Store, id uuid.UUID) *model.Execution {
	t.Helper()
	e, err := s.GetExecution(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func dbNow(t testing.TB, s *Store) time.Time {
	t.Helper()
	now, err := s.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// attemptText is a compact view of an execution's attempts, e.g.
// "1:lost 2:failed 3:".
func attemptText(e *model.Execution) string {
	var parts []string
	for _, a := range e.AttemptList {
		parts = append(parts, fmt.Sprintf("%d:%s", a.Number, a.Outcome))
	}
	return strings.Join(parts, " ")
}

// within fails unless got lies in [lo, hi] (to the millisecond).
func within(t testing.TB, what string, got *time.Time, lo, hi time.Time) {
	t.Helper()
	if got == nil || got.Before(lo.Truncate(time.Millisecond)) || got.After(hi) {
		t.Fatalf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

// inOutbox reports whether id is in buckets' outbox due by until.
func inOutbox(t testing.TB, s *Store, e *model.Execution, until time.Time) bool {
	t.Helper()
	out, err := s.ListUndispatchedExecutions(context.Background(), []int{e.Bucket}, 1000, until)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range out {
		if x.ID == e.ID {
			return true
		}
	}
	return false
}

// listenExec listens on ExecChannel until the test ends.
func listenExec(t *testing.T, s *Store) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, func(_, payload string) { got <- payload }, ExecChannel)
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND query LIKE 'LISTEN "tock_exec"%' AND state = 'idle'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// firedIn is one fresh queued execution of a new job in bucket.
func firedIn(t testing.TB, s *Store, bucket int) *model.Execution {
	t.Helper()
	at := baseTime()
	j := testJob("job-"+uuid.NewString(), &at)
	j.ID = idInBucket(bucket)
	mustCreate(t, s, j)
	res, err := s.Fire(context.Background(), "n", claim(t, s, "n", 1, bucket),
		[]Firing{{JobID: j.ID, Bucket: bucket, ScheduledFor: at}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	return res.Executions[0]
}

func expectNotify(t *testing.T, got <-chan string, bucket int) {
	t.Helper()
	select {
	case p := <-got:
		if p != fmt.Sprint(bucket) {
			t.Fatalf("notification %q, want bucket %d", p, bucket)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification for bucket %d", bucket)
	}
}

func TestMigrationDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	e := fired(t, s)
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: baseTime(), Type: domain.EventFailed, TimedOut: true, Final: true})

	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatalf("down to 3: %v", err)
	}
	if n := count(t, s, "SELECT count(*) FROM attempts WHERE outcome = 'failed'"); n != 1 {
		t.Fatalf("after down, %d failed attempts, want the timed-out one", n)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatalf("up to 4 again: %v", err)
	}
	if _, err := s.Pool().Exec(ctx, "UPDATE attempts SET outcome = 'exploded'"); err == nil {
		t.Fatal("the outcome check accepts anything")
	}
	if _, err := s.Pool().Exec(ctx, "UPDATE attempts SET outcome = 'timed_out'"); err != nil {
		t.Fatalf("timed_out outcome after up: %v", err)
	}
	// Up to the newest: the single attempt moves into the execution's row.
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	got := get(t, s, e.ID)
	if got.State != domain.ExecDead || got.Priority != domain.PriorityNormal || got.Dispatches != 0 ||
		len(got.AttemptList) != 1 || got.AttemptList[0].Outcome != domain.OutcomeTimedOut {
		t.Fatalf("after down and up: %+v", got)
	}
	if n := count(t, s, "SELECT count(*) FROM attempts"); n != 0 {
		t.Fatalf("%d attempts rows, want the single attempt inline", n)
	}
}

func TestJobPriority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime()
	plain := mustCreate(t, s, testJob("plain", &at))
	urgent := testJob("urgent", &at)
	urgent.Priority = domain.PriorityHigh
	mustCreate(t, s, urgent)
	if plain.Priority != domain.PriorityNormal {
		t.Fatalf("default priority %q, want normal", plain.Priority)
	}
	bad := testJob("bad", nil)
	bad.Priority = "urgent"
	if err := s.CreateJob(ctx, bad); err == nil || !strings.Contains(err.Error(), `priority "urgent"`) {
		t.Fatalf("create with priority urgent: %v", err)
	}
	if got, _ := s.GetJob(ctx, urgent.ID); got.Priority != domain.PriorityHigh {
		t.Fatalf("stored priority %q, want high", got.Priority)
	}

	got, _ := s.GetJob(ctx, plain.ID)
	got.Priority = domain.PriorityLow
	if err := s.UpdateJob(ctx, got); err != nil || got.Priority != domain.PriorityLow {
		t.Fatalf("update to low: %v, %q", err, got.Priority)
	}
	got.Priority = "" // keeps the stored one
	if err := s.UpdateJob(ctx, got); err != nil || got.Priority != domain.PriorityLow {
		t.Fatalf("update without priority: %v, %q", err, got.Priority)
	}
	got.Priority = "urgent"
	if err := s.UpdateJob(ctx, got); err == nil {
		t.Fatal("update to priority urgent accepted")
	}

	bulk := []*model.Job{testJob("bulk-a", nil), testJob("bulk-b", nil)}
	bulk[1].Priority = domain.PriorityHigh
	if err := s.CopyJobs(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	list, _, err := s.ListJobs(ctx, JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, j := range list {
		seen = append(seen, j.Name+"="+string(j.Priority))
	}
	if want := "bulk-a=normal bulk-b=high plain=low urgent=high"; strings.Join(seen, " ") != want {
		t.Fatalf("listed %v, want %s", seen, want)
	}

	// Firing and running now copy the job's priority into the execution.
	res, err := s.Fire(ctx, "n", claim(t, s, "n", 1, urgent.Bucket, plain.Bucket), []Firing{
		{JobID: urgent.ID, Bucket: urgent.Bucket, ScheduledFor: at},
		{JobID: plain.ID, Bucket: plain.Bucket, ScheduledFor: at},
	})
	if err != nil || len(res.Executions) != 2 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	for _, e := range res.Executions {
		want := map[uuid.UUID]domain.Priority{urgent.ID: domain.PriorityHigh, plain.ID: domain.PriorityLow}[e.JobID]
		if e.Priority != want || get(t, s, e.ID).Priority != want {
			t.Fatalf("execution of %s has priority %q, want %q", e.JobName, e.Priority, want)
		}
	}
	manual, err := s.CreateManualExecution(ctx, urgent.ID, at.Add(time.Hour))
	if err != nil || manual.Priority != domain.PriorityHigh {
		t.Fatalf("run now: %v, priority %q", err, manual.Priority)
	}
}

func TestDueAt(t *testing.T) {
	t.Parallel()
	sched := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	next := sched.Add(time.Minute)
	e := &model.Execution{ID: uuid.New(), JobID: uuid.New(), ScheduledFor: sched}
	if !e.DueAt().Equal(sched) {
		t.Fatalf("DueAt = %v without a next attempt, want the scheduled time", e.DueAt())
	}
	e.NextAttemptAt = &next
	if !e.DueAt().Equal(next) {
		t.Fatalf("DueAt = %v, want the next attempt's time", e.DueAt())
	}
}

// A retry waits in the outbox with dispatched_at NULL; events of attempts
// that are not newer than the known ones must leave it there.
func TestOnlyNewerAttemptsTakeExecutionOutOfOutbox(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	e := fired(t, s)
	t0 := baseTime()
	far := dbNow(t, s).Add(time.Hour)
	if !inOutbox(t, s, e, far) {
		t.Fatal("a fired execution is not in the outbox")
	}
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x1", At: t0})
	if got := get(t, s, e.ID); got.DispatchedAt == nil || inOutbox(t, s, e, far) {
		t.Fatalf("a start did not take the execution out of the outbox: %+v", got)
	}
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(time.Second), Type: domain.EventFailed,
		Error: "503", RetryIn: time.Minute})
	got := get(t, s, e.ID)
	if got.State != domain.ExecFailed || got.DispatchedAt != nil || got.Dispatches != 1 || !inOutbox(t, s, e, far) {
		t.Fatalf("a failure did not put the execution back in the outbox: %+v", got)
	}
	// Late or repeated events of attempt 1.
	record(t, s,
		model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(500 * time.Millisecond), Type: domain.EventHeartbeat},
		model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x1", At: t0},
		model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(time.Second), Type: domain.EventFailed, Error: "503",
			RetryIn: time.Minute},
	)
	got = get(t, s, e.ID)
	if got.State != domain.ExecFailed || got.DispatchedAt != nil || got.Dispatches != 1 || !inOutbox(t, s, e, far) {
		t.Fatalf("old events touched the waiting retry: %+v", got)
	}
	// Attempt 2 (the retry) starts: out of the outbox, even unmarked.
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(time.Minute), Dispatch: 1})
	if got := get(t, s, e.ID); got.State != domain.ExecRunning || got.DispatchedAt == nil || got.NextAttemptAt != nil ||
		inOutbox(t, s, e, far) {
		t.Fatalf("the retry's start: %+v", got)
	}
}

// An executor killed mid-attempt: the next delivery's events record the
// lost attempt.
func TestLostAttempts(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := baseTime()

	t.Run("unfinished attempt", func(t *testing.T) {
		e := fired(t, s)
		record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x1", At: t0})
		record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(30 * time.Second)})
		got := get(t, s, e.ID)
		if attemptText(got) != "1:lost 2:" || got.State != domain.ExecRunning || got.Attempts != 2 || got.ExecutorID != "x2" {
			t.Fatalf("after attempt 2 started: %s, %+v", attemptText(got), got)
		}
		a := got.AttemptList[0]
		if a.ExecutorID != "x1" || !a.StartedAt.Equal(t0) || a.FinishedAt == nil ||
			!a.FinishedAt.Equal(t0.Add(30*time.Second)) || a.Error != lostError {
			t.Fatalf("lost attempt %+v", a)
		}
		// Its own late report, if it ever comes, replaces the inference,
		// and changes nothing else.
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(40 * time.Second),
			Type: domain.EventFailed, Error: "late"})
		got = get(t, s, e.ID)
		if attemptText(got) != "1:failed 2:" || got.AttemptList[0].Error != "late" || got.State != domain.ExecRunning ||
			got.Dispatches != 0 {
			t.Fatalf("after attempt 1's late failure: %s, %+v", attemptText(got), got)
		}
	})

	t.Run("deliveries that never reported", func(t *testing.T) {
		e := fired(t, s)
		end := t0.Add(time.Minute)
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 3, Executor: "x3", At: end, Type: domain.EventSucceeded,
			StartedAt: &t0})
		got := get(t, s, e.ID)
		if attemptText(got) != "1:lost 2:lost 3:succeeded" || got.State != domain.ExecSucceeded || got.Attempts != 3 {
			t.Fatalf("%s, %+v", attemptText(got), got)
		}
		for _, a := range got.AttemptList[:2] {
			if !a.StartedAt.IsZero() || a.ExecutorID != "" || !a.FinishedAt.Equal(end) || a.Error != lostError {
				t.Fatalf("gap attempt %+v", a)
			}
		}
	})

	t.Run("finished attempts stay", func(t *testing.T) {
		e := fired(t, s)
		record(t, s,
			model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventFailed, StartedAt: &t0},
			model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(time.Second), Dispatch: 1},
			model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 3, Executor: "x3", At: t0.Add(2 * time.Second), Dispatch: 1},
		)
		if got := get(t, s, e.ID); attemptText(got) != "1:failed 2:lost 3:" {
			t.Fatalf("attempts %s", attemptText(got))
		}
	})
}

func TestHeartbeats(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	e := fired(t, s)
	t0 := baseTime()
	beat := func(at time.Time) model.AttemptEvent {
		return model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: at, Type: domain.EventHeartbeat}
	}
	// A heartbeat whose attempt's start was not recorded (yet) starts it.
	record(t, s, beat(t0.Add(10*time.Second)))
	got := get(t, s, e.ID)
	if got.State != domain.ExecRunning || got.Attempts != 1 || got.DispatchedAt == nil || got.ExecutorID != "x1" ||
		len(got.AttemptList) != 1 {
		t.Fatalf("after the first heartbeat: %+v", got)
	}
	a := got.AttemptList[0]
	if a.HeartbeatAt == nil || !a.HeartbeatAt.Equal(t0.Add(10*time.Second)) || !a.StartedAt.IsZero() || a.Outcome != "" {
		t.Fatalf("attempt after the first heartbeat: %+v", a)
	}
	// Heartbeats only move forward; the start fills in the start time.
	record(t, s, beat(t0.Add(5*time.Second)), model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x1", At: t0},
		beat(t0.Add(20*time.Second)))
	a = get(t, s, e.ID).AttemptList[0]
	if !a.HeartbeatAt.Equal(t0.Add(20*time.Second)) || !a.StartedAt.Equal(t0) {
		t.Fatalf("attempt after more heartbeats: %+v", a)
	}
	// A heartbeat that arrives after the end changes no state.
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(25 * time.Second), Type: domain.EventSucceeded},
		beat(t0.Add(24*time.Second)))
	if got := get(t, s, e.ID); got.State != domain.ExecSucceeded || got.AttemptList[0].Outcome != domain.OutcomeSucceeded {
		t.Fatalf("after the end: %+v", got)
	}
}

func TestFailureRequeuesFromPostgres(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	notes := listenExec(t, s)
	t0 := baseTime()

	for _, outcome := range []domain.Outcome{domain.OutcomeFailed, domain.OutcomeTimedOut} {
		t.Run(string(outcome), func(t *testing.T) {
			e := fired(t, s)
			record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x1", At: t0})
			before := dbNow(t, s)
			record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0.Add(time.Second), Type: domain.EventFailed,
				TimedOut: outcome == domain.OutcomeTimedOut, Error: "HTTP 503", Output: "busy", RetryIn: 10 * time.Minute})
			after := dbNow(t, s)
			expectNotify(t, notes, e.Bucket)
			got := get(t, s, e.ID)
			if got.State != domain.ExecFailed || got.DispatchedAt != nil || got.Dispatches != 1 || got.FinishedAt != nil ||
				got.Error != "HTTP 503" || got.Output != "busy" || got.Attempts != 1 {
				t.Fatalf("re-queued execution %+v", got)
			}
			within(t, "next_attempt_at", got.NextAttemptAt, before.Add(10*time.Minute), after.Add(10*time.Minute))
			if attemptText(got) != "1:"+string(outcome) {
				t.Fatalf("attempts %s", attemptText(got))
			}
			// Due in ten minutes: not read before.
			if inOutbox(t, s, e, after.Add(9*time.Minute)) || !inOutbox(t, s, e, after.Add(11*time.Minute)) {
				t.Fatal("the retry is not in the outbox at its due time only")
			}
			// Its message (dispatcher.Wire) continues from attempt 1, as
			// dispatch 1.
			if got.Attempts != 1 || got.Dispatches != 1 {
				t.Fatalf("the retry: attempts %d, dispatch %d", got.Attempts, got.Dispatches)
			}
		})
	}

	t.Run("stale dispatch", func(t *testing.T) {
		e := fired(t, s)
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventFailed, StartedAt: &t0})
		expectNotify(t, notes, e.Bucket)
		record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(time.Second), Dispatch: 1})
		// Attempt 2 reported by a delivery of dispatch 0 (a redelivered
		// duplicate of the first message): only the attempt is recorded.
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(2 * time.Second), Type: domain.EventFailed,
			Error: "dup", RetryIn: time.Millisecond, Dispatch: 0})
		got := get(t, s, e.ID)
		if got.State != domain.ExecRunning || got.Dispatches != 1 || got.DispatchedAt == nil || attemptText(got) != "1:failed 2:failed" {
			t.Fatalf("after a stale failure: %s %+v", attemptText(got), got)
		}
	})

	t.Run("final", func(t *testing.T) {
		e := fired(t, s)
		record(t, s,
			model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventFailed, StartedAt: &t0, RetryIn: time.Second},
			model.AttemptEvent{ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(2 * time.Second), Type: domain.EventFailed, TimedOut: true,
				Final: true, Error: "timed out", StartedAt: &t0, Dispatch: 1},
		)
		got := get(t, s, e.ID)
		if got.State != domain.ExecDead || got.FinishedAt == nil || got.DispatchedAt == nil || got.NextAttemptAt != nil ||
			got.Error != "timed out" || attemptText(got) != "1:failed 2:timed_out" {
			t.Fatalf("dead execution: %s %+v", attemptText(got), got)
		}
		expectNotify(t, notes, e.Bucket) // of attempt 1's failure only
	})

	t.Run("older attempt", func(t *testing.T) {
		e := fired(t, s)
		record(t, s,
			model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 2, Executor: "x2", At: t0},
			model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventFailed, RetryIn: time.Second},
		)
		if got := get(t, s, e.ID); got.State != domain.ExecRunning || got.Dispatches != 0 {
			t.Fatalf("an older attempt's failure re-queued: %+v", got)
		}
	})

	t.Run("success while a retry waits", func(t *testing.T) {
		e := fired(t, s)
		record(t, s,
			model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventFailed, RetryIn: time.Hour},
			model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x1", At: t0, Type: domain.EventSucceeded}, // repeat: ignored
		)
		expectNotify(t, notes, e.Bucket)
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 2, Executor: "x2", At: t0.Add(time.Hour), Type: domain.EventSucceeded,
			Dispatch: 1})
		got := get(t, s, e.ID)
		if got.State != domain.ExecSucceeded || got.DispatchedAt == nil || got.NextAttemptAt != nil || got.Error != "" {
			t.Fatalf("succeeded execution %+v", got)
		}
	})
}

func TestCancelledEvents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := baseTime()
	cancelled := func(e *model.Execution, attempt int, started *time.Time) model.AttemptEvent {
		return model.AttemptEvent{ID: e.ID, Attempt: attempt, Executor: "x", At: t0.Add(time.Minute), Type: domain.EventCancelled,
			StartedAt: started}
	}

	e := fired(t, s)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x", At: t0}, cancelled(e, 1, nil))
	got := get(t, s, e.ID)
	if got.State != domain.ExecCancelled || got.FinishedAt == nil || !got.FinishedAt.Equal(t0.Add(time.Minute)) ||
		got.Error != "cancelled" || attemptText(got) != "1:cancelled" {
		t.Fatalf("a running attempt cancelled: %s %+v", attemptText(got), got)
	}

	e = fired(t, s)
	record(t, s, cancelled(e, 1, &t0))
	if got := get(t, s, e.ID); got.State != domain.ExecCancelled || attemptText(got) != "1:cancelled" ||
		!got.AttemptList[0].StartedAt.Equal(t0) {
		t.Fatalf("a quick attempt cancelled: %s %+v", attemptText(got), got)
	}

	// Never began: no attempt.
	e = fired(t, s)
	record(t, s, cancelled(e, 1, nil))
	if got := get(t, s, e.ID); got.State != domain.ExecCancelled || len(got.AttemptList) != 0 || got.Attempts != 0 ||
		got.DispatchedAt == nil {
		t.Fatalf("a delivery cancelled before it began: %s %+v", attemptText(got), got)
	}

	// A finished execution stays as it is.
	e = fired(t, s)
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventSucceeded}, cancelled(e, 1, &t0))
	if got := get(t, s, e.ID); got.State != domain.ExecSucceeded || attemptText(got) != "1:succeeded" {
		t.Fatalf("a succeeded execution after a cancellation: %s %+v", attemptText(got), got)
	}
}

func TestDeferredDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	notes := listenExec(t, s)
	t0 := baseTime()
	deferred := func(e *model.Execution, attempt, dispatch int) model.AttemptEvent {
		return model.AttemptEvent{ID: e.ID, Attempt: attempt, Executor: "x", At: t0, Type: domain.EventDeferred,
			RetryIn: 5 * time.Second, Dispatch: dispatch}
	}

	e := fired(t, s)
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: e.ID, Dispatch: 0}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	before := dbNow(t, s)
	record(t, s, deferred(e, 1, 0))
	after := dbNow(t, s)
	expectNotify(t, notes, e.Bucket)
	got := get(t, s, e.ID)
	if got.State != domain.ExecQueued || got.DispatchedAt != nil || got.Dispatches != 1 || got.Attempts != 0 ||
		len(got.AttemptList) != 0 {
		t.Fatalf("deferred execution %s %+v", attemptText(got), got)
	}
	within(t, "next_attempt_at", got.NextAttemptAt, before.Add(5*time.Second), after.Add(5*time.Second))
	// The same deferral again (redelivered to the recorder) changes
	// nothing: it must not take the re-queued dispatch out of the outbox.
	record(t, s, deferred(e, 1, 0))
	if again := get(t, s, e.ID); again.DispatchedAt != nil || again.Dispatches != 1 ||
		!again.NextAttemptAt.Equal(*got.NextAttemptAt) {
		t.Fatalf("after a repeated deferral: %+v", again)
	}
	// Dispatch 1 runs attempt 1 (a deferral is no attempt).
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: e.ID, Dispatch: 1}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x", At: t0, Dispatch: 1})
	if got := get(t, s, e.ID); got.State != domain.ExecRunning || got.NextAttemptAt != nil || attemptText(got) != "1:" {
		t.Fatalf("after the deferred delivery ran: %s %+v", attemptText(got), got)
	}
	// Its executor dies; the redelivery (attempt 2) is deferred: attempt 1
	// is lost, and the execution waits for dispatch 2, whose first
	// delivery is attempt 2.
	record(t, s, deferred(e, 2, 1))
	expectNotify(t, notes, e.Bucket)
	got = get(t, s, e.ID)
	if got.State != domain.ExecQueued || got.Dispatches != 2 || got.Attempts != 1 || attemptText(got) != "1:lost" ||
		got.Attempts+1 != 2 {
		t.Fatalf("deferred redelivery: %s %+v", attemptText(got), got)
	}

	// A retry that is deferred stays failed.
	e = fired(t, s)
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventFailed, Error: "boom"})
	expectNotify(t, notes, e.Bucket)
	record(t, s, deferred(e, 2, 1))
	expectNotify(t, notes, e.Bucket)
	if got := get(t, s, e.ID); got.State != domain.ExecFailed || got.Dispatches != 2 || got.Error != "boom" || got.Attempts != 1 {
		t.Fatalf("deferred retry: %+v", got)
	}

	// Stale or late deferrals change nothing.
	e = fired(t, s)
	record(t, s, deferred(e, 1, 3)) // not the current dispatch
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventSucceeded})
	record(t, s, deferred(e, 2, 0)) // the execution is over
	if got := get(t, s, e.ID); got.State != domain.ExecSucceeded || got.Dispatches != 0 || got.DispatchedAt == nil {
		t.Fatalf("after stale deferrals: %+v", got)
	}
}

func TestOutboxByDueTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := dbNow(t, s)
	j := mustCreate(t, s, testJob("many", nil))
	// The bucket's publish position is its claim's time: the fired
	// execution inserted below comes after it.
	claim(t, s, "n", 1, j.Bucket)
	// A thousand executions in a ten-minute backoff, three due soon.
	_, err := s.Pool().Exec(ctx, `
		INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, state, handler, next_attempt_at)
		SELECT gen_random_uuid(), $1, $2, 'default', 'many', $3::timestamptz - g * interval '1 ms', 'failed', '{}',
			$3::timestamptz + interval '10 minutes'
		FROM generate_series(1, 1000) g`, j.ID, j.Bucket, now)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(sched time.Time, next *time.Time, state domain.ExecState) uuid.UUID {
		id := domain.ExecutionID(j.ID, sched)
		if _, err := s.Pool().Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name,
			scheduled_for, state, handler, next_attempt_at) VALUES ($1, $2, $3, 'default', 'many', $4, $5, '{}', $6)`,
			id, j.ID, j.Bucket, sched, state, next); err != nil {
			t.Fatal(err)
		}
		return id
	}
	retry := insert(now.Add(-time.Hour), ptr(now.Add(-time.Second)), domain.ExecFailed)
	first := insert(now.Add(-10*time.Second), nil, domain.ExecQueued)
	deferred := insert(now.Add(-time.Minute), ptr(now.Add(2*time.Second)), domain.ExecQueued)
	due := []uuid.UUID{first, retry, deferred}
	insert(now.Add(-2*time.Minute), nil, domain.ExecCancelled)
	if _, err := s.Pool().Exec(ctx, "ANALYZE executions"); err != nil {
		t.Fatal(err)
	}
	out, err := s.ListUndispatchedExecutions(ctx, []int{j.Bucket}, 100, now.Add(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	for _, e := range out {
		got = append(got, e.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(due) {
		t.Fatalf("outbox %v, want %v in due order", got, due)
	}
	// The ones in backoff are never read: the index range stops before
	// them.
	plan := explain(t, s, "", "ANALYZE "+outboxSQL, []int{j.Bucket}, 100, now.Add(3*time.Second))
	read := regexp.MustCompile(`Index Scan (?:on|using) executions_\w+_bucket_next_attempt_at_idx .*actual time=\S+ rows=(\d+)`)
	m := read.FindAllStringSubmatch(plan, -1)
	if len(m) == 0 || !strings.Contains(plan, "next_attempt_at <=") {
		t.Fatalf("the outbox read does not use its index's due range:\n%s", plan)
	}
	for _, x := range m {
		if n, _ := strconv.Atoi(x[1]); n > 4 {
			t.Fatalf("the outbox index yielded %d rows, want only the 4 due (3 and a cancelled one):\n%s", n, plan)
		}
	}
}

// A slow mark of dispatch k must not hide dispatch k+1, re-queued
// meanwhile.
func TestMarkDispatchedChecksTheDispatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	a, b := fired(t, s), fired(t, s)
	record(t, s, model.AttemptEvent{ID: a.ID, Attempt: 1, Executor: "x", At: baseTime(), Type: domain.EventFailed})
	// a is at dispatch 1 now, b at 0; marks of dispatch 0 arrive late for
	// a, and one of dispatch 1 for b that never was.
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: a.ID, Dispatch: 0}, {ID: b.ID, Dispatch: 1}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if ga, gb := get(t, s, a.ID), get(t, s, b.ID); ga.DispatchedAt != nil || gb.DispatchedAt != nil {
		t.Fatalf("marked by the wrong dispatch: %v %v", ga.DispatchedAt, gb.DispatchedAt)
	}
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: b.ID, Dispatch: 0}, {ID: a.ID, Dispatch: 1}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if ga, gb := get(t, s, a.ID), get(t, s, b.ID); ga.DispatchedAt == nil || gb.DispatchedAt == nil {
		t.Fatalf("not marked by the right dispatch: %v %v", ga.DispatchedAt, gb.DispatchedAt)
	}
}

func TestCancelExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	cancel := func(e *model.Execution) *model.Execution {
		t.Helper()
		got, err := s.CancelExecution(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != domain.ExecCancelled || got.FinishedAt == nil || got.DispatchedAt == nil || got.Error != "cancelled" ||
			got.NextAttemptAt != nil {
			t.Fatalf("cancelled execution %+v", got)
		}
		return got
	}

	queued := fired(t, s)
	first := cancel(queued)
	if again := cancel(queued); !again.FinishedAt.Equal(*first.FinishedAt) {
		t.Fatalf("a second cancel changed the execution: %v then %v", first.FinishedAt, again.FinishedAt)
	}
	// A result reported later cannot revive it.
	record(t, s, model.AttemptEvent{ID: queued.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventSucceeded})
	if got := get(t, s, queued.ID); got.State != domain.ExecCancelled {
		t.Fatalf("a late success revived a cancelled execution: %+v", got)
	}

	running := fired(t, s)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: running.ID, Attempt: 1, Executor: "x", At: t0})
	cancel(running)

	waiting := fired(t, s)
	record(t, s, model.AttemptEvent{ID: waiting.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventFailed})
	cancel(waiting)
	if inOutbox(t, s, waiting, dbNow(t, s).Add(time.Hour)) {
		t.Fatal("a cancelled retry is still in the outbox")
	}

	for _, final := range []model.AttemptEvent{
		{Attempt: 1, Executor: "x", At: t0, Type: domain.EventSucceeded},
		{Attempt: 1, Executor: "x", At: t0, Type: domain.EventFailed, Final: true},
	} {
		e := fired(t, s)
		final.ID = e.ID
		record(t, s, final)
		if _, err := s.CancelExecution(ctx, e.ID); !errors.Is(err, ErrFinished) {
			t.Fatalf("cancel of a %s execution: %v, want ErrFinished", get(t, s, e.ID).State, err)
		}
	}
	if _, err := s.CancelExecution(ctx, domain.ExecutionID(uuid.New(), t0)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel of an unknown execution: %v, want ErrNotFound", err)
	}
}

func TestRedriveExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	notes := listenExec(t, s)
	t0 := baseTime()
	e := fired(t, s)
	record(t, s,
		model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: t0, Type: domain.EventFailed, Error: "1"},
		model.AttemptEvent{ID: e.ID, Attempt: 2, Executor: "x", At: t0, Type: domain.EventFailed, Error: "2", Dispatch: 1},
		model.AttemptEvent{ID: e.ID, Attempt: 3, Executor: "x", At: t0, Type: domain.EventFailed, Error: "3", Final: true,
			Output: "out", Dispatch: 2},
	)
	expectNotify(t, notes, e.Bucket)
	if got := get(t, s, e.ID); got.State != domain.ExecDead {
		t.Fatalf("not dead: %+v", got)
	}
	if _, err := s.CancelExecution(ctx, e.ID); !errors.Is(err, ErrFinished) {
		t.Fatalf("cancel of a dead execution: %v, want ErrFinished", err)
	}

	before := dbNow(t, s)
	got, err := s.RedriveExecution(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow(t, s)
	expectNotify(t, notes, e.Bucket)
	if got.State != domain.ExecQueued || got.SeriesBase != 3 || got.Attempts != 3 || got.Dispatches != 3 ||
		got.DispatchedAt != nil || got.FinishedAt != nil || got.Error != "" || got.Output != "" {
		t.Fatalf("re-driven execution %+v", got)
	}
	within(t, "next_attempt_at", got.NextAttemptAt, before, after)
	if !inOutbox(t, s, got, after) {
		t.Fatal("a re-driven execution is not in the outbox")
	}
	// A fresh series: its message (dispatcher.Wire, tested there) makes
	// attempt 4 the first of the new series.
	if _, err := s.RedriveExecution(ctx, e.ID); !errors.Is(err, ErrNotDead) {
		t.Fatalf("re-drive of a queued execution: %v, want ErrNotDead", err)
	}
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 4, Executor: "x", At: t0, Type: domain.EventSucceeded, Dispatch: 3})
	if got := get(t, s, e.ID); got.State != domain.ExecSucceeded || attemptText(got) != "1:failed 2:failed 3:failed 4:succeeded" {
		t.Fatalf("after the re-drive: %s %+v", attemptText(got), got)
	}
	if _, err := s.RedriveExecution(ctx, e.ID); !errors.Is(err, ErrNotDead) {
		t.Fatalf("re-drive of a succeeded execution: %v, want ErrNotDead", err)
	}
	if _, err := s.RedriveExecution(ctx, domain.ExecutionID(uuid.New(), t0)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("re-drive of an unknown execution: %v, want ErrNotFound", err)
	}
}

func TestListDeadExecutionsAcrossJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	var dead []uuid.UUID
	for i := range 5 {
		e := fired(t, s) // each of its own job
		final := i != 2
		record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: baseTime(), Type: domain.EventFailed, Final: final})
		if final {
			dead = append(dead, e.ID)
		}
	}
	var got []uuid.UUID
	f := ExecFilter{State: domain.ExecDead, Limit: 3}
	for {
		page, next, err := s.ListExecutions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.State != domain.ExecDead {
				t.Fatalf("listed a %s execution", e.State)
			}
			got = append(got, e.ID)
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	if len(got) != len(dead) {
		t.Fatalf("listed %d dead executions, want %d", len(got), len(dead))
	}
	for _, id := range dead {
		found := false
		for _, g := range got {
			found = found || g == id
		}
		if !found {
			t.Fatalf("dead execution %s not listed", id)
		}
	}
}

func TestRequeueLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	notes := listenExec(t, s)
	now := dbNow(t, s)
	old, recent := now.Add(-10*time.Minute), now.Add(-time.Minute)

	silent := firedIn(t, s, 1)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: silent.ID, Attempt: 1, Executor: "x", At: old})
	beating := firedIn(t, s, 2)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: beating.ID, Attempt: 1, Executor: "x", At: old},
		model.AttemptEvent{ID: beating.ID, Attempt: 1, Executor: "x", At: recent, Type: domain.EventHeartbeat})
	queued := firedIn(t, s, 3)
	elsewhere := firedIn(t, s, 4)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: elsewhere.ID, Attempt: 1, Executor: "x", At: old})
	buckets := []int{1, 2, 3}

	n, err := s.RequeueLostExecutions(ctx, buckets, now.Add(-5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("re-queued %d, want 1", n)
	}
	expectNotify(t, notes, silent.Bucket)
	got := get(t, s, silent.ID)
	if got.State != domain.ExecFailed || got.Dispatches != 1 || got.DispatchedAt != nil || attemptText(got) != "1:lost" ||
		!inOutbox(t, s, got, dbNow(t, s)) {
		t.Fatalf("re-queued execution %s %+v", attemptText(got), got)
	}
	if g := get(t, s, beating.ID); g.State != domain.ExecRunning {
		t.Fatalf("a heartbeating execution was re-queued: %+v", g)
	}
	if g := get(t, s, queued.ID); g.State != domain.ExecQueued || g.Dispatches != 0 {
		t.Fatalf("a queued execution was touched: %+v", g)
	}
	if g := get(t, s, elsewhere.ID); g.State != domain.ExecRunning {
		t.Fatalf("an execution of another bucket was re-queued: %+v", g)
	}
	// The lost attempt reports after all, about the old dispatch: recorded,
	// not re-queued a second time.
	record(t, s, model.AttemptEvent{ID: silent.ID, Attempt: 1, Executor: "x", At: now, Type: domain.EventFailed, Error: "late"})
	if g := get(t, s, silent.ID); g.Dispatches != 1 || attemptText(g) != "1:failed" {
		t.Fatalf("after the late report: %s %+v", attemptText(g), g)
	}
	if n, err := s.RequeueLostExecutions(ctx, buckets, now.Add(-5*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second pass re-queued %d, %v", n, err)
	}
}
