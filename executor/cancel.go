package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/wire"
)

// cancelPruneEvery is how often the set of cancelled executions forgets
// those older than wire.CancelTTL (their keys have expired from the
// bucket, which sends no event for that).
const cancelPruneEvery = 10 * time.Minute

// cancels is the Worker's copy of wire.CancelBucket and the running
// attempts it can stop.
type cancels struct {
	mu      sync.Mutex
	ids     map[string]time.Time // cancelled execution → when
	running map[string]map[uint64]context.CancelCauseFunc
	seq     uint64
}

func newCancels() *cancels {
	return &cancels{ids: map[string]time.Time{}, running: map[string]map[uint64]context.CancelCauseFunc{}}
}

// register records an attempt of execution id that cancel stops, unless
// the execution is cancelled already. Call unregister when the attempt
// ends.
func (c *cancels) register(id string, cancel context.CancelCauseFunc) (unregister func(), cancelled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ids[id]; ok {
		return func() {}, true
	}
	c.seq++
	n := c.seq
	if c.running[id] == nil {
		c.running[id] = map[uint64]context.CancelCauseFunc{}
	}
	c.running[id][n] = cancel
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.running[id], n)
		if len(c.running[id]) == 0 {
			delete(c.running, id)
		}
	}, false
}

// add marks execution id cancelled at at and stops its running attempts;
// it returns how many it stopped.
func (c *cancels) add(id string, at time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id] = at
	for _, cancel := range c.running[id] {
		cancel(ErrCancelled)
	}
	return len(c.running[id])
}

func (c *cancels) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
}

func (c *cancels) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// prune forgets cancellations made before before.
func (c *cancels) prune(before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, at := range c.ids {
		if at.Before(before) {
			delete(c.ids, id)
		}
	}
}

// watchCancels keeps w.cancels in step with wire.CancelBucket until ctx
// ends, watching it again after an error. It closes ready once it has read
// the bucket's current content (or gives up waiting for it: see Run).
func (w *Worker) watchCancels(ctx context.Context, ready chan<- struct{}) {
	var once sync.Once
	markReady := func() { once.Do(func() { close(ready) }) }
	prune := time.NewTicker(cancelPruneEvery)
	defer prune.Stop()
	const maxPause = 5 * time.Second
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: maxPause}
	for {
		began := time.Now()
		err := w.watchCancelsOnce(ctx, markReady, prune.C)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > maxPause {
			// It watched for a while: a new failure, not the same one.
			backoff.Reset()
		}
		if !backoff.Wait(ctx, w.log, "watch cancelled executions", "err", err) {
			return
		}
	}
}

func (w *Worker) watchCancelsOnce(ctx context.Context, markReady func(), prune <-chan time.Time) error {
	kv, err := w.js.KeyValue(ctx, wire.CancelBucket)
	if err != nil {
		return fmt.Errorf("open %s: %w", wire.CancelBucket, err)
	}
	watcher, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", wire.CancelBucket, err)
	}
	defer func() {
		_ = watcher.Stop()
		// The watcher's callback may be blocked handing over an update:
		// drain until its subscription is closed, so no goroutine stays.
		for range watcher.Updates() {
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-prune:
			w.cancels.prune(w.now().Add(-wire.CancelTTL))
		case <-w.cancelsNew:
			return errors.New(wire.CancelBucket + " is new: watching it again from its start")
		case entry, ok := <-watcher.Updates():
			if !ok {
				return errors.New("watch of " + wire.CancelBucket + " ended")
			}
			if entry == nil { // the bucket's current content is in
				markReady()
				continue
			}
			switch entry.Operation() {
			case jetstream.KeyValuePut:
				if n := w.cancels.add(entry.Key(), entry.Created()); n > 0 {
					w.log.Info("execution cancelled: stopping its running attempt", "execution_id", entry.Key())
				}
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				w.cancels.remove(entry.Key())
			}
		}
	}
}
