package executor

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	json "github.com/segmentio/encoding/json"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// delivery is one execution message pulled from a queue, from its
// decoding to its settlement: what each step of handling it needs.
type delivery struct {
	q       *queue
	msg     jetstream.Msg
	ackWait time.Duration // of the consumer it came from
	e       *Execution
	base    *slog.Logger // the Worker's
	logger  atomic.Pointer[slog.Logger]
	// span is the attempt's (telemetry.SpanAttempt), set before the
	// delivery is handled; traceparent its context for the events, if
	// it is sampled.
	span        trace.Span
	traceparent string
	// logs is the attempt's log (logs.go).
	logs attemptLog
}

// log returns the delivery's logger: with the queue, execution, job,
// attempt and dispatch. It is made on first use, since almost no
// delivery logs, and slog.With costs allocations even over lazyAttrs.
// The attempt, the watcher and a start report may call it at once.
func (d *delivery) log() *slog.Logger {
	if l := d.logger.Load(); l != nil {
		return l
	}
	l := d.base.With("queue", d.q.name, "execution_id", d.e.ExecutionID, "job_id", d.e.JobID,
		"attempt", d.e.Attempt, "dispatch", d.e.Dispatch)
	if d.span != nil {
		if attrs := telemetry.LogAttrs(d.span.SpanContext()); attrs != nil {
			l = l.With(attrs...)
		}
	}
	if d.logger.CompareAndSwap(nil, l) {
		return l
	}
	return d.logger.Load()
}

// attempt names the attempt this delivery is.
func (d *delivery) attempt() attemptKey {
	return attemptKey{d.e.ExecutionID, d.e.Dispatch, d.e.Attempt}
}

// deliver handles one message of q to its end.
func (w *Worker) deliver(q *queue, msg jetstream.Msg, ackWait time.Duration) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	if d, ok := w.decode(q, msg, ackWait); ok {
		w.process(d)
	}
}

// decode reads msg into a delivery. A message that is no execution is
// terminated, and decode reports false.
func (w *Worker) decode(q *queue, msg jetstream.Msg, ackWait time.Duration) (*delivery, bool) {
	md, err := msg.Metadata()
	if err != nil {
		w.log.Error("execution message without JetStream metadata; terminating it", "queue", q.name, "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return nil, false
	}
	// One allocation for the delivery and its execution, decoded in place.
	both := &struct {
		d delivery
		e Execution
	}{}
	e := &both.e
	if err := json.Unmarshal(msg.Data(), &e.Execution); err != nil || e.ExecutionID == "" {
		if err == nil {
			err = errors.New("no execution_id")
		}
		w.log.Error("undecodable execution; terminating it", "queue", q.name, "subject", msg.Subject(), "stream_seq", md.Sequence.Stream, "err", err)
		_ = msg.TermWithReason("tock: undecodable execution")
		return nil, false
	}
	e.Attempt, e.PublishedAt = e.Execution.Attempt(int(md.NumDelivered)), md.Timestamp.UTC()
	d := &both.d
	d.q, d.msg, d.ackWait, d.e, d.base = q, msg, ackWait, e, w.log
	return d, true
}

// process handles one delivery of an execution: it is answered from the
// journal, cancelled, deferred (the handler key's concurrency limit or
// circuit breaker refuses it) or run as an attempt.
func (w *Worker) process(d *delivery) {
	// An attempt run here before, published again after JetStream lost
	// its stream, is answered, not run twice (see journal.go).
	if w.answerFromJournal(d) {
		return
	}
	defer w.journal.finish(d.attempt())

	// The attempt's context, registered first, so that a cancellation
	// arriving from now on reaches it.
	ctx, cancel := context.WithCancelCause(w.attemptCtx)
	defer cancel(nil)
	if w.tracer != nil {
		ctx = w.startSpan(ctx, d)
		defer d.span.End()
	}
	unregister, cancelled := w.cancels.register(d.e.ExecutionID, cancel)
	defer unregister()
	if cancelled {
		w.finish(d, w.event(d, domain.EventCancelled), false)
		return
	}

	key := d.e.Handler.Key()
	hk := w.breakers.get(key, d.q)
	if !hk.acquire(w.now()) {
		w.deferDelivery(d, key, deferMin, "limit")
		return
	}
	defer func() { hk.release(w.now()) }()
	done, retryIn, ok := hk.allow(w.now())
	if !ok {
		w.deferDelivery(d, key, retryIn, "breaker")
		return
	}
	w.attempt(ctx, d, done)
}

// startSpan starts d's attempt span: a child of the span in its
// message's traceparent header, else (with tock's tracer provider) a root
// in the execution's trace.
func (w *Worker) startSpan(ctx context.Context, d *delivery) context.Context {
	h := d.msg.Headers()
	if d.e.Traceparent != "" { // a batch member's
		h = nats.Header{"traceparent": {d.e.Traceparent}}
	}
	ctx = telemetry.Extract(ctx, h)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		if id, err := uuid.Parse(d.e.ExecutionID); err == nil {
			ctx = telemetry.ForExecution(ctx, id)
		}
	}
	ctx, d.span = w.tracer.Start(ctx, telemetry.SpanAttempt, trace.WithSpanKind(trace.SpanKindConsumer))
	if d.span.IsRecording() {
		e := d.e
		d.span.SetAttributes(attribute.String(telemetry.AttrExecutionID, e.ExecutionID),
			attribute.String(telemetry.AttrJobID, e.JobID),
			attribute.String(telemetry.AttrNamespace, e.Namespace),
			attribute.Int(telemetry.AttrAttempt, e.Attempt),
			attribute.Int(telemetry.AttrDispatch, e.Dispatch),
			attribute.String(telemetry.AttrQueue, d.q.name),
			attribute.String("tock.executor", w.cfg.ExecutorID),
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"))
		d.traceparent = telemetry.Traceparent(d.span.SpanContext())
	}
	return ctx
}

// endSpan notes how d's attempt ended on its span.
func (d *delivery) endSpan(outcome string, ev wire.Event) {
	if d.span == nil || !d.span.IsRecording() {
		return
	}
	d.span.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome))
	if ev.Type == domain.EventFailed {
		d.span.SetStatus(codes.Error, ev.Error)
	}
}

