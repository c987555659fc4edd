package executor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/wire"
)

// puller feeds one queue's executions to its attempts. Whenever the queue
// has free slots it pulls, without waiting, from the high, then normal,
// then low consumer, as many messages as there are free slots, so that a
// saturated queue starts its high executions first, and a message never
// waits in a local buffer with its ack timer running. When all three are
// empty it waits for its doorbell (a core subscription to the queue's
// subjects, which rings on every publish), a freed slot, or a fallback
// poll for redeliveries. It also reads the consumers' depths for
// tock_queue_depth (see pollDepths).
type puller struct {
	q         *queue
	js        jetstream.JetStream
	nc        *nats.Conn
	opts      wire.ConsumerOptions
	pollEvery time.Duration // an idle queue's pull without a doorbell
	log       *slog.Logger
	depth     *prometheus.GaugeVec
	// attempts counts the messages handed to the queue's pool and not
	// handled to their end yet.
	attempts *sync.WaitGroup

	// Set by ensureConsumers; only the pull loop changes them after Run's
	// set-up.
	consumers []jetstream.Consumer // in domain.Priorities order
	ackWait   time.Duration        // the shortest of the consumers'
	// ackPendingFull says that the last pull met a consumer that holds
	// back messages until some of those out with executors are acked.
	ackPendingFull bool

	w *Worker
	// held are members of batch messages pulled beyond the free slots:
	// they start, in order, as slots free, before anything new is pulled.
	// Their messages' own in-progress acks keep them (see batch.go).
	held []work
	// perMsg is a moving average of the executions per message pulled,
	// so that a pull asks for about as many messages as fill the free
	// slots.
	perMsg float64
}

func (w *Worker) newPuller(q *queue, attempts *sync.WaitGroup) *puller {
	return &puller{
		q: q, js: w.js, nc: w.cfg.NATS, opts: w.consumerOpts, pollEvery: w.pollEvery,
		log: w.log.With("queue", q.name), depth: w.m.queueDepth,
		attempts: attempts, w: w, perMsg: 1,
	}
}

// ensureConsumers creates the queue's consumers if needed.
func (p *puller) ensureConsumers(ctx context.Context) error {
	consumers := make([]jetstream.Consumer, 0, len(domain.Priorities))
	ackWait := wire.DefaultAckWait
	for _, prio := range domain.Priorities {
		c, err := wire.EnsureConsumer(ctx, p.js, p.q.name, prio, p.opts)
		if err != nil {
			return err
		}
		if info := c.CachedInfo(); info != nil && info.Config.AckWait > 0 {
			ackWait = min(ackWait, info.Config.AckWait)
		}
		consumers = append(consumers, c)
	}
	p.consumers, p.ackWait = consumers, ackWait
	return nil
}

// run pulls the queue's executions until ctx ends.
func (p *puller) run(ctx context.Context) {
	bell := &doorbell{nc: p.nc, subject: wire.ExecSubjectPrefix + p.q.name + ".*", log: p.log, poll: p.pollEvery,
		rings: make(chan struct{}, 1)}
	defer bell.unsubscribe()
	bell.subscribe()
	defer p.handBackHeld()
	var pace pacer
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		p.startHeld()
		free := p.q.slots.free() - len(p.held)
		got := 0
		if free > 0 {
			// A ring from now on is for a message this pull may miss.
			if bell.take() {
				pace.rang = true
			}
			var ok bool
			if got, ok = p.pullOrRecover(ctx, free, &backoff); !ok {
				continue
			}
		}
		var fallback <-chan time.Time
		if wake := pace.next(min(got, max(free, 0)), max(free, 0), bell, p.pollEvery); wake >= 0 {
			timer.Reset(wake)
			fallback = timer.C
		}
		// A freed slot is worth a pull only if the last one left messages
		// behind: it filled every free slot, or a consumer refused to hand
		// out more until some are acked. Otherwise the consumers were
		// empty, and what arrives since rings the doorbell; waking for every
		// ended attempt cost three pulls per execution.
		var freed <-chan struct{}
		if pace.saturated || p.ackPendingFull {
			freed = p.q.slots.freed
		}
		select {
		case <-ctx.Done():
			return
		case <-freed:
			if pace.saturated {
				p.q.slots.gather(ctx)
			}
		case <-bell.rings:
			pace.rang, pace.repoll = true, 0
			// The ring comes before the stream has stored the message and
			// its consumer has seen it: a pull now would find nothing.
			// Waiting the first repoll pause also gathers the rings of the
			// messages published meanwhile into one pull.
			timer.Stop()
			timer.Reset(ringRepolls[0])
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			bell.take()
		case <-fallback:
		}
		timer.Stop()
	}
}

