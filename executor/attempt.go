package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tock-sched/tock/domain"
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

// attempt runs the handler: started event (maybe), heartbeats, handler,
// finished event, then ack or term. Events go out before the message is
// settled, so a crash in between means a redelivery, never a lost result.
// done gets the attempt's breaker verdict as soon as the handler returns.
func (w *Worker) attempt(ctx context.Context, d *delivery, done func(verdict)) {
	start := &startReport{w: w, d: d, at: w.now().UTC()}
	var beat *beat
	if w.cfg.StartReportDelay < 0 {
		beat = w.heartbeat(d, nil)
		start.beat, start.atOnce = beat, true
		start.report()
	} else {
		beat = w.heartbeat(d, start) // sets start.beat
	}
	defer beat.stop()
	if start.failedAtOnce() {
		d.log().Error("cannot report attempt start; giving the execution back", "err", start.err)
		done(verdictIgnore)
		w.unreported(d)
		return
	}
	lg := w.newAttemptLog(d)
	r := w.runHandler(withLog(ctx, lg), d, lg)
	if lg.close() && r.err == nil {
		r.err = fmt.Errorf("%w of %d bytes (policy %s)", ErrLogCap, lg.policy.CapBytes, domain.LogFail)
	}
	start.settle()
	beat.stopEvents() // no heartbeat event after the finished one
	if start.err != nil {
		d.log().Warn("could not report attempt start; its end carries it", "err", start.err)
	}
	res := w.result(d, r, start)
	done(res.verdict)
	if w.finish(d, res.ev, res.interrupted) {
		w.logResult(d, r, res)
	}
}

// startReport reports an attempt's start: at once, or only if the attempt
// is still running after Config.StartReportDelay (see Config), when the
// Worker's watcher calls report.
type startReport struct {
	w      *Worker
	d      *delivery
	beat   *beat // set before report can be called
	at     time.Time
	atOnce bool
	once   sync.Once
	// Final once settle returned (or at once).
	err      error
	reported bool
}

// report publishes the started event, unless settle came first.
func (s *startReport) report() {
	s.once.Do(func() {
		// A delayed report still says when the attempt began.
		ev := s.w.event(s.d, domain.EventStarted)
		ev.At = s.at
		s.err = s.w.publish(ev)
		s.reported = s.err == nil
		if s.reported {
			s.beat.started()
		}
	})
}

// failedAtOnce reports whether the start, reported at once, could not be.
func (s *startReport) failedAtOnce() bool { return s.atOnce && s.err != nil }

// settle stops a delayed report not made yet, or waits for one under way.
func (s *startReport) settle() { s.once.Do(func() {}) }

// ran is what a handler did in one attempt.
type ran struct {
	output    string
	err       error
	timedOut  bool // it failed at the job's timeout
	cancelled bool // the execution was cancelled meanwhile
}

// runHandler runs the queue's handler for d, measured.
func (w *Worker) runHandler(ctx context.Context, d *delivery, lg *attemptLog) ran {
	running := w.m.attemptsRunning.WithLabelValues(d.q.name)
	running.Inc()
	began := time.Now()
	var r ran
	if lg.policy.Policy == domain.LogFail {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		lg.mu.Lock()
		lg.cancel = cancel
		lg.mu.Unlock()
	}
	r.output, r.err, r.timedOut = w.call(ctx, d)
	if r.err != nil && errors.Is(context.Cause(ctx), ErrLogCap) {
		r.err = fmt.Errorf("%w: %w", context.Cause(ctx), r.err)
	}
	r.cancelled = errors.Is(context.Cause(ctx), ErrCancelled)
	w.m.attemptSeconds.WithLabelValues(d.q.name).Observe(time.Since(began).Seconds())
	running.Dec()
	return r
}

