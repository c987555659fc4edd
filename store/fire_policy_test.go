package store

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// A firing that is not plain fires several runs (jittered ones wait in
// the outbox), records its skipped ranges and counts its runs, all only
// if its compare-and-set wins; one that fires nothing still moves the job.
func TestFirePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime().Add(-time.Minute)
	j := mustCreate(t, s, testJob("policy", &t0))
	plainJob := mustCreate(t, s, testJob("plain", &t0))
	epochs := claim(t, s, "n1", 3, j.Bucket, plainJob.Bucket)

	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * 5 * time.Second) }
	due := sec(6).Add(1234 * time.Millisecond)
	f := Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: sec(0), Next: ptr(sec(7)),
		Runs:  []model.Run{{At: sec(5)}, {At: sec(6), Due: &due}},
		Skips: []model.Skip{{First: sec(0), Last: sec(4), Count: 5, Reason: domain.SkipMissed}}}
	p := Firing{JobID: plainJob.ID, Bucket: plainJob.Bucket, ScheduledFor: t0, Next: ptr(sec(1))}
	res, err := s.Fire(ctx, "n1", epochs, []Firing{f, p})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Executions) != 3 || res.Skipped != 0 || len(res.Moved) != 1 || res.Moved[0] != j.ID {
		t.Fatalf("fire: %d executions, skipped %d, moved %v", len(res.Executions), res.Skipped, res.Moved)
	}
	byTime := map[time.Time]*model.Execution{}
	for _, e := range res.Executions {
		byTime[e.ScheduledFor] = e
	}
	if e := byTime[sec(5)]; e == nil || e.JitteredDue != nil || e.NextAttemptAt != nil || e.Handler.URL != j.Handler.URL {
		t.Fatalf("unjittered run: %+v", e)
	}
	if e := byTime[sec(6)]; e == nil || e.JitteredDue == nil || !e.JitteredDue.Equal(due) || !e.DueAt().Equal(due) ||
		e.Positional() {
		t.Fatalf("jittered run: %+v", e)
	}
	got, _ := s.GetJob(ctx, j.ID)
	if got.FiredCount != 2 || !got.NextRunAt.Equal(sec(7)) || !got.LastRunAt.Equal(sec(6)) {
		t.Fatalf("job after: runs %d next %v last %v", got.FiredCount, got.NextRunAt, got.LastRunAt)
	}
	if got, _ := s.GetJob(ctx, plainJob.ID); got.FiredCount != 1 {
		t.Fatalf("plain job after one firing: runs %d", got.FiredCount)
	}
	skips, next, err := s.ListSkippedRuns(ctx, j.ID, 0, "")
	if err != nil || next != "" || len(skips) != 1 || skips[0].Count != 5 || !skips[0].First.Equal(sec(0)) ||
		!skips[0].Last.Equal(sec(4)) || skips[0].Reason != "missed" || skips[0].JobName != "policy" {
		t.Fatalf("skipped runs: %+v, %q, %v", skips, next, err)
	}

	// The same firing again loses the compare-and-set: nothing new.
	res, err = s.Fire(ctx, "n1", epochs, []Firing{f})
	if err != nil || len(res.Executions) != 0 || res.Skipped != 1 || len(res.Moved) != 0 {
		t.Fatalf("again: %+v, %v", res, err)
	}
	if n := count(t, s, "SELECT count(*) FROM skipped_runs WHERE job_id = $1", j.ID); n != 1 {
		t.Fatalf("%d skipped ranges after a lost compare-and-set, want 1", n)
	}

	// Firing nothing, completing the job (max_runs reached).
	res, err = s.Fire(ctx, "n1", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: sec(7), Runs: []model.Run{},
		Skips: []model.Skip{{First: sec(7), Last: sec(7), Count: 1, Reason: domain.SkipOverlap}}}})
	if err != nil || len(res.Executions) != 0 || len(res.Moved) != 1 {
		t.Fatalf("skip-only firing: %+v, %v", res, err)
	}
	got, _ = s.GetJob(ctx, j.ID)
	if got.State != domain.JobCompleted || got.NextRunAt != nil || got.FiredCount != 2 {
		t.Fatalf("job after a skip-only last firing: %s next %v runs %d", got.State, got.NextRunAt, got.FiredCount)
	}
	skips, _, _ = s.ListSkippedRuns(ctx, j.ID, 1, "")
	if len(skips) != 1 || skips[0].Reason != "overlap" {
		t.Fatalf("newest skipped range: %+v", skips)
	}
}

