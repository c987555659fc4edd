package executor

import (
	"github.com/tock-sched/tock/domain"

	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/wire"
)

// queue is one handler's queue: its three consumers, one per priority
// class in domain.Priorities order, and its slots. Only its consume loop
// changes consumers and takes slots; attempts give slots back.
type queue struct {
	name        string
	fn          Func
	concurrency int
	consumers   []jetstream.Consumer
	ackWait     time.Duration
	slots       chan struct{} // one per attempt in flight
	freed       chan struct{} // rung when a slot is given back
}

func (q *queue) free() int { return cap(q.slots) - len(q.slots) }

func (q *queue) release() {
	<-q.slots
	select {
	case q.freed <- struct{}{}:
	default:
	}
}

func (w *Worker) ensureConsumers(ctx context.Context, q *queue) error {
	consumers := make([]jetstream.Consumer, 0, len(domain.Priorities))
	ackWait := wire.DefaultAckWait
	for _, p := range domain.Priorities {
		c, err := wire.EnsureConsumer(ctx, w.js, q.name, p, w.consumerOpts)
		if err != nil {
			return err
		}
		if info := c.CachedInfo(); info != nil && info.Config.AckWait > 0 {
			ackWait = min(ackWait, info.Config.AckWait)
		}
		consumers = append(consumers, c)
	}
	q.consumers, q.ackWait = consumers, ackWait
	return nil
}

// After a doorbell ring whose pull found nothing, the queue is pulled
// again after these pauses: core subscribers see a message before the
// stream has stored it, and its consumers learn of it a moment after that
// (the server signals them asynchronously); until then a no-wait pull
// finds them empty. The last pause is for a server under load.
var ringRepolls = []time.Duration{2 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

// consume runs q's executions until ctx ends. Whenever q has free slots it
// pulls, without waiting, from the high, then normal, then low consumer,
// as many messages as there are free slots, so that a saturated queue
// starts its high executions first, and a message never waits in a local
// buffer with its ack timer running. When all three are empty it waits for
// its doorbell (a core subscription to the queue's subjects, which rings
// on every publish), a freed slot, or a fallback poll for redeliveries.
func (w *Worker) consume(ctx context.Context, q *queue, attempts *sync.WaitGroup) {
	log := w.log.With("queue", q.name)
	// The doorbell copies every execution published on the queue to this
	// process, so it is only subscribed while the queue has free slots: a
	// saturated queue pulls again when a slot frees, and under a burst the
	// executor is spared a copy of every message.
	bell := make(chan struct{}, 1)
	var sub *nats.Subscription
	subscribe := func() {
		var err error
		sub, err = w.cfg.NATS.Subscribe(wire.ExecSubjectPrefix+q.name+".*", func(*nats.Msg) {
			select {
			case bell <- struct{}{}:
			default:
			}
		})
		if err != nil {
			sub = nil
			log.Warn("no doorbell for the queue; polling only", "err", err, "poll", w.pollEvery)
			return
		}
		// A slow doorbell only rings late: the poll covers for it.
		_ = sub.SetPendingLimits(-1, -1)
	}
	unsubscribe := func() {
		if sub != nil {
			_ = sub.Unsubscribe()
			sub = nil
		}
	}
	defer unsubscribe()
	subscribe()
	saturated := false

	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	timer := time.NewTimer(0)
	defer timer.Stop()
	rang, repoll := false, 0
	for {
		if ctx.Err() != nil {
			return
		}
		free := q.free()
		got := 0
		if free > 0 {
			// A ring from now on is for a message this pull may miss.
			select {
			case <-bell:
				rang = true
			default:
			}
			var err error
			got, err = w.pull(q, free, attempts)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// NATS may be down, or wiped: pause, then make sure the
				// stream and consumers exist again before the next pull.
				if !backoff.Wait(ctx, log, "pull executions", "err", err) {
					return
				}
				if err := wire.EnsureStreams(ctx, w.js); err != nil {
					log.Warn("re-create streams", "err", err)
					continue
				}
				if err := w.ensureConsumers(ctx, q); err != nil {
					log.Warn("re-create consumers", "err", err)
				}
				continue
			}
			backoff.Reset()
		}
		var wake time.Duration
		switch {
		case got == free:
			// Saturated (pulling again needs a free slot), and the
			// consumers may hold more.
			rang, repoll = false, 0
			wake = -1
			if !saturated {
				saturated = true
				unsubscribe()
			}
		case saturated:
			// Slots are free again: subscribe the doorbell, then pull
			// at once, since a publish before the subscription rang
			// nothing.
			saturated = false
			subscribe()
			rang, repoll = true, 0
			wake = 0
		case got > 0:
			// Every consumer gave less than asked: they were empty.
			rang, repoll = false, 0
			wake = w.pollEvery
		case rang && repoll < len(ringRepolls):
			wake = ringRepolls[repoll]
			repoll++
		default:
			rang, repoll = false, 0
			wake = w.pollEvery
		}
		var fallback <-chan time.Time
		if wake >= 0 {
			timer.Reset(wake)
			fallback = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-q.freed:
			if saturated {
				gatherSlots(ctx, q)
			}
		case <-bell:
			rang, repoll = true, 0
		case <-fallback:
		}
		timer.Stop()
	}
}

