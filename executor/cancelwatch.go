package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/wire"
)

// cancelWatcher keeps a Worker's cancels in step with wire.CancelBucket.
type cancelWatcher struct {
	js      jetstream.JetStream
	cancels *cancels
	now     func() time.Time
	log     *slog.Logger
	renewed chan struct{} // cap 1: the bucket is new, watch it again
}

func newCancelWatcher(js jetstream.JetStream, c *cancels, now func() time.Time, log *slog.Logger) *cancelWatcher {
	return &cancelWatcher{js: js, cancels: c, now: now, log: log, renewed: make(chan struct{}, 1)}
}

// restart has the watch start over from the bucket's start: the bucket is
// new, and a watch resumes at its old sequence number, which would skip
// the new bucket's keys up to there.
func (cw *cancelWatcher) restart() {
	select {
	case cw.renewed <- struct{}{}:
	default:
	}
}

// run watches the bucket until ctx ends, watching it again after an
// error. It closes ready once it has read the bucket's current content.
func (cw *cancelWatcher) run(ctx context.Context, ready chan<- struct{}) {
	var once sync.Once
	markReady := func() { once.Do(func() { close(ready) }) }
	prune := time.NewTicker(cancelPruneEvery)
	defer prune.Stop()
	const maxPause = 5 * time.Second
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: maxPause}
	for {
		began := time.Now()
		err := cw.watch(ctx, markReady, prune.C)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > maxPause {
			// It watched for a while: a new failure, not the same one.
			backoff.Reset()
		}
		if !backoff.Wait(ctx, cw.log, "watch cancelled executions", "err", err) {
			return
		}
	}
}

// watch watches the bucket once, until an error, a restart or ctx's end.
func (cw *cancelWatcher) watch(ctx context.Context, markReady func(), prune <-chan time.Time) error {
	kv, err := cw.js.KeyValue(ctx, wire.CancelBucket)
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
			cw.cancels.prune(cw.now().Add(-wire.CancelTTL))
		case <-cw.renewed:
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
				if n := cw.cancels.add(entry.Key(), entry.Created()); n > 0 {
					cw.log.Info("execution cancelled: stopping its running attempt", "execution_id", entry.Key())
				}
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				cw.cancels.remove(entry.Key())
			}
		}
	}
}