// call calls the queue's handler with ctx bounded by the job's timeout,
// and turns a panic into an error. timedOut reports a failure at the
// timeout.
func (w *Worker) call(ctx context.Context, d *delivery) (output string, err error, timedOut bool) {
	// Without a timeout the attempt's own context serves: process
	// cancels it when the attempt ends.
	timeout := time.Duration(d.e.TimeoutMS) * time.Millisecond
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			d.log().Error("handler panicked", "panic", r, "stack", string(stack))
			// The error stays one line; the attempt's log has the stack.
			fmt.Fprintf(LogStream(ctx, wire.LogStderr), "handler panicked: %v\n%s", r, stack)
			output, err, timedOut = "", fmt.Errorf("handler panicked: %v", r), false
		}
	}()
	output, err = d.q.fn(ctx, d.e)
	if err != nil && errors.Is(context.Cause(ctx), errTimedOut) {
		err, timedOut = fmt.Errorf("timed out after %s: %w", timeout, err), true
	}
	return output, err, timedOut
}

// result is how an attempt ended: its last event, and how it counts.
type result struct {
	ev          wire.Event
	verdict     verdict
	interrupted bool          // by the Worker's shutdown: not the job's fault
	delay       time.Duration // before tock publishes a failure again
}

// result turns what the handler did into the attempt's last event.
func (w *Worker) result(d *delivery, r ran, start *startReport) result {
	ev := w.event(d, domain.EventSucceeded)
	ev.Output = domain.Truncate(r.output)
	if !start.reported {
		at := start.at
		ev.StartedAt = &at
	}
	if r.err != nil {
		ev.Type = domain.EventFailed
		ev.Error = domain.Truncate(r.err.Error())
	}
	res := result{verdict: verdictFailure}
	e := d.e
	switch {
	case r.cancelled:
		// Whatever the handler returned: the execution is cancelled. The
		// event carries the start even when a started event reported it:
		// the API has made the execution final already, and a started
		// event the recorder applies after this one (a retried publish)
		// could no longer tell that the attempt began, so the attempt
		// would stay without an outcome (seen once under load in CI).
		ev.Type, res.verdict = domain.EventCancelled, verdictIgnore
		at := start.at
		ev.StartedAt = &at
	case r.err == nil:
		res.verdict = verdictSuccess
	case r.timedOut:
		ev.TimedOut = true
		ev.Final = IsPermanent(r.err) || e.LastAttempt(e.Attempt)
		if !ev.Final {
			res.delay = e.Retry.Delay(e.Attempt-e.SeriesBase, w.rand())
		}
	case w.attemptCtx.Err() != nil:
		// Not the job's fault: tock publishes it again at once, whatever
		// the attempt count (the next attempt runs even past MaxAttempts).
		ev.Error = domain.Truncate("interrupted by executor shutdown: " + r.err.Error())
		res.verdict, res.interrupted = verdictIgnore, true
	case IsPermanent(r.err):
		ev.Final = true
		res.verdict = verdictSuccess // the handler answered
	default:
		ev.Final = e.LastAttempt(e.Attempt)
		if !ev.Final {
			var asked bool
			if res.delay, asked = retryAfter(r.err); !asked {
				res.delay = e.Retry.Delay(e.Attempt-e.SeriesBase, w.rand())
			}
		}
	}
	ev.RetryInMS = res.delay.Milliseconds()
	res.ev = ev
	return res
}

// logResult logs a reported attempt's end and counts its failure.
func (w *Worker) logResult(d *delivery, r ran, res result) {
	switch ev := res.ev; {
	case ev.Type == domain.EventFailed && ev.Final:
		w.m.deadLettersTotal.WithLabelValues(d.q.name).Inc()
		d.log().Warn("attempt failed; execution is dead", "err", r.err, "permanent", IsPermanent(r.err), "timed_out", r.timedOut)
	case res.interrupted:
		d.log().Info("attempt interrupted by shutdown; handed back", "err", r.err)
	case ev.Type == domain.EventFailed:
		w.m.retriesTotal.WithLabelValues(d.q.name).Inc()
		d.log().Info("attempt failed; tock retries it", "err", r.err, "timed_out", r.timedOut, "retry_in", res.delay)
	case ev.Type == domain.EventCancelled:
		d.log().Info("attempt cancelled", "err", r.err)
	default:
		// Made only to be dropped, the delivery's logger was a tenth of a
		// busy executor's work (tockbench's profile, issue 36).
		if d.base.Enabled(context.Background(), slog.LevelDebug) {
			d.log().Debug("attempt succeeded")
		}
	}
}
