package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/store/model"
)

// fireMany creates n jobs in bucket due at at and fires them in one Fire.
func fireMany(t *testing.T, s *Store, epochs map[int]int64, counts map[int]int, at time.Time) []*model.Execution {
	t.Helper()
	var firings []Firing
	for bucket, n := range counts {
		for range n {
			j := testJob("job-"+uuid.NewString(), &at)
			j.ID = idInBucket(bucket)
			mustCreate(t, s, j)
			firings = append(firings, Firing{JobID: j.ID, Bucket: bucket, ScheduledFor: at})
		}
	}
	res, err := s.Fire(context.Background(), "n", epochs, firings)
	if err != nil || len(res.Executions) != len(firings) {
		t.Fatalf("fire: %d executions of %d, %v", len(res.Executions), len(firings), err)
	}
	return res.Executions
}

// A bucket's runs fired for the same instant share a batch, at most
// FireBatchMembers each, named by a member's execution id; a run fired
// alone has none. The batch is stored with the execution.
func TestFiringBatchesABucketsRunsOfOneInstant(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	at := baseTime()
	execs := fireMany(t, s, claim(t, s, "n", 1, 2, 4, 5), map[int]int{2: 2*FireBatchMembers + 22, 4: 3, 5: 1}, at)
	members := map[uuid.UUID][]*model.Execution{}
	for _, e := range execs {
		if e.Bucket == 5 {
			if e.Batch != uuid.Nil || e.Batched() {
				t.Errorf("a run fired alone has batch %s", e.Batch)
			}
			continue
		}
		if !e.Batched() {
			t.Fatalf("execution %s in bucket %d fired with others has no batch", e.ID, e.Bucket)
		}
		members[e.Batch] = append(members[e.Batch], e)
		if got := get(t, s, e.ID); got.Batch != e.Batch {
			t.Fatalf("stored batch %s, fired %s", got.Batch, e.Batch)
		}
	}
	sizes := map[int][]int{}
	for id, ms := range members {
		named := false
		for _, e := range ms {
			named = named || e.ID == id
			if e.Bucket != ms[0].Bucket || !e.ScheduledFor.Equal(ms[0].ScheduledFor) {
				t.Errorf("batch %s spans buckets or instants", id)
			}
		}
		if !named {
			t.Errorf("batch %s is not one of its members' execution id", id)
		}
		sizes[ms[0].Bucket] = append(sizes[ms[0].Bucket], len(ms))
	}
	if len(sizes[2]) != 3 || len(sizes[4]) != 1 || sizes[4][0] != 3 {
		t.Fatalf("batch sizes by bucket %v, want three in bucket 2 and one of 3 in bucket 4", sizes)
	}
	for _, n := range sizes[2] {
		if n != FireBatchMembers && n != 22 {
			t.Errorf("bucket 2's batches are %v, want two of %d and one of 22", sizes[2], FireBatchMembers)
		}
	}
}

// An outbox read cut by its limit leaves out the batch it would cut: a
// batch's first dispatch is one message whose id names the batch, so
// publishing part of it now and the rest later would lose the rest.
func TestOutboxReadsWholeBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime()
	execs := fireMany(t, s, claim(t, s, "n", 1, 2), map[int]int{2: 3 * FireBatchMembers}, at)
	total := map[uuid.UUID]int{}
	for _, e := range execs {
		total[e.Batch]++
	}
	far := dbNow(t, s).Add(time.Hour)
	for _, limit := range []int{FireBatchMembers + 10, 2*FireBatchMembers + 1, 3 * FireBatchMembers} {
		out, err := s.ListUndispatchedExecutions(ctx, []int{2}, limit, far)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uuid.UUID]int{}
		for _, e := range out {
			got[e.Batch]++
		}
		for b, n := range got {
			if n != total[b] {
				t.Errorf("limit %d: read %d of batch %s's %d members", limit, n, b, total[b])
			}
		}
		if want := min(limit/FireBatchMembers, 3) * FireBatchMembers; len(out) != want {
			t.Errorf("limit %d: read %d executions, want %d (whole batches)", limit, len(out), want)
		}
	}
}

// wholeBatches leaves a read alone when its limit was not reached, and
// never drops executions outside the cut batch.
func TestWholeBatchesKeepsTheRest(t *testing.T) {
	at := baseTime()
	b1, b2 := uuid.New(), uuid.New()
	if batchAfter(b1, b2) {
		b1, b2 = b2, b1
	}
	mk := func(batch uuid.UUID, at time.Time) *model.Execution {
		return &model.Execution{ID: uuid.New(), ScheduledFor: at, Batch: batch}
	}
	retry := &model.Execution{ID: uuid.New(), ScheduledFor: at, Dispatches: 1, NextAttemptAt: &at}
	read := []*model.Execution{retry, mk(b1, at), mk(b2, at), mk(b2, at), mk(uuid.Nil, at.Add(-time.Second))}
	if got := wholeBatches(read, 4); len(got) != 5 {
		t.Fatalf("within the limit: %d of 5 kept", len(got))
	}
	got := wholeBatches(read, 3)
	if len(got) != 3 || got[0] != retry || got[1].Batch != b1 || got[2].Batch != uuid.Nil {
		t.Fatalf("at the limit: kept %v, want the retry, batch 1 and the lone run (batch 2 sorts last and was cut)", got)
	}
}

// ListRedispatches reads the outbox without fired executions' first
// dispatches: a manual run is in it, a fired run not yet published is not
// (ListUndispatchedExecutions has both).
func TestListRedispatchesLeavesFirstDispatchesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fired := firedIn(t, s, 3)
	manual, err := s.CreateManualExecution(ctx, fired.JobID, dbNow(t, s))
	if err != nil {
		t.Fatal(err)
	}
	far := dbNow(t, s).Add(time.Hour)
	re, err := s.ListRedispatches(ctx, []int{3}, 100, far)
	if err != nil {
		t.Fatal(err)
	}
	if len(re) != 1 || re[0].ID != manual.ID {
		t.Fatalf("re-dispatches %v, want the manual run %s alone", re, manual.ID)
	}
	all, err := s.ListUndispatchedExecutions(ctx, []int{3}, 100, far)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("the whole outbox has %d executions, want the fired and the manual run", len(all))
	}
}