// deferDelivery hands a delivery back to tock unrun: a deferred event
// saying when to publish it again, then an ack.
func (w *Worker) deferDelivery(d *delivery, key string, retryIn time.Duration, reason string) {
	ev := w.event(d, domain.EventDeferred)
	ev.Handler = key
	ev.RetryInMS = retryIn.Milliseconds()
	if err := w.publish(ev); err != nil {
		d.log().Error("cannot defer execution; giving it back to JetStream", "reason", reason, "err", err)
		_ = d.msg.NakWithDelay(unreportedRetryDelay)
		return
	}
	d.log().Debug("execution deferred", "handler", key, "reason", reason, "retry_in", retryIn)
	d.endSpan("deferred", ev)
	if err := d.msg.Ack(); err != nil {
		d.log().Warn("ack deferred execution", "err", err)
	}
	w.m.deferredTotal.WithLabelValues(d.q.name, reason).Inc()
}

// finish publishes ev, the delivery's last event, then settles the
// message (see settle) and counts the delivery in
// tock_executor_attempts_total. interrupted says that ev is a failure by
// the Worker's shutdown. If ev cannot be published, the message goes back
// to JetStream, to run again, and finish returns false.
func (w *Worker) finish(d *delivery, ev wire.Event, interrupted bool) bool {
	outcome := outcomeLabel(ev, interrupted)
	if err := w.publish(ev); err != nil {
		d.log().Error("cannot report attempt result; giving the execution back", "outcome", outcome, "err", err)
		w.unreported(d)
		return false
	}
	if err := settle(d.msg, ev); err != nil {
		// The message will be redelivered after AckWait; tock already has
		// this attempt's result.
		d.log().Warn("settle execution message", "outcome", outcome, "err", err)
	}
	w.m.attemptsTotal.WithLabelValues(d.q.name, outcome).Inc()
	d.endSpan(outcome, ev)
	return true
}

// unreported gives a delivery whose event could not be published back to
// JetStream, to be delivered again (as the next attempt): after
// unreportedRetryDelay, or at once when the Worker is stopping, since
// the next delivery goes to another executor then.
func (w *Worker) unreported(d *delivery) {
	w.m.attemptsTotal.WithLabelValues(d.q.name, outcomeUnreported).Inc()
	if w.stopping.Load() {
		_ = d.msg.Nak()
		return
	}
	_ = d.msg.NakWithDelay(unreportedRetryDelay)
}

// settle settles a delivery whose last event, ev, is published: a
// cancellation or a final failure terminates its message, anything else
// (success, a retry or interruption that tock publishes again) acks it.
func settle(msg jetstream.Msg, ev wire.Event) error {
	switch {
	case ev.Type == domain.EventCancelled:
		return msg.TermWithReason("tock: execution cancelled")
	case ev.Final:
		return msg.TermWithReason("tock: final attempt failed")
	default:
		return msg.Ack()
	}
}
