package store

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
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
		out, err := s.ListUndispatchedExecutions(ctx, []int{3}, 100, far)
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
	if err := s.AdvancePublishPositions(ctx, map[int]time.Time{3: e.CreatedAt.Add(-time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if !inOutbox() {
		t.Fatal("a position before the execution took it out of the outbox")
	}
	if err := s.AdvancePublishPositions(ctx, map[int]time.Time{3: e.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	if inOutbox() {
		t.Fatal("an execution covered by its bucket's position is still in the outbox")
	}
	if got := get(t, s, e.ID); got.DispatchedAt == nil || got.DispatchedAt.Before(e.ScheduledFor) {
		t.Fatalf("dispatched_at %v, want at or after its scheduled time %v", got.DispatchedAt, e.ScheduledFor)
	}
	if err := s.AdvancePublishPositions(ctx, map[int]time.Time{3: e.CreatedAt.Add(-time.Hour)}); err != nil {
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
	fire := func(at time.Time) *model.Execution {
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
	// What Fire returns (filled from the store's cache of specs) is what
	// was stored: the changed job's new spec, not the cached old one.
	if first.Handler.URL != "http://example.test/hook" || second.Handler.URL != "http://example.test/v2" ||
		string(second.Payload) != `{"n": 2}` || second.Retry != got.Retry || second.Timeout != got.Timeout {
		t.Fatalf("fired executions run %s and %s %s, want the spec each fired with", first.Handler.URL, second.Handler.URL, second.Payload)
	}
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
	record(t, s, model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: published.Add(time.Second),
		Type: domain.EventSucceeded, PublishedAt: &published})
	if got := get(t, s, e.ID); got.DispatchedAt == nil || !got.DispatchedAt.Equal(published) {
		t.Fatalf("dispatched_at %v, want the message's publish time %v", got.DispatchedAt, published)
	}
}

// A job without a spec (one stored before job specs existed) fires an
// execution that carries its own copy of handler, payload, retry policy
// and timeout, and Fire returns them decoded from that copy.
func TestFireJobWithoutSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	j := mustCreate(t, s, testJob("nospec-"+uuid.NewString(), &t0))
	if _, err := s.pool.Exec(ctx, "UPDATE jobs SET spec_id = NULL WHERE id = $1", j.ID); err != nil {
		t.Fatal(err)
	}
	epochs := claim(t, s, "n", 1, j.Bucket)
	next := t0.Add(time.Second)
	res, err := s.Fire(ctx, "n", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: &next}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	e := res.Executions[0]
	if e.Handler.URL != j.Handler.URL || string(e.Payload) != `{"n": 1}` || e.Retry != j.Retry || e.Timeout != j.Timeout {
		t.Fatalf("fired %+v, want the job's handler, payload, retry and timeout", e)
	}
	if stored := get(t, s, e.ID); stored.Handler.URL != j.Handler.URL || string(stored.Payload) != `{"n": 1}` {
		t.Fatalf("stored %+v, want its own copy", stored)
	}
}

// A batch's plain firings reach fireSQL in (bucket, job id) order, the
// order a statement over the jobs table meets the rows, whatever order
// they came in (due time): locking in another order deadlocked with a
// bulk DELETE.
func TestGroupFiringsSortsByBucketAndID(t *testing.T) {
	var firings []Firing
	for i := range 200 {
		firings = append(firings, Firing{JobID: uuid.New(), Bucket: (i * 7) % 5, ScheduledFor: baseTime()})
	}
	g, policy := groupFirings(firings, []int{0, 1, 2, 3, 4})
	if len(g.ids) != len(firings) || len(policy) != 0 {
		t.Fatalf("%d plain firings of %d, %d policy groups", len(g.ids), len(firings), len(policy))
	}
	for i := 1; i < len(g.ids); i++ {
		if g.bs[i] < g.bs[i-1] || (g.bs[i] == g.bs[i-1] && bytes.Compare(g.ids[i][:], g.ids[i-1][:]) < 0) {
			t.Fatalf("firing %d (bucket %d, %s) after (bucket %d, %s)", i, g.bs[i], g.ids[i], g.bs[i-1], g.ids[i-1])
		}
	}
	for i, id := range g.ids {
		if g.execIDs[i] != domain.ExecutionID(id, g.scheds[i]) {
			t.Fatalf("arrays out of step at %d", i)
		}
	}
}
