package store

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

func TestRequeueAfterWipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	notes := listenExec(t, s)
	now := dbNow(t, s)
	// When the new stream came to be: after the executions' scheduled
	// times (now, to the second), as a dispatch never precedes those.
	created := now.Add(3 * time.Second)
	markAt := func(e *model.Execution, dispatch int, at time.Time) {
		t.Helper()
		if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: e.ID, Dispatch: dispatch}}, at); err != nil {
			t.Fatal(err)
		}
	}

	lost := firedIn(t, s, 1) // published into the old stream, never run
	markAt(lost, 0, created.Add(-2*time.Second))
	retry := firedIn(t, s, 1) // its retry published into the old stream
	record(t, s, model.AttemptEvent{ID: retry.ID, Attempt: 1, Executor: "x", At: now.Add(-time.Minute), Type: domain.EventFailed,
		Error: "boom", RetryIn: 10 * time.Millisecond})
	retryDue := *get(t, s, retry.ID).NextAttemptAt
	markAt(retry, 1, created.Add(-time.Second))
	unpublished := firedIn(t, s, 1) // still in the outbox
	fresh := firedIn(t, s, 1)       // published into the new stream
	markAt(fresh, 0, created.Add(10*time.Millisecond))
	running := firedIn(t, s, 1)
	markAt(running, 0, created.Add(-2*time.Second))
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: running.ID, Attempt: 1, Executor: "x", At: created.Add(-time.Second)})
	done := firedIn(t, s, 1)
	markAt(done, 0, created.Add(-2*time.Second))
	record(t, s, model.AttemptEvent{ID: done.ID, Attempt: 1, Executor: "x", At: created.Add(-time.Second), Type: domain.EventSucceeded, Final: true})
	elsewhere := firedIn(t, s, 2)
	markAt(elsewhere, 0, created.Add(-2*time.Second))

	n, err := s.RequeueWipedExecutions(ctx, []int{1, 3}, created)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("re-queued %d, want 2 (lost and retry)", n)
	}
	expectNotify(t, notes, 1)
	after := dbNow(t, s)

	g := get(t, s, lost.ID)
	if g.State != domain.ExecQueued || g.DispatchedAt != nil || g.Dispatches != 0 || g.Attempts != 0 || !inOutbox(t, s, g, after) {
		t.Fatalf("lost execution after the re-queue: %+v", g)
	}
	within(t, "its next attempt", g.NextAttemptAt, now, after)
	g = get(t, s, retry.ID)
	if g.State != domain.ExecFailed || g.DispatchedAt != nil || g.Dispatches != 1 || g.NextAttemptAt == nil ||
		!g.NextAttemptAt.Equal(retryDue) || !inOutbox(t, s, g, after) {
		t.Fatalf("lost retry after the re-queue: %+v (its retry was due %s)", g, retryDue)
	}
	for _, x := range []*model.Execution{unpublished, fresh, running, done, elsewhere} {
		before := x.DispatchedAt
		g := get(t, s, x.ID)
		if g.NextAttemptAt != nil || (g.DispatchedAt == nil) != (x == unpublished) {
			t.Errorf("execution %s (%s, dispatched %v) was touched: %+v", x.ID, g.State, before, g)
		}
	}
	if n, err := s.RequeueWipedExecutions(ctx, []int{1, 3}, created); err != nil || n != 0 {
		t.Fatalf("a second pass re-queued %d, %v; want 0", n, err)
	}
}
