package store

import (
	"github.com/tock-sched/tock/domain"

	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A fired execution stays in the outbox until its bucket's publish
// position covers it; from then on it is not published again, and the
// API shows it dispatched. A position never moves back.
func TestPublishPositionCoversFiredExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	e := firedIn(t, s, 3)
	far := dbNow(t, s).Add(time.Hour)
	inOutbox := func() bool {
		out, err := s.Undispatched(ctx, []int{3}, 100, far)
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
	if !inOutbox() || get(t, s, e.ID).DispatchedAt != nil {
		t.Fatal("a fired execution not yet published: want it in the outbox, not dispatched")
	}
	if err := s.Published(ctx, map[int]time.Time{3: e.CreatedAt.Add(-time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if !inOutbox() {
		t.Fatal("a position before the execution took it out of the outbox")
	}
	if err := s.Published(ctx, map[int]time.Time{3: e.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	if inOutbox() {
		t.Fatal("an execution covered by its bucket's position is still in the outbox")
	}
	if got := get(t, s, e.ID); got.DispatchedAt == nil || got.DispatchedAt.Before(e.ScheduledFor) {
		t.Fatalf("dispatched_at %v, want at or after its scheduled time %v", got.DispatchedAt, e.ScheduledFor)
	}
	if err := s.Published(ctx, map[int]time.Time{3: e.CreatedAt.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if inOutbox() {
		t.Fatal("the position moved back")
	}
}

// An execution runs the spec its job had when it fired: changing the job
// writes a new spec and leaves earlier executions alone; jobs that run the
// same thing share one spec row.
func TestExecutionsKeepTheSpecTheyFired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	j := mustCreate(t, s, testJob("spec-"+uuid.NewString(), &t0))
	twin := mustCreate(t, s, testJob("spec-twin-"+uuid.NewString(), &t0))
	if j.SpecID == nil || twin.SpecID == nil || *j.SpecID != *twin.SpecID {
		t.Fatalf("jobs with the same handler and payload: specs %v and %v, want one", j.SpecID, twin.SpecID)
	}
	epochs := claim(t, s, "n", 1, j.Bucket)
	fire := func(at time.Time) *Execution {
		t.Helper()
		next := at.Add(time.Second)
		res, err := s.Fire(ctx, "n", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next}})
		if err != nil || len(res.Executions) != 1 {
			t.Fatalf("fire: %+v %v", res, err)
		}
		return res.Executions[0]
	}
	first := fire(t0)
	got, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.Handler.URL = "http://example.test/v2"
	got.Payload = []byte(`{"n": 2}`)
	if err := s.UpdateJob(ctx, got); err != nil {
		t.Fatal(err)
	}
	second := fire(t0.Add(time.Second))
	e1, e2 := get(t, s, first.ID), get(t, s, second.ID)
	if e1.Handler.URL != "http://example.test/hook" || string(e1.Payload) != `{"n": 1}` {
		t.Fatalf("first execution runs %s %s, want what the job had when it fired", e1.Handler.URL, e1.Payload)
	}
	if e2.Handler.URL != "http://example.test/v2" || string(e2.Payload) != `{"n": 2}` {
		t.Fatalf("second execution runs %s %s, want the changed job", e2.Handler.URL, e2.Payload)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE handler IS NOT NULL OR payload IS NOT NULL"); n != 0 {
		t.Fatalf("%d executions carry a copy of their spec", n)
	}
	if n := count(t, s, "SELECT count(*) FROM job_specs"); n != 2 {
		t.Fatalf("%d spec rows, want 2 (the shared first one, the changed one)", n)
	}
}

// An event that says when JetStream stored the delivered message records
// that as the execution's dispatch time.
func TestEventRecordsWhenItsMessageWasPublished(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	e := fired(t, s)
	published := dbNow(t, s).Add(-3 * time.Second).Truncate(time.Millisecond)
	record(t, s, AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: published.Add(time.Second),
		Type: domain.EventSucceeded, PublishedAt: &published})
	if got := get(t, s, e.ID); got.DispatchedAt == nil || !got.DispatchedAt.Equal(published) {
		t.Fatalf("dispatched_at %v, want the message's publish time %v", got.DispatchedAt, published)
	}
}