// slotLinger is how long a saturated queue waits for more slots to free
// before it pulls again: under saturation attempts end one by one, and a
// pull per freed slot would cost a round trip (or three, one per priority
// consumer) per execution.
const slotLinger = 2 * time.Millisecond

// gatherSlots waits until a quarter of q's slots are free, or slotLinger
// has passed.
func gatherSlots(ctx context.Context, q *queue) {
	want := max(1, q.concurrency/4)
	if q.free() >= want {
		return
	}
	t := time.NewTimer(slotLinger)
	defer t.Stop()
	for q.free() < want {
		select {
		case <-q.freed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// pull fetches up to free messages without waiting, from the consumers in
// priority order, and starts an attempt for each; every attempt gives its
// slot back when it ends. It returns how many it started.
func (w *Worker) pull(q *queue, free int, attempts *sync.WaitGroup) (int, error) {
	got, ackWait := 0, q.ackWait
	for _, c := range q.consumers {
		if got == free {
			break
		}
		batch, err := c.FetchNoWait(free - got)
		if err != nil {
			return got, err
		}
		// Messages that arrive as ctx ends are still run: they are ours
		// already, and handing them back would cost them an attempt.
		for msg := range batch.Messages() {
			got++
			q.slots <- struct{}{}
			w.inFlight.Add(1)
			attempts.Go(func() {
				defer q.release()
				defer w.inFlight.Add(-1)
				w.process(q, msg, ackWait)
			})
		}
		if err := batch.Error(); err != nil && !maxAckPending(err) {
			return got, err
		}
	}
	return got, nil
}

// maxAckPending reports whether err is JetStream's refusal to deliver
// more while the consumer's MaxAckPending messages are out with
// executors: the queue is busy elsewhere, which is no error here.
func maxAckPending(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "maxackpending") ||
		strings.Contains(strings.ToLower(err.Error()), "max ack pending")
}

// pollDepths sets tock_queue_depth for each queue and priority every
// depthEvery until ctx ends.
func (w *Worker) pollDepths(ctx context.Context, queues []*queue) {
	t := time.NewTicker(w.depthEvery)
	defer t.Stop()
	for {
		for _, q := range queues {
			for _, p := range domain.Priorities {
				ictx, cancel := context.WithTimeout(ctx, publishTimeout)
				c, err := w.js.Consumer(ictx, wire.ExecStream, wire.ConsumerName(q.name, p))
				cancel()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
						w.log.Debug("read queue depth", "queue", q.name, "priority", p, "err", err)
					}
					continue
				}
				if info := c.CachedInfo(); info != nil {
					w.m.queueDepth.WithLabelValues(q.name, string(p)).Set(float64(info.NumPending))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
