package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// fiveSeconds are n scheduled times 5 s apart from from.
func fiveSeconds(from time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * 5 * time.Second)
	}
	return out
}

func mustStep(t *testing.T, s *Store, node string, epoch int64, step model.BackfillStep) model.BackfillResult {
	t.Helper()
	res, err := s.StepBackfill(context.Background(), node, epoch, step)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBackfillStepFiresEachTimeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	next := baseTime().Add(time.Hour)
	j := mustCreate(t, s, testJob("backfilled", &next))
	claim(t, s, "n1", 7, j.Bucket)
	from := baseTime().Add(-10 * time.Minute).Truncate(time.Minute)
	to := from.Add(time.Minute)

	b, err := s.CreateBackfill(ctx, j.ID, from, to, 12)
	if err != nil {
		t.Fatal(err)
	}
	if b.State != model.BackfillRunning || !b.NextAt.Equal(from) || b.Total != 12 || b.Bucket != j.Bucket {
		t.Fatalf("created %+v", b)
	}
	times := fiveSeconds(from, 12)
	res := mustStep(t, s, "n1", 7, model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: from, Times: times[:6], Next: times[6]})
	if len(res.Executions) != 6 || res.Backfill.Fired != 6 || !res.Backfill.NextAt.Equal(times[6]) || res.Backfill.State != model.BackfillRunning {
		t.Fatalf("first step: %d executions, backfill %+v", len(res.Executions), res.Backfill)
	}
	for i, x := range res.Executions {
		if !x.Backfill || x.Priority != domain.PriorityLow || x.FiredBy != "n1" || x.NextAttemptAt == nil ||
			x.Manual || x.Positional() || !x.ScheduledFor.Equal(times[i]) || x.ID != domain.ExecutionID(j.ID, times[i]) ||
			x.Handler.URL != j.Handler.URL || string(x.Payload) != `{"n": 1}` || x.Retry.MaxAttempts != 3 {
			t.Errorf("execution %d: %+v", i, x)
		}
	}
	// A step from a progress that moved since does nothing.
	if res := mustStep(t, s, "n1", 7, model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: from, Times: times, Next: to, Done: true}); len(res.Executions) != 0 || !res.Backfill.NextAt.Equal(times[6]) {
		t.Fatalf("stale step: %d executions, %+v", len(res.Executions), res.Backfill)
	}
	res = mustStep(t, s, "n1", 7, model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: times[6], Times: times[6:], Next: to, Done: true})
	if len(res.Executions) != 6 || res.Backfill.Fired != 12 || res.Backfill.State != model.BackfillDone || res.Backfill.FinishedAt == nil {
		t.Fatalf("last step: %d executions, backfill %+v", len(res.Executions), res.Backfill)
	}

	// A second backfill of the same range fires nothing new.
	b2, err := s.CreateBackfill(ctx, j.ID, from, to, 12)
	if err != nil {
		t.Fatal(err)
	}
	res = mustStep(t, s, "n1", 7, model.BackfillStep{ID: b2.ID, Bucket: j.Bucket, From: from, Times: times, Next: to, Done: true})
	if len(res.Executions) != 0 || res.Backfill.Fired != 0 || res.Backfill.State != model.BackfillDone {
		t.Fatalf("second backfill: %d executions, %+v", len(res.Executions), res.Backfill)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1", j.ID); n != 12 {
		t.Errorf("%d executions, want 12", n)
	}
	// The job itself is untouched: no runs counted, next run unchanged.
	got, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.FiredCount != 0 || !got.NextRunAt.Equal(next) || got.Version != j.Version {
		t.Errorf("job after backfill: runs %d, next %v, version %d (was %d)", got.FiredCount, got.NextRunAt, got.Version, j.Version)
	}
}

func TestBackfillStepIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	j := mustCreate(t, s, testJob("fenced", nil))
	from := baseTime().Add(-10 * time.Minute).Truncate(time.Minute)
	b, err := s.CreateBackfill(ctx, j.ID, from, from.Add(time.Minute), 12)
	if err != nil {
		t.Fatal(err)
	}
	step := model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: from, Times: fiveSeconds(from, 12), Next: from.Add(time.Minute), Done: true}
	// Never claimed, then claimed by n1 at 7 and taken over by n2 at 8.
	for _, c := range []struct {
		claim func()
		node  string
		epoch int64
	}{
		{func() {}, "n1", 7},
		{func() { claim(t, s, "n1", 7, j.Bucket) }, "n1", 6},
		{func() { claim(t, s, "n2", 8, j.Bucket) }, "n1", 7},
	} {
		c.claim()
		if _, err := s.StepBackfill(ctx, c.node, c.epoch, step); !errors.Is(err, ErrFenced) {
			t.Errorf("step by %s at epoch %d: %v, want ErrFenced", c.node, c.epoch, err)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1", j.ID); n != 0 {
		t.Fatalf("fenced steps inserted %d executions", n)
	}
	if res := mustStep(t, s, "n2", 8, step); len(res.Executions) != 12 {
		t.Fatalf("owner's step: %d executions", len(res.Executions))
	}
}

