package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// Concurrent CreateJob calls are combined into CreateJobBatch calls, the
// way Postgres combines concurrent commits into one WAL flush: at most
// maxCreateFlushes batches are being stored at a time, and a call that
// arrives while they are busy waits for the next one, which takes every
// call waiting by then (up to maxCreateCombined). Nothing waits on a
// timer: alone, a call is stored at once, by itself, with CreateJob's
// single statement; under load, batches grow with the load. Sixteen API
// clients creating jobs one per request cost Postgres about 500 µs of
// CPU per job stored one by one; combined, a fraction of that (see
// docs/bench.md).
//
// What each caller sees does not change: its own job is created or not,
// with its own error. A batch that fails as a whole (a database error,
// which one bad job can cause for all) is retried one job at a time, so
// that every caller gets the answer it would have got alone.
const (
	maxCreateFlushes  = 2
	maxCreateCombined = 1000
	// createBatchTimeout bounds a combined batch, which no single
	// caller's context may cancel on behalf of the others.
	createBatchTimeout = 30 * time.Second
)

type createCombiner struct {
	mu       sync.Mutex
	pending  []*createCall
	flushing int
	// combined counts the calls answered by a CreateJobBatch of more
	// than one job; retried counts the calls retried alone after their
	// batch failed as a whole.
	combined, retried atomic.Int64
}

type createCall struct {
	ctx  context.Context
	job  *model.Job
	done chan error // buffered: the flusher never waits on a caller
}

// createJob stores j through the combiner.
func (s *Store) createJob(ctx context.Context, j *model.Job) error {
	c := &s.creates
	call := &createCall{ctx: ctx, job: j, done: make(chan error, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, call)
	if c.flushing < maxCreateFlushes {
		c.flushing++
		batch := c.take()
		c.mu.Unlock()
		s.flushCreates(batch)
		s.afterFlush()
		return <-call.done
	}
	c.mu.Unlock()
	select {
	case err := <-call.done:
		return err
	case <-ctx.Done():
	}
	// Given up while waiting: if no flusher has taken the call yet it is
	// withdrawn and nothing is stored; otherwise its outcome is awaited,
	// so that an error still means the job was not stored.
	c.mu.Lock()
	for i, p := range c.pending {
		if p == call {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			c.mu.Unlock()
			return ctx.Err()
		}
	}
	c.mu.Unlock()
	return <-call.done
}

// take removes and returns up to maxCreateCombined pending calls. The
// caller holds mu.
func (c *createCombiner) take() []*createCall {
	n := min(len(c.pending), maxCreateCombined)
	batch := make([]*createCall, n)
	copy(batch, c.pending)
	c.pending = append(c.pending[:0], c.pending[n:]...)
	return batch
}

// afterFlush hands the calls that arrived during a flush to a flusher of
// their own, so the caller that flushed returns at once; or, when none
// wait, ends this flusher's turn.
func (s *Store) afterFlush() {
	c := &s.creates
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.flushing--
		c.mu.Unlock()
		return
	}
	batch := c.take()
	c.mu.Unlock()
	go func() {
		s.flushCreates(batch)
		s.afterFlush()
	}()
}

// flushCreates stores a batch of calls and answers each.
func (s *Store) flushCreates(batch []*createCall) {
	live := batch[:0:0]
	for _, call := range batch {
		if err := call.ctx.Err(); err != nil {
			call.done <- err
			continue
		}
		live = append(live, call)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].done <- s.createOne(live[0].ctx, live[0].job)
		return
	}
	jobs := make([]*model.Job, len(live))
	for i, call := range live {
		jobs[i] = call.job
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), createBatchTimeout)
	errs, err := s.CreateJobBatch(ctx, jobs)
	cancel()
	if err != nil {
		s.creates.retried.Add(int64(len(live)))
		for _, call := range live {
			call.done <- s.createOne(call.ctx, call.job)
		}
		return
	}
	s.creates.combined.Add(int64(len(live)))
	// errs[i] is nil, a conflict or a refusal before the database, each
	// worded as createOne words it.
	for i, call := range live {
		call.done <- errs[i]
	}
}