// pullOrRecover pulls up to free messages. After a failed pull it pauses
// (NATS may be down, or wiped) and makes sure the stream and consumers
// exist again, and reports false: the caller starts over.
func (p *puller) pullOrRecover(ctx context.Context, free int, backoff *retry.Backoff) (got int, ok bool) {
	got, err := p.pull(free)
	if err == nil {
		backoff.Reset()
		return got, true
	}
	if ctx.Err() != nil || !backoff.Wait(ctx, p.log, "pull executions", "err", err) {
		return got, false
	}
	if err := wire.EnsureStreams(ctx, p.js); err != nil {
		p.log.Warn("re-create streams", "err", err)
		return got, false
	}
	if err := p.ensureConsumers(ctx); err != nil {
		p.log.Warn("re-create consumers", "err", err)
	}
	return got, false
}

// pull fetches messages without waiting, from the consumers in priority
// order, until it has about free executions (a batch message brings
// several), and hands each execution to the queue's pool with a slot
// taken, or holds it until a slot frees (see held); the pool gives the
// slot back when the execution is handled. It returns how many
// executions it took.
func (p *puller) pull(free int) (int, error) {
	got, ackWait := 0, p.ackWait
	p.ackPendingFull = false
	for _, c := range p.consumers {
		// A consumer is pulled until it gives fewer messages than asked
		// (it is empty) or the free slots are filled: a batch message
		// brings several executions, so asking for one message per free
		// slot would leave many waiting here.
		for got < free {
			ask := max(1, int(float64(free-got)/p.perMsg))
			batch, err := c.FetchNoWait(ask)
			if err != nil {
				return got, err
			}
			// Messages that arrive as ctx ends are still run: they are ours
			// already, and handing them back would cost them an attempt.
			msgs := 0
			for msg := range batch.Messages() {
				msgs++
				n := 1
				if wire.IsBatch(msg.Headers()) {
					members := p.w.expand(p.q, msg, ackWait, p.attempts)
					for _, m := range members {
						p.hand(work{msg: m, ackWait: ackWait})
					}
					n = len(members)
				} else {
					p.hand(work{msg: msg, ackWait: ackWait})
				}
				got += n
				p.perMsg += (float64(max(n, 1)) - p.perMsg) / 8
			}
			if err := batch.Error(); err != nil {
				if !maxAckPending(err) {
					return got, err
				}
				p.ackPendingFull = true
				break
			}
			if msgs < ask {
				break
			}
		}
	}
	return got, nil
}

// hand gives one execution to the queue's pool, or holds it while no
// slot is free (or others are held before it).
func (p *puller) hand(wk work) {
	p.attempts.Add(1)
	if len(p.held) == 0 && p.q.slots.free() > 0 {
		p.q.slots.take()
		p.q.work <- wk
		return
	}
	p.held = append(p.held, wk)
}

// startHeld hands held executions to the pool as far as slots are free.
func (p *puller) startHeld() {
	for len(p.held) > 0 && p.q.slots.free() > 0 {
		p.q.slots.take()
		p.q.work <- p.held[0]
		p.held[0] = work{}
		p.held = p.held[1:]
	}
}

// handBackHeld hands the executions still held back to tock when the
// pull loop ends (the Worker stops): a deferred event each, to be
// published again at once for another executor.
func (p *puller) handBackHeld() {
	if len(p.held) == 0 {
		return
	}
	members := make([]jetstream.Msg, len(p.held))
	for i, wk := range p.held {
		members[i] = wk.msg
	}
	p.log.Info("handing back executions not started", "count", len(members))
	ackWait := p.held[0].ackWait
	p.held = nil
	// handBackAll counts each one done; hand counted them in.
	p.w.handBackAll(p.q, members, ackWait, deferReasonShutdown, p.attempts)
}