func TestBackfillStepLeavesTheSchedulersRunsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	from := baseTime().Add(-10 * time.Minute).Truncate(time.Minute)
	times := fiveSeconds(from, 12)
	next := times[4] // the job's next run falls inside the range
	j := mustCreate(t, s, testJob("catching-up", &next))
	claim(t, s, "n1", 7, j.Bucket)
	b, err := s.CreateBackfill(ctx, j.ID, from, from.Add(time.Minute), 12)
	if err != nil {
		t.Fatal(err)
	}
	res := mustStep(t, s, "n1", 7, model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: from, Times: times, Next: from.Add(time.Minute), Done: true})
	if len(res.Executions) != 4 || !res.Backfill.NextAt.Equal(next) || res.Backfill.State != model.BackfillRunning {
		t.Fatalf("step: %d executions, %+v; want 4, waiting at %s", len(res.Executions), res.Backfill, next)
	}
	// Once the job is gone, the backfill fails.
	if _, err := s.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	res = mustStep(t, s, "n1", 7, model.BackfillStep{ID: b.ID, Bucket: j.Bucket, From: next, Times: times[4:], Next: from.Add(time.Minute), Done: true})
	if len(res.Executions) != 0 || res.Backfill.State != model.BackfillFailed || res.Backfill.Error == "" || res.Backfill.FinishedAt == nil {
		t.Fatalf("step after delete: %d executions, %+v", len(res.Executions), res.Backfill)
	}
}

func TestBackfillListStopAndRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	j := mustCreate(t, s, testJob("listed", nil))
	claim(t, s, "n1", 7, j.Bucket)
	from := baseTime().Add(-time.Hour)
	var ids []uuid.UUID
	for i := range 3 {
		b, err := s.CreateBackfill(ctx, j.ID, from.Add(time.Duration(i)*time.Minute), from.Add(30*time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	if _, err := s.CreateBackfill(ctx, uuid.New(), from, from.Add(time.Minute), 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("backfill of an unknown job: %v", err)
	}
	page, next, err := s.ListBackfills(ctx, j.ID, 2, "")
	if err != nil || len(page) != 2 || next == "" || page[0].ID != ids[2] || page[1].ID != ids[1] {
		t.Fatalf("first page: %v %q %v", page, next, err)
	}
	page, next, err = s.ListBackfills(ctx, j.ID, 2, next)
	if err != nil || len(page) != 1 || next != "" || page[0].ID != ids[0] {
		t.Fatalf("second page: %v %q %v", page, next, err)
	}

	stopped, err := s.StopBackfill(ctx, j.ID, ids[0])
	if err != nil || stopped.State != model.BackfillStopped || stopped.FinishedAt == nil {
		t.Fatalf("stop: %+v %v", stopped, err)
	}
	if again, err := s.StopBackfill(ctx, j.ID, ids[0]); err != nil || again.State != model.BackfillStopped {
		t.Errorf("stop again: %+v %v", again, err)
	}
	// A stopped backfill takes no step.
	res := mustStep(t, s, "n1", 7, model.BackfillStep{ID: ids[0], Bucket: j.Bucket, From: from, Times: []time.Time{from}, Next: from.Add(time.Second)})
	if len(res.Executions) != 0 || res.Backfill.State != model.BackfillStopped {
		t.Errorf("step of a stopped backfill: %d executions, %+v", len(res.Executions), res.Backfill)
	}
	mustStep(t, s, "n1", 7, model.BackfillStep{ID: ids[1], Bucket: j.Bucket, From: from.Add(time.Minute), Next: from.Add(30 * time.Minute), Done: true})
	if _, err := s.StopBackfill(ctx, j.ID, ids[1]); !errors.Is(err, ErrBackfillEnded) {
		t.Errorf("stop a done backfill: %v, want ErrBackfillEnded", err)
	}
	if _, err := s.StopBackfill(ctx, uuid.New(), ids[2]); !errors.Is(err, ErrNotFound) {
		t.Errorf("stop another job's backfill: %v, want ErrNotFound", err)
	}

	running, err := s.ListRunningBackfills(ctx, []int{j.Bucket})
	if err != nil || len(running) != 1 || running[0].ID != ids[2] || running[0].Schedule == nil ||
		running[0].Schedule.Cron != j.Schedule.Cron {
		t.Fatalf("running: %+v %v", running, err)
	}
}
