package store

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// The rescue's two statements: ListStuckExecutions lists a published
// first dispatch that nothing started, and neither one still waiting for
// its publish (its bucket's position behind it) nor one running with a
// recent sign of life; RequeueWaitingExecutions publishes it again as its
// next dispatch with a note, and leaves alone a row that moved on since it
// was read (a second call with the old dispatch changes nothing), after
// which it is in the outbox and no longer a candidate.
func TestStuckExecutionsListedAndRequeued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	published := firedIn(t, s, 1)
	firedIn(t, s, 2) // fired, its publish not yet acknowledged
	running := firedIn(t, s, 3)
	record(t, s, model.AttemptEvent{Type: domain.EventStarted, ID: running.ID, Attempt: 1, Executor: "x", At: dbNow(t, s)})
	now := dbNow(t, s)
	if err := s.AdvancePublishPositions(ctx, map[int]time.Time{1: now, 3: now}); err != nil {
		t.Fatal(err)
	}
	buckets := []int{1, 2, 3}
	list := func() []model.StuckExecution {
		t.Helper()
		got, err := s.ListStuckExecutions(ctx, buckets, now.Add(time.Hour), now.Add(-time.Minute), 100)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := list()
	if len(got) != 1 || got[0].ID != published.ID || got[0].Since.IsZero() {
		t.Fatalf("stuck candidates %+v, want only %s (published, unstarted)", got, published.ID)
	}

	n, err := s.RequeueWaitingExecutions(ctx, []*model.Execution{got[0].Execution}, "published again as dispatch {dispatch}")
	if err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v; want 1", n, err)
	}
	e := get(t, s, published.ID)
	if e.State != domain.ExecQueued || e.Dispatches != 1 || e.Attempts != 0 || !inOutbox(t, s, e, dbNow(t, s)) {
		t.Fatalf("after the rescue: %+v; want queued, dispatch 1, attempt 0, in the outbox", e)
	}
	notes, err := s.ListExecutionNotes(ctx, e.ID, e.ScheduledFor)
	if err != nil || len(notes) != 1 || notes[0].Kind != NoteRescued || notes[0].Note != "published again as dispatch 1" {
		t.Fatalf("notes %+v, %v; want one rescue naming dispatch 1", notes, err)
	}
	if n, err := s.RequeueWaitingExecutions(ctx, []*model.Execution{got[0].Execution}, "again"); err != nil || n != 0 {
		t.Fatalf("a second rescue of the row as first read: %d, %v; want 0 (it moved on)", n, err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after the rescue, candidates %+v; want none (it waits in the outbox)", got)
	}
}
