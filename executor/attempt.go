package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor/wire"
)

// How hard an attempt tries to publish one event before it gives its
// message back to JetStream unacknowledged.
const (
	publishTimeout  = 5 * time.Second
	publishRetryFor = 30 * time.Second
)

// startedRetryDelay is how long an execution whose started event could not
// be published waits before it is delivered again.
const startedRetryDelay = 5 * time.Second

// process runs one delivery of an execution: started event, handler,
// finished event, then ack, term or nak. Events go out before the message
// is settled, so a crash in between means a redelivery, never a lost
// result.
func (w *Worker) process(queueName string, fn Func, msg jetstream.Msg, ackWait time.Duration) {
	log := w.log.With("queue", queueName)
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
	e := &Execution{Execution: ex, Attempt: int(md.NumDelivered)}
	log = log.With("execution_id", ex.ExecutionID, "job_id", ex.JobID, "attempt", e.Attempt)

	stopHeartbeat := w.heartbeat(msg, ackWait, log)
	defer stopHeartbeat()

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
			startErr = w.publish(w.event(e, wire.EventStarted))
			reported = startErr == nil
		})
	}
	var startTimer *time.Timer
	if w.cfg.StartReportDelay < 0 {
		reportStart()
		if startErr != nil {
			log.Error("cannot report attempt start; giving the execution back", "err", startErr)
			_ = msg.NakWithDelay(startedRetryDelay)
			return
		}
	} else {
		startTimer = time.AfterFunc(w.cfg.StartReportDelay, reportStart)
	}

	running := attemptsRunning.WithLabelValues(queueName)
	running.Inc()
	began := time.Now()
	output, runErr := w.run(fn, e, log)
	attemptSeconds.WithLabelValues(queueName).Observe(time.Since(began).Seconds())
	running.Dec()
	shutdown := runErr != nil && w.attemptCtx.Err() != nil
	if startTimer != nil && !startTimer.Stop() {
		startOnce.Do(func() {}) // the report is under way: wait for it
	}
	if startErr != nil {
		log.Warn("could not report attempt start; its end carries it", "err", startErr)
	}

	ev := w.event(e, wire.EventSucceeded)
	ev.Output = wire.Truncate(output)
	if !reported {
		ev.StartedAt = &startedAt
	}
	var delay time.Duration
	switch {
	case runErr == nil:
	case shutdown:
		// Not the job's fault: retry at once elsewhere, whatever the
		// attempt count (the next attempt runs even past MaxAttempts).
		ev.Type = wire.EventFailed
		ev.Error = wire.Truncate("interrupted by executor shutdown: " + runErr.Error())
	default:
		ev.Type = wire.EventFailed
		ev.Error = wire.Truncate(runErr.Error())
		ev.Final = IsPermanent(runErr) || e.Attempt >= maxAttempts(ex.Retry)
		if !ev.Final {
			delay = retryDelay(ex.Retry, e.Attempt, w.rand())
		}
	}

	if err := w.publish(ev); err != nil {
		// The result is lost: let the execution run again.
		log.Error("cannot report attempt result; giving the execution back", "outcome", ev.Type, "err", err)
		attemptsTotal.WithLabelValues(queueName, "unreported").Inc()
		_ = msg.NakWithDelay(max(delay, startedRetryDelay))
		return
	}
	stopHeartbeat() // an in-progress ack after the settle would be refused
	var outcome string
	switch {
	case runErr == nil:
		outcome = "succeeded"
		log.Debug("attempt succeeded")
		err = msg.Ack()
	case shutdown:
		outcome = "interrupted"
		log.Info("attempt interrupted by shutdown; handing it back", "err", runErr)
		err = msg.Nak()
	case ev.Final:
		outcome = "dead"
		log.Warn("attempt failed; execution is dead", "err", runErr, "permanent", IsPermanent(runErr))
		err = msg.TermWithReason("tock: final attempt failed")
	default:
		outcome = "retry"
		log.Info("attempt failed; will retry", "err", runErr, "retry_in", delay)
		err = msg.NakWithDelay(delay)
	}
	attemptsTotal.WithLabelValues(queueName, outcome).Inc()
	if err != nil {
		// The message will be redelivered after AckWait; the recorder
		// already has this attempt's result.
		log.Warn("settle execution message", "outcome", ev.Type, "err", err)
	}
}

// run calls fn with a context that carries the job's timeout and ends at
// shutdown, and turns a panic into an error.
func (w *Worker) run(fn Func, e *Execution, log *slog.Logger) (output string, err error) {
	var (
		ctx     context.Context
		cancel  context.CancelFunc
		timeout = time.Duration(e.TimeoutMS) * time.Millisecond
	)
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(w.attemptCtx, timeout)
	} else {
		ctx, cancel = context.WithCancel(w.attemptCtx)
	}
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
			output, err = "", fmt.Errorf("handler panicked: %v", r)
		}
	}()
	output, err = fn(ctx, e)
	if err != nil && timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
	}
	return output, err
}

// heartbeat tells JetStream the attempt is alive every third of ackWait,
// so a long attempt is not redelivered; it stops when the returned func is
// called (which waits for it; calling it again is harmless) or when Run
// abandons the attempt.
func (w *Worker) heartbeat(msg jetstream.Msg, ackWait time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(w.abandonCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(ackWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					log.Warn("heartbeat (in-progress ack)", "err", err)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (w *Worker) event(e *Execution, typ string) wire.Event {
	return wire.Event{
		Type:         typ,
		ExecutionID:  e.ExecutionID,
		ScheduledFor: e.ScheduledFor,
		Attempt:      e.Attempt,
		ExecutorID:   w.cfg.ExecutorID,
		At:           w.now().UTC(),
	}
}

// publish sends ev to the event stream and waits for JetStream's ack,
// retrying for a while. The Nats-Msg-Id makes retries (and a redelivered
// attempt's re-publish within the duplicate window) harmless.
func (w *Worker) publish(ev wire.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	m := &nats.Msg{
		Subject: wire.EventSubjectPrefix + ev.Type,
		Data:    data,
		Header:  nats.Header{wire.HeaderExecutionID: []string{ev.ExecutionID}},
	}
	deadline := time.Now().Add(publishRetryFor)
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(w.abandonCtx, publishTimeout)
		_, err = w.js.PublishMsg(ctx, m, jetstream.WithMsgID(ev.MsgID()), jetstream.WithExpectStream(wire.EventStream))
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, nats.ErrConnectionClosed) || time.Now().Add(pause).After(deadline) {
			break
		}
		select {
		case <-time.After(pause):
		case <-w.abandonCtx.Done():
			return fmt.Errorf("publish %s event %s: %w", ev.Type, ev.MsgID(), err)
		}
		pause = min(2*pause, 2*time.Second)
	}
	return fmt.Errorf("publish %s event %s: %w", ev.Type, ev.MsgID(), err)
}
