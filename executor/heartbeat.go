package executor

import (
	"context"
	"sync"
	"time"

	"github.com/tock-sched/tock/domain"
)

// watcher does, from one goroutine, the timed work of all of a Worker's
// running attempts: their JetStream in-progress acks every third of the
// ack wait, so that a long attempt is not redelivered; their start
// reports once they have run Config.StartReportDelay; and, once the start
// is reported, a heartbeat event every Config.HeartbeatInterval.
//
// Why one goroutine. Almost every attempt ends long before any of this is
// due, and a goroutine, tickers, a timer and a context per attempt cost a
// no-op attempt more CPU than the rest of its handling. Here an attempt
// costs a link in a list, taken under a mutex when it starts and when it
// ends; the watcher scans the list every watchTick, and only while it is
// not empty. Timed work is therefore up to a tick late.
type watcher struct {
	mu       sync.Mutex
	head     *beat // running attempts, newest first
	sleeping bool  // run waits for wake: the list was empty
	wake     chan struct{}
	due      []*beat // scratch for run
}

func newWatcher() *watcher { return &watcher{wake: make(chan struct{}, 1)} }

// watchTick bounds how late the watcher's timed work is, but for short
// start report delays and heartbeat intervals: it ticks at a quarter of
// them.
const watchTick = 25 * time.Millisecond

// watchTickFor returns the tick for cfg, in [1ms, watchTick].
func watchTickFor(cfg *Config) time.Duration {
	tick := watchTick
	if cfg.StartReportDelay > 0 {
		tick = min(tick, cfg.StartReportDelay/4)
	}
	if cfg.HeartbeatInterval > 0 {
		tick = min(tick, cfg.HeartbeatInterval/4)
	}
	return max(tick, time.Millisecond)
}

// beat is one running attempt as the watcher sees it.
type beat struct {
	w *Worker
	d *delivery

	// Guarded by watcher.mu.
	prev, next *beat
	listed     bool
	ackEvery   time.Duration
	nextAck    time.Time
	start      *startReport // a delayed start report not made yet
	startDue   time.Time
	nextEvent  time.Time // zero: no heartbeat events (yet)
	publishing bool      // a heartbeat event is being published
	seq        int

	mu        sync.Mutex // held while a heartbeat event is published
	eventsOff bool

	// whole: the beat of a batch message itself (in-progress acks only),
	// settled by its members, not handed back on its own.
	whole bool
}

// heartbeat starts d's heartbeat, and has start reported after
// Config.StartReportDelay unless start is nil; the caller stops it.
func (w *Worker) heartbeat(d *delivery, start *startReport) *beat {
	now := time.Now()
	b := &beat{w: w, d: d, ackEvery: max(d.ackWait/3, 10*time.Millisecond)}
	b.nextAck = now.Add(b.ackEvery)
	if start != nil {
		start.beat = b
		b.start, b.startDue = start, now.Add(w.cfg.StartReportDelay)
	}
	wt := w.watch
	wt.mu.Lock()
	b.next = wt.head
	if wt.head != nil {
		wt.head.prev = b
	}
	wt.head, b.listed = b, true
	wake := wt.sleeping
	wt.sleeping = false
	wt.mu.Unlock()
	if wake {
		select {
		case wt.wake <- struct{}{}:
		default:
		}
	}
	return b
}

// run scans the running attempts every tick until ctx ends.
func (wt *watcher) run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !wt.scan(time.Now()) {
			continue
		}
		// Nothing runs: sleep until an attempt starts.
		t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-wt.wake:
		}
		t.Reset(tick)
	}
}

// scan does the work due at now. It reports whether the list was empty,
// marking the watcher asleep.
func (wt *watcher) scan(now time.Time) (empty bool) {
	wt.mu.Lock()
	if wt.head == nil {
		wt.sleeping = true
		wt.mu.Unlock()
		return true
	}
	due := wt.due[:0]
	for b := wt.head; b != nil; b = b.next {
		if !b.nextAck.After(now) {
			b.nextAck = now.Add(b.ackEvery)
			due = append(due, b)
		}
		if b.start != nil && !b.startDue.After(now) {
			// settle waits for the report, or stops it from being made.
			go b.start.report()
			b.start = nil
		}
		if !b.nextEvent.IsZero() && !b.nextEvent.After(now) && !b.publishing {
			// stopEvents waits for the publish, or stops it.
			b.publishing = true
			b.seq++
			b.nextEvent = now.Add(b.w.cfg.HeartbeatInterval)
			go b.publish(b.seq)
		}
	}
	wt.mu.Unlock()
	// In-progress acks are publishes that do not wait for an answer.
	for i, b := range due {
		if err := b.d.msg.InProgress(); err != nil {
			b.d.log().Warn("heartbeat (in-progress ack)", "err", err)
		}
		due[i] = nil
	}
	wt.due = due
	return false
}

func (b *beat) publish(seq int) {
	w := b.w
	defer func() {
		w.watch.mu.Lock()
		b.publishing = false
		w.watch.mu.Unlock()
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eventsOff {
		return
	}
	ev := w.event(b.d, domain.EventHeartbeat)
	ev.Seq = seq
	// One try: the next heartbeat is as good as a retried one.
	pctx, cancel := context.WithTimeout(w.abandonCtx, min(publishTimeout, max(w.cfg.HeartbeatInterval, 100*time.Millisecond)))
	defer cancel()
	if err := w.publishOnce(pctx, ev); err != nil {
		b.d.log().Warn("heartbeat event", "seq", seq, "err", err)
	}
}

// started starts the heartbeat events.
func (b *beat) started() {
	if b.w.cfg.HeartbeatInterval <= 0 {
		return
	}
	wt := b.w.watch
	wt.mu.Lock()
	if b.listed && b.nextEvent.IsZero() {
		b.nextEvent = time.Now().Add(b.w.cfg.HeartbeatInterval)
	}
	wt.mu.Unlock()
}

// stopEvents stops the heartbeat events, waiting for one being published.
func (b *beat) stopEvents() {
	b.mu.Lock()
	b.eventsOff = true
	b.mu.Unlock()
}

// stop ends the heartbeat; calling it again is harmless. An in-progress
// ack the watcher took from the list just before may still go out.
func (b *beat) stop() {
	b.stopEvents()
	wt := b.w.watch
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if !b.listed {
		return
	}
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		wt.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	}
	b.prev, b.next, b.listed, b.start = nil, nil, false, nil
}

// handBack gives the messages of the attempts still running back to
// JetStream, unreported, to be delivered at once to another executor, and
// stops their in-progress acks. Run calls it at shutdown for attempts
// whose handlers ignored the cancellation of their contexts; it returns
// how many it handed back.
func (wt *watcher) handBack() int {
	wt.mu.Lock()
	var running []*beat
	for b := wt.head; b != nil; b = b.next {
		if !b.whole {
			running = append(running, b)
		}
	}
	wt.mu.Unlock()
	for _, b := range running {
		b.stop()
		if err := b.d.msg.Nak(); err != nil {
			b.d.log().Warn("hand back abandoned attempt", "err", err)
			continue
		}
		b.d.log().Warn("attempt ignored its cancellation at shutdown; handed back unreported")
	}
	return len(running)
}
