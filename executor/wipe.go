package executor

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/wire"
)

// wipeCheckEvery is how often an executor reads the incarnations of the
// event stream and the cancel bucket. The scheduler waits
// (maintenance.DefaultWipeGrace) well beyond it before it publishes lost
// executions again, so that the journal is sent first.
const wipeCheckEvery = time.Second

// watchWipes notices JetStream losing what an executor relies on, until
// ctx ends: a new event stream gets the journal sent again (resend); a new
// cancel bucket has the cancellation watch start over, since a watch
// resumes at its old sequence number and would skip the new bucket's keys
// up to there.
func (w *Worker) watchWipes(ctx context.Context) {
	events := wire.NewIncarnationWatch(w.js, wire.EventStream)
	cancelBucket := wire.NewIncarnationWatch(w.js, "KV_"+wire.CancelBucket)
	t := time.NewTicker(wipeCheckEvery)
	defer t.Stop()
	resend := false
	for {
		if inc, isNew, ok := w.checkIncarnation(ctx, events); ok && (isNew || resend) {
			resend = !w.resend(ctx, inc)
		}
		if _, isNew, ok := w.checkIncarnation(ctx, cancelBucket); ok && isNew {
			w.log.Warn("cancel bucket is new (JetStream lost the old one); watching it again", "bucket", wire.CancelBucket)
			w.cancelWatch.restart()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Worker) checkIncarnation(ctx context.Context, watch *wire.IncarnationWatch) (wire.Incarnation, bool, bool) {
	cctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	inc, isNew, err := watch.Check(cctx)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			w.log.Debug("read stream", "err", err)
		}
		return inc, false, false
	}
	return inc, isNew, true
}