// maxAckPending reports whether err is JetStream's refusal to deliver
// more while the consumer's MaxAckPending messages are out with
// executors: the queue is busy elsewhere, which is no error here.
func maxAckPending(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "maxackpending") ||
		strings.Contains(strings.ToLower(err.Error()), "max ack pending")
}

// After a doorbell ring whose pull found nothing, the queue is pulled
// again after these pauses: core subscribers see a message before the
// stream has stored it, and its consumers learn of it a moment after that
// (the server signals them asynchronously); until then a no-wait pull
// finds them empty. The last pause is for a server under load.
var ringRepolls = []time.Duration{2 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

// pacer decides when a pull loop pulls next.
type pacer struct {
	saturated bool // the last pull filled every free slot; the doorbell is off
	rang      bool // the doorbell rang since the last pull that found the consumers empty
	repoll    int  // pulls made again after the ring, of ringRepolls
}

// next returns how long to wait before pulling again, if no ring or freed
// slot comes first (negative: wait for those alone), after a pull that got
// got of free messages. The doorbell copies every execution published on
// the queue to this process, so it is only subscribed while the queue has
// free slots: a saturated queue pulls again when a slot frees, and under a
// burst the executor is spared a copy of every message.
func (pc *pacer) next(got, free int, bell *doorbell, poll time.Duration) time.Duration {
	switch {
	case got == free:
		// Saturated (pulling again needs a free slot), and the consumers
		// may hold more.
		pc.rang, pc.repoll = false, 0
		if !pc.saturated {
			pc.saturated = true
			bell.unsubscribe()
		}
		return -1
	case pc.saturated:
		// Slots are free again: subscribe the doorbell, then pull at
		// once, since a publish before the subscription rang nothing.
		pc.saturated = false
		bell.subscribe()
		pc.rang, pc.repoll = true, 0
		return 0
	case got > 0:
		// Every consumer gave less than asked: they were empty.
		pc.rang, pc.repoll = false, 0
		return poll
	case pc.rang && pc.repoll < len(ringRepolls):
		pc.repoll++
		return ringRepolls[pc.repoll-1]
	default:
		pc.rang, pc.repoll = false, 0
		return poll
	}
}

// doorbell is a core subscription to a queue's subjects that rings on
// every publish. Only its pull loop uses it.
type doorbell struct {
	nc      *nats.Conn
	subject string
	log     *slog.Logger
	poll    time.Duration // for the log: what covers for a missing doorbell
	rings   chan struct{} // cap 1
	sub     *nats.Subscription
}

func (d *doorbell) subscribe() {
	sub, err := d.nc.Subscribe(d.subject, func(*nats.Msg) {
		select {
		case d.rings <- struct{}{}:
		default:
		}
	})
	if err != nil {
		d.log.Warn("no doorbell for the queue; polling only", "err", err, "poll", d.poll)
		return
	}
	// A slow doorbell only rings late: the poll covers for it.
	_ = sub.SetPendingLimits(-1, -1)
	d.sub = sub
}

func (d *doorbell) unsubscribe() {
	if d.sub != nil {
		_ = d.sub.Unsubscribe()
		d.sub = nil
	}
}

// take reports whether the doorbell rang, and forgets the ring.
func (d *doorbell) take() bool {
	select {
	case <-d.rings:
		return true
	default:
		return false
	}
}

// pollDepths sets tock_queue_depth for each puller's queue and priority
// every interval until ctx ends.
func pollDepths(ctx context.Context, pullers []*puller, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, p := range pullers {
			p.readDepths(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readDepths sets tock_queue_depth for the queue's consumers.
func (p *puller) readDepths(ctx context.Context) {
	for _, prio := range domain.Priorities {
		ictx, cancel := context.WithTimeout(ctx, publishTimeout)
		c, err := p.js.Consumer(ictx, wire.ExecStream, wire.ConsumerName(p.q.name, prio))
		cancel()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				p.log.Debug("read queue depth", "priority", prio, "err", err)
			}
			continue
		}
		if info := c.CachedInfo(); info != nil {
			p.depth.WithLabelValues(p.q.name, string(prio)).Set(float64(info.NumPending))
		}
	}
}
