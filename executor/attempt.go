package executor

import (
	"github.com/tock-sched/tock/domain"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/wire"
)

// How hard an attempt tries to publish one event before it gives its
// message back to JetStream unacknowledged.
const (
	publishTimeout  = 5 * time.Second
	publishRetryFor = 30 * time.Second
)

// unreportedRetryDelay is how long a delivery whose event could not be
// published waits before JetStream delivers it again (as the next
// attempt). It is the only delay an executor asks of JetStream: retries
// and deferrals go back through tock.
const unreportedRetryDelay = 5 * time.Second

// errTimedOut is the cause of an attempt context that reached the job's
// timeout.
var errTimedOut = errors.New("attempt timed out")

// process handles one delivery of an execution: it is cancelled, deferred
// (the handler's concurrency limit or circuit breaker refuses it) or run
// as an attempt.
func (w *Worker) process(q *queue, msg jetstream.Msg, ackWait time.Duration) {
	log := w.log.With("queue", q.name)
	md, err := msg.Metadata()
	if err != nil {
		log.Error("execution message without JetStream metadata; terminating it", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	var ex wire.Execution
	if err := json.Unmarshal(msg.Data(), &ex); err != nil || ex.ExecutionID == "" {
		if err == nil {
			err = errors.New("no execution_id")
		}
		log.Error("undecodable execution; terminating it", "subject", msg.Subject(), "stream_seq", md.Sequence.Stream, "err", err)
		_ = msg.TermWithReason("tock: undecodable execution")
		return
	}
	e := &Execution{Execution: ex, Attempt: ex.Attempt(int(md.NumDelivered)), PublishedAt: md.Timestamp.UTC()}
	log = log.With("execution_id", ex.ExecutionID, "job_id", ex.JobID, "attempt", e.Attempt, "dispatch", ex.Dispatch)
	// An attempt run here before, published again after JetStream lost
	// its stream, is answered, not run twice (see journal.go).
	if w.answerFromJournal(q, msg, e, log) {
		return
	}
	defer w.journal.finish(attemptKey{ex.ExecutionID, ex.Dispatch, e.Attempt})

	// The attempt's context, registered first, so that a cancellation
	// arriving from now on reaches it.
	ctx, cancel := context.WithCancelCause(w.attemptCtx)
	defer cancel(nil)
	unregister, cancelled := w.cancels.register(ex.ExecutionID, cancel)
	defer unregister()
	if cancelled {
		ev := w.event(e, domain.EventCancelled)
		w.finish(q, msg, ev, "cancelled", log)
		return
	}

	key := ex.Handler.Key()
	hk := w.handlerKey(key, q)
	if !hk.acquire(w.now()) {
		w.deferDelivery(q, e, msg, key, deferMin, "limit", log)
		return
	}
	defer func() { hk.release(w.now()) }()
	done, retryIn, ok := hk.allow(w.now())
	if !ok {
		w.deferDelivery(q, e, msg, key, retryIn, "breaker", log)
		return
	}
	w.attempt(ctx, q, e, msg, ackWait, done, log)
}

// deferDelivery hands a delivery back to tock unrun: a deferred event
// saying when to publish it again, then an ack.
func (w *Worker) deferDelivery(q *queue, e *Execution, msg jetstream.Msg, key string, retryIn time.Duration, reason string, log *slog.Logger) {
	ev := w.event(e, domain.EventDeferred)
	ev.Handler = key
	ev.RetryInMS = retryIn.Milliseconds()
	if err := w.publish(ev); err != nil {
		log.Error("cannot defer execution; giving it back to JetStream", "reason", reason, "err", err)
		_ = msg.NakWithDelay(unreportedRetryDelay)
		return
	}
	log.Debug("execution deferred", "handler", key, "reason", reason, "retry_in", retryIn)
	if err := msg.Ack(); err != nil {
		log.Warn("ack deferred execution", "err", err)
	}
	w.m.deferredTotal.WithLabelValues(q.name, reason).Inc()
}

// attempt runs the handler: started event (maybe), heartbeats, handler,
// finished event, then ack or term. Events go out before the message is
// settled, so a crash in between means a redelivery, never a lost result.
// done gets the attempt's breaker verdict as soon as the handler returns.
func (w *Worker) attempt(ctx context.Context, q *queue, e *Execution, msg jetstream.Msg, ackWait time.Duration, done func(verdict), log *slog.Logger) {
	beat := w.heartbeat(msg, ackWait, e, log)
	defer beat.stop()

	// The start is reported at once, or only if the attempt is still
	// running after StartReportDelay (see Config).
	startedAt := w.now().UTC()
	var (
		startOnce sync.Once
		startErr  error
		reported  bool
	)
	reportStart := func() {
		startOnce.Do(func() {
			// A delayed report still says when the attempt began.
			ev := w.event(e, domain.EventStarted)
			ev.At = startedAt
			startErr = w.publish(ev)
			reported = startErr == nil
			if reported {
				beat.started()
			}
		})
	}
	var startTimer *time.Timer
	if w.cfg.StartReportDelay < 0 {
		reportStart()
		if startErr != nil {
			log.Error("cannot report attempt start; giving the execution back", "err", startErr)
			done(verdictIgnore)
			w.m.attemptsTotal.WithLabelValues(q.name, "unreported").Inc()
			_ = msg.NakWithDelay(unreportedRetryDelay)
			return
		}
	} else {
		startTimer = time.AfterFunc(w.cfg.StartReportDelay, reportStart)
	}

	running := w.m.attemptsRunning.WithLabelValues(q.name)
	running.Inc()
	began := time.Now()
	output, runErr, timedOut := w.run(ctx, q.fn, e, log)
	cancelled := errors.Is(context.Cause(ctx), ErrCancelled)
	w.m.attemptSeconds.WithLabelValues(q.name).Observe(time.Since(began).Seconds())
	running.Dec()
	if startTimer != nil && !startTimer.Stop() {
		startOnce.Do(func() {}) // the report is under way: wait for it
	}
	beat.stopEvents() // no heartbeat event after the finished one
	if startErr != nil {
		log.Warn("could not report attempt start; its end carries it", "err", startErr)
	}

	ev := w.event(e, domain.EventSucceeded)
	ev.Output = domain.Truncate(output)
	if !reported {
		ev.StartedAt = &startedAt
	}
	if runErr != nil {
		ev.Type = domain.EventFailed
		ev.Error = domain.Truncate(runErr.Error())
	}
	var (
		outcome string
		v       verdict
		delay   time.Duration
	)
	switch {
	case cancelled:
		// Whatever the handler returned: the execution is cancelled.
		ev.Type, outcome, v = domain.EventCancelled, "cancelled", verdictIgnore
	case runErr == nil:
		outcome, v = "succeeded", verdictSuccess
	case timedOut:
		ev.TimedOut = true
		ev.Final = IsPermanent(runErr) || e.LastAttempt(e.Attempt)
		if !ev.Final {
			delay = e.Retry.Delay(e.Attempt-e.SeriesBase, w.rand())
		}
		outcome, v = "timed_out", verdictFailure
	case w.attemptCtx.Err() != nil:
		// Not the job's fault: tock publishes it again at once, whatever
		// the attempt count (the next attempt runs even past MaxAttempts).
		ev.Error = domain.Truncate("interrupted by executor shutdown: " + runErr.Error())
		outcome, v = "interrupted", verdictIgnore
	case IsPermanent(runErr):
		ev.Final = true
		outcome, v = "dead", verdictSuccess // the handler answered
	default:
		ev.Final = e.LastAttempt(e.Attempt)
		if !ev.Final {
			var asked bool
			if delay, asked = retryAfter(runErr); !asked {
				delay = e.Retry.Delay(e.Attempt-e.SeriesBase, w.rand())
			}
		}
		outcome, v = "retry", verdictFailure
		if ev.Final {
			outcome = "dead"
		}
	}
	ev.RetryInMS = delay.Milliseconds()
	done(v)

	if !w.finish(q, msg, ev, outcome, log) {
		return
	}
	switch {
	case ev.Type == domain.EventFailed && ev.Final:
		w.m.deadLettersTotal.WithLabelValues(q.name).Inc()
		log.Warn("attempt failed; execution is dead", "err", runErr, "permanent", IsPermanent(runErr), "timed_out", timedOut)
	case ev.Type == domain.EventFailed && outcome != "interrupted":
		w.m.retriesTotal.WithLabelValues(q.name).Inc()
		log.Info("attempt failed; tock retries it", "err", runErr, "timed_out", timedOut, "retry_in", delay)
	case outcome == "interrupted":
		log.Info("attempt interrupted by shutdown; handed back", "err", runErr)
	case ev.Type == domain.EventCancelled:
		log.Info("attempt cancelled", "err", runErr)
	default:
		log.Debug("attempt succeeded")
	}
}

// finish publishes ev, the delivery's last event, then settles the
// message: a final failure or a cancellation terminates it, anything else
// (success, a retry or interruption that tock publishes again) acks it.
// If ev cannot be published, the message goes back to JetStream, to run
// again, and finish returns false.
func (w *Worker) finish(q *queue, msg jetstream.Msg, ev wire.Event, outcome string, log *slog.Logger) bool {
	if err := w.publish(ev); err != nil {
		log.Error("cannot report attempt result; giving the execution back", "outcome", outcome, "err", err)
		w.m.attemptsTotal.WithLabelValues(q.name, "unreported").Inc()
		_ = msg.NakWithDelay(unreportedRetryDelay)
		return false
	}
	if err := settle(msg, ev); err != nil {
		// The message will be redelivered after AckWait; tock already has
		// this attempt's result.
		log.Warn("settle execution message", "outcome", outcome, "err", err)
	}
	w.m.attemptsTotal.WithLabelValues(q.name, outcome).Inc()
	return true
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

// run calls fn with ctx bounded by the job's timeout, and turns a panic
// into an error. timedOut reports a failure at the timeout.
func (w *Worker) run(ctx context.Context, fn Func, e *Execution, log *slog.Logger) (output string, err error, timedOut bool) {
	timeout := time.Duration(e.TimeoutMS) * time.Millisecond
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
			output, err, timedOut = "", fmt.Errorf("handler panicked: %v", r), false
		}
	}()
	output, err = fn(ctx, e)
	if err != nil && errors.Is(context.Cause(ctx), errTimedOut) {
		err, timedOut = fmt.Errorf("timed out after %s: %w", timeout, err), true
	}
	return output, err, timedOut
}

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

func (w *Worker) heartbeat(msg jetstream.Msg, ackWait time.Duration, e *Execution, log *slog.Logger) *beat {
	ctx, cancel := context.WithCancel(w.abandonCtx)
	b := &beat{startedc: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		acks := time.NewTicker(max(ackWait/3, 10*time.Millisecond))
		defer acks.Stop()
		var (
			events  <-chan time.Time
			started = b.startedc
			seq     int
		)
		for {
			select {
			case <-acks.C:
				if err := msg.InProgress(); err != nil {
					log.Warn("heartbeat (in-progress ack)", "err", err)
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
				b.publish(ctx, w, e, seq, log)
			case <-ctx.Done():
				return
			}
		}
	}()
	return b
}

func (b *beat) publish(ctx context.Context, w *Worker, e *Execution, seq int, log *slog.Logger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eventsOff {
		return
	}
	ev := w.event(e, domain.EventHeartbeat)
	ev.Seq = seq
	// One try: the next heartbeat is as good as a retried one.
	pctx, cancel := context.WithTimeout(ctx, min(publishTimeout, max(w.cfg.HeartbeatInterval, 100*time.Millisecond)))
	defer cancel()
	if err := w.publishOnce(pctx, ev); err != nil {
		log.Warn("heartbeat event", "seq", seq, "err", err)
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

func (w *Worker) event(e *Execution, typ domain.EventType) wire.Event {
	ev := wire.Event{
		Type:         typ,
		ExecutionID:  e.ExecutionID,
		ScheduledFor: e.ScheduledFor,
		Attempt:      e.Attempt,
		Dispatch:     e.Dispatch,
		ExecutorID:   w.cfg.ExecutorID,
		At:           w.now().UTC(),
	}
	if !e.PublishedAt.IsZero() {
		ev.PublishedAt = &e.PublishedAt
	}
	return ev
}

// publish sends ev to the event stream, in a batch with other attempts'
// events, and waits for JetStream's ack (retrying for a while). The
// batch's Nats-Msg-Id makes its retries harmless; a redelivered attempt's
// events are recorded idempotently.
func (w *Worker) publish(ev wire.Event) error {
	if err := w.events.send(w.abandonCtx, ev); err != nil {
		return err
	}
	w.journal.record(ev)
	return nil
}

// publishOnce is publish bounded by ctx.
func (w *Worker) publishOnce(ctx context.Context, ev wire.Event) error {
	if err := w.events.send(ctx, ev); err != nil {
		return err
	}
	w.journal.record(ev)
	return nil
}
