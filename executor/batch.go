package executor

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/wire"
)

// Batch messages (wire.HeaderBatch): several executions in one JetStream
// message. A Worker says in its queues' consumer metadata that it takes
// them (Config.OneExecutionPerMessage turns that off), and runs each
// member as if it had come alone: its own attempt, start report,
// heartbeats, cancellation, timeout, retry and events. Each member is
// handed to the attempt pool as a memberMsg, a jetstream.Msg whose
// settlement is the member's share of the message's: the message itself
// is acked once every member is settled (nakked, if any member asked for
// that: its event could not be published), and kept from redelivery
// meanwhile by in-progress acks of its own (its members may wait here
// for a free slot, see puller.held).
//
// A batch message delivered again (its executor died, or the ack of it
// was lost) is not run again: every member is handed back to tock with a
// deferred event, which tock ignores for the members an executor has
// finished and turns into a new dispatch, one execution per message, for
// the rest. A member cannot be settled on its own in JetStream, so this
// is how an executor killed halfway through a message's members costs no
// member a second first attempt, and a finished one no second run.

// batchMsg is one batch message being handled: its members settle it.
type batchMsg struct {
	w    *Worker
	msg  jetstream.Msg
	md   *jetstream.MsgMetadata
	beat *beat // the message's in-progress acks

	mu       sync.Mutex
	left     int           // members not settled yet
	nak      bool          // a member asked for the message back
	nakDelay time.Duration // the longest delay asked
}

// memberMsg is one member of a batch message, as a delivery sees it.
type memberMsg struct {
	b    *batchMsg
	data []byte

	mu      sync.Mutex
	settled bool
}

var _ jetstream.Msg = (*memberMsg)(nil)

// expand splits a batch message of q into its members' messages, to be
// run one by one. A message that is no batch of executions is
// terminated, and a redelivered one handed back (see above): expand then
// returns none.
func (w *Worker) expand(q *queue, msg jetstream.Msg, ackWait time.Duration, attempts *sync.WaitGroup) []jetstream.Msg {
	md, err := msg.Metadata()
	if err != nil {
		w.log.Error("execution message without JetStream metadata; terminating it", "queue", q.name, "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return nil
	}
	bodies, err := wire.DecodeBatch(msg.Data())
	if err != nil {
		w.log.Error("undecodable batch of executions; terminating it", "queue", q.name, "subject", msg.Subject(),
			"stream_seq", md.Sequence.Stream, "err", err)
		_ = msg.TermWithReason("tock: undecodable batch of executions")
		return nil
	}
	b := &batchMsg{w: w, msg: msg, md: md, left: len(bodies)}
	members := make([]jetstream.Msg, len(bodies))
	for i, body := range bodies {
		members[i] = &memberMsg{b: b, data: body}
	}
	// The message's own in-progress acks, from the watcher, for as long
	// as any member is not settled. Its delivery serves the watcher's
	// logs only.
	whole := &delivery{q: q, msg: msg, ackWait: ackWait, base: w.log,
		e: &Execution{Execution: wire.Execution{ExecutionID: msg.Headers().Get(jetstream.MsgIDHeader)}}}
	b.beat = w.heartbeat(whole, nil)
	b.beat.whole = true
	if md.NumDelivered > 1 {
		attempts.Add(len(members))
		go w.handBackAll(q, members, ackWait, "redelivered", attempts)
		return nil
	}
	w.m.batchMembers.WithLabelValues(q.name).Observe(float64(len(members)))
	return members
}

// handBackAll hands members back to tock unrun, all at once: a deferred
// event each (retry at once), then each settles its share of the
// message. reason labels tock_executor_deferred_total.
func (w *Worker) handBackAll(q *queue, members []jetstream.Msg, ackWait time.Duration, reason string, attempts *sync.WaitGroup) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			defer attempts.Done()
			d, ok := w.decode(q, m, ackWait)
			if !ok {
				return
			}
			w.deferDelivery(d, d.e.Handler.Key(), 0, reason)
		})
	}
	wg.Wait()
}

// settle settles one member's share; the last one settles the message.
func (b *batchMsg) settle(nak bool, delay time.Duration) {
	b.mu.Lock()
	if nak {
		b.nak = true
		b.nakDelay = max(b.nakDelay, delay)
	}
	b.left--
	last := b.left == 0
	nakIt, wait := b.nak, b.nakDelay
	b.mu.Unlock()
	if !last {
		return
	}
	b.beat.stop()
	var err error
	switch {
	case !nakIt:
		err = b.msg.Ack()
	case wait > 0 && !b.w.stopping.Load():
		err = b.msg.NakWithDelay(wait)
	default:
		err = b.msg.Nak()
	}
	if err != nil {
		b.w.log.Warn("settle batch of executions", "stream_seq", b.md.Sequence.Stream, "err", err)
	}
}

// settleOnce settles m's share, once.
func (m *memberMsg) settleOnce(nak bool, delay time.Duration) error {
	m.mu.Lock()
	done := m.settled
	m.settled = true
	m.mu.Unlock()
	if !done {
		m.b.settle(nak, delay)
	}
	return nil
}

// Metadata is the batch message's: a member's attempt counts its
// deliveries.
func (m *memberMsg) Metadata() (*jetstream.MsgMetadata, error) { return m.b.md, nil }

// Data is the member's JSON.
func (m *memberMsg) Data() []byte { return m.data }

// Headers are none: a member's trace context is in its body
// (wire.Execution.Traceparent).
func (m *memberMsg) Headers() nats.Header { return nil }

func (m *memberMsg) Subject() string { return m.b.msg.Subject() }
func (m *memberMsg) Reply() string   { return m.b.msg.Reply() }
func (m *memberMsg) Ack() error      { return m.settleOnce(false, 0) }
func (m *memberMsg) DoubleAck(context.Context) error {
	return m.settleOnce(false, 0)
}
func (m *memberMsg) Nak() error                             { return m.settleOnce(true, 0) }
func (m *memberMsg) NakWithDelay(delay time.Duration) error { return m.settleOnce(true, delay) }
func (m *memberMsg) Term() error                            { return m.settleOnce(false, 0) }
func (m *memberMsg) TermWithReason(string) error            { return m.settleOnce(false, 0) }

// InProgress does nothing: the message's own beat sends its in-progress
// acks, whichever members are running.
func (m *memberMsg) InProgress() error { return nil }

// deferReasonShutdown labels members handed back unstarted at shutdown.
const deferReasonShutdown = "shutdown"
