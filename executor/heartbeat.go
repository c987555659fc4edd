package executor

import (
	"context"
	"sync"
	"time"

	"github.com/tock-sched/tock/domain"
)

// beat is an attempt's heartbeat: JetStream in-progress acks every third
// of the ack wait, so a long attempt is not redelivered, and, once the
// start is reported, a heartbeat event every Config.HeartbeatInterval.
type beat struct {
	startedc  chan struct{}
	startOnce sync.Once
	mu        sync.Mutex // held while a heartbeat event is published
	eventsOff bool
	cancel    context.CancelFunc
	done      chan struct{}
}

// heartbeat starts d's heartbeat; the caller stops it.
func (w *Worker) heartbeat(d *delivery) *beat {
	ctx, cancel := context.WithCancel(w.abandonCtx)
	b := &beat{startedc: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		acks := time.NewTicker(max(d.ackWait/3, 10*time.Millisecond))
		defer acks.Stop()
		var (
			events  <-chan time.Time
			started = b.startedc
			seq     int
		)
		for {
			select {
			case <-acks.C:
				if err := d.msg.InProgress(); err != nil {
					d.log.Warn("heartbeat (in-progress ack)", "err", err)
				}
			case <-started:
				started = nil
				if w.cfg.HeartbeatInterval > 0 {
					t := time.NewTicker(w.cfg.HeartbeatInterval)
					defer t.Stop()
					events = t.C
				}
			case <-events:
				seq++
				b.publish(ctx, w, d, seq)
			case <-ctx.Done():
				return
			}
		}
	}()
	return b
}

func (b *beat) publish(ctx context.Context, w *Worker, d *delivery, seq int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eventsOff {
		return
	}
	ev := w.event(d, domain.EventHeartbeat)
	ev.Seq = seq
	// One try: the next heartbeat is as good as a retried one.
	pctx, cancel := context.WithTimeout(ctx, min(publishTimeout, max(w.cfg.HeartbeatInterval, 100*time.Millisecond)))
	defer cancel()
	if err := w.publishOnce(pctx, ev); err != nil {
		d.log.Warn("heartbeat event", "seq", seq, "err", err)
	}
}

// started starts the heartbeat events.
func (b *beat) started() { b.startOnce.Do(func() { close(b.startedc) }) }

// stopEvents stops the heartbeat events, waiting for one being published.
func (b *beat) stopEvents() {
	b.mu.Lock()
	b.eventsOff = true
	b.mu.Unlock()
}

// stop ends the heartbeat and waits for it; calling it again is harmless.
func (b *beat) stop() {
	b.stopEvents()
	b.cancel()
	<-b.done
}