// A late catch-up fires times days old: their executions land in their
// own day's partition, created on demand, not in the DEFAULT partition.
func TestFireCreatesOldDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	old := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -5)
	j := mustCreate(t, s, testJob("late", &old))
	epochs := claim(t, s, "n", 1, j.Bucket)
	next := old.Add(time.Hour)
	res, err := s.Fire(ctx, "n", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: old, Next: &next}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v, %v", res, err)
	}
	var table string
	if err := s.pool.QueryRow(ctx, "SELECT tableoid::regclass::text FROM executions WHERE id = $1", res.Executions[0].ID).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if want := DayPartition("executions", old); table != want {
		t.Errorf("the execution of %s is in %s, want %s", old.Format(time.DateOnly), table, want)
	}
}

// A firing under cancel_running cancels its job's executions that have
// not ended (queued, running, failed with a retry to come), and leaves
// its ended ones and the other jobs' alone.
func TestFireCancelsRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime().Add(-time.Minute)
	j := mustCreate(t, s, testJob("cancelling", &t0))
	other := mustCreate(t, s, testJob("other", &t0))
	epochs := claim(t, s, "n", 1, j.Bucket, other.Bucket)
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	var firings []Firing
	for _, job := range []*model.Job{j, other} {
		firings = append(firings, Firing{JobID: job.ID, Bucket: job.Bucket, ScheduledFor: t0, Next: ptr(at(10)),
			Runs: []model.Run{{At: at(1)}, {At: at(2)}, {At: at(3)}, {At: at(4)}}})
	}
	res, err := s.Fire(ctx, "n", epochs, firings)
	if err != nil || len(res.Executions) != 8 {
		t.Fatalf("fire: %d executions, %v", len(res.Executions), err)
	}
	mine := map[time.Time]uuid.UUID{}
	for _, e := range res.Executions {
		if e.JobID == j.ID {
			mine[e.ScheduledFor] = e.ID
		}
	}
	record(t, s, model.AttemptEvent{ID: mine[at(2)], Attempt: 1, Executor: "x", Type: domain.EventStarted, At: at(2)},
		model.AttemptEvent{ID: mine[at(3)], Attempt: 1, Executor: "x", Type: domain.EventSucceeded, At: at(3), StartedAt: ptr(at(3))},
		model.AttemptEvent{ID: mine[at(4)], Attempt: 1, Executor: "x", Type: domain.EventFailed, Error: "boom", At: at(4),
			RetryIn: time.Minute})
	res, err = s.Fire(ctx, "n", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at(10), Next: ptr(at(20)),
		Runs: []model.Run{{At: at(10)}}, Overlap: domain.OverlapCancelRunning}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire under cancel_running: %+v, %v", res, err)
	}
	want := []uuid.UUID{mine[at(1)], mine[at(2)], mine[at(4)]}
	got := slices.Clone(res.Cancelled)
	byBytes := func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(got, byBytes)
	slices.SortFunc(want, byBytes)
	if !slices.Equal(got, want) {
		t.Errorf("cancelled %v, want the queued, running and failed ones %v", got, want)
	}
	for at, id := range mine {
		state := get(t, s, id).State
		if cancelled := slices.Contains(want, id); cancelled != (state == domain.ExecCancelled) {
			t.Errorf("execution of %s is %s", at.Format(time.TimeOnly), state)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1 AND state = 'cancelled'", other.ID); n != 0 {
		t.Errorf("%d executions of another job cancelled", n)
	}
}
