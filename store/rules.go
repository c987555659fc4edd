package store

import (
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// The rules by which executor events change an execution and its
// attempts, written once, here, as pure functions over an execution read
// (and locked) by RecordAttemptEvents. RecordAttemptEvents reads a whole batch's
// executions in one statement, applies each event in order with apply,
// and writes back what changed in a few set-based statements; the rules
// themselves never touch the database, so they are tested without it.
//
// The rules, event by event (domain.EventType; the states are
// domain.ExecState's):
//
//   - started: the execution runs, unless the attempt is older than the
//     newest known or has finished already (events come out of order), or
//     the execution is in a final state (succeeded, dead, cancelled).
//   - heartbeat: records the attempt's last sign of life (HeartbeatAt) and
//     otherwise counts as its start.
//   - succeeded: the attempt succeeded; the execution succeeds, whichever
//     attempt it was, unless it is final already. Its end becomes its
//     job's last success, unless the job has a later one.
//   - failed (or timed out): a final failure of the newest attempt makes
//     the execution dead; another failure of the newest attempt, about its
//     current dispatch, leaves it failed and back in the outbox, published
//     again as its next dispatch RetryIn after now (the database's clock).
//     A failure of an older attempt or dispatch records only the attempt.
//   - cancelled: the attempt is recorded as cancelled if it began, and the
//     execution becomes cancelled unless it is final.
//   - deferred: no attempt; the execution, if it still waits to run and
//     the deferral is about its current dispatch, goes back in the outbox
//     RetryIn after now.
//   - The first report of an attempt's end wins; a repeat changes nothing.
//   - An event of an attempt newer than the known ones takes the execution
//     out of the outbox (sets dispatched_at): an executor has it, even if
//     the publish acknowledgement was lost. Events of older attempts leave
//     dispatched_at alone, since a retry may be waiting in the outbox.
//   - Lost attempts: an event of attempt a proves that the earlier
//     attempts are over (at most one attempt runs at a time): one still
//     unfinished was lost (domain.OutcomeLost), and so was each attempt
//     number between the newest known and a that left no row (a delivery
//     whose executor died before reporting anything). Only attempts from
//     the newest known one up are looked at: each event closes the ones
//     before it.

// recAttempt is one attempt as recording sees it.
type recAttempt struct {
	executor                           string
	startedAt, heartbeatAt, finishedAt *time.Time
	outcome                            domain.Outcome
	errText, output                    string
}

// recExec is an execution as recording sees it: the columns events
// change, and every attempt (att, by number; numbers are dense from 1).
type recExec struct {
	id           uuid.UUID
	jobID        uuid.UUID
	namespace    string
	sched        time.Time
	bucket       int
	state        domain.ExecState
	attempts     int
	dispatches   int
	dispatchedAt *time.Time
	nextAttempt  *time.Time
	startedAt    *time.Time
	finishedAt   *time.Time
	executorID   string
	errText      string
	output       string
	att          map[int]*recAttempt

	// inline: attempt 1 was read from the execution's row (attempt_*).
	inline bool
	// dirty: the execution's row must be written; dirtyAtt: these
	// attempts (when they live in the attempts table).
	dirty    bool
	dirtyAtt map[int]bool
	// requeued: an event put the execution back in the outbox.
	requeued bool
	// succeeded: an event made the execution succeed (finishedAt is
	// then its end), so its job's last success may move.
	succeeded bool
	// recorded: the fast path (executions_fast.go) wrote the row already,
	// as these rules would have; no event is applied to it here.
	recorded bool
	// was is the execution as read, before the batch's events: what
	// notifications compare it with (notify_record.go).
	was struct {
		state     domain.ExecState
		attempts  int
		startedAt *time.Time
	}
}

// maxAttempt is the highest attempt number with a row.
func (e *recExec) maxAttempt() int {
	n := 0
	for k := range e.att {
		n = max(n, k)
	}
	return n
}

func (e *recExec) touch(n int) {
	e.dirty = true
	if e.dirtyAtt == nil {
		e.dirtyAtt = map[int]bool{}
	}
	e.dirtyAtt[n] = true
}

// least and greatest are SQL's LEAST and GREATEST over nullable times:
// NULLs are ignored.
func least(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.Before(*a)) {
		return b
	}
	return a
}

func greatest(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.After(*a)) {
		return b
	}
	return a
}

func tp(t time.Time) *time.Time { return &t }

// loseBefore marks attempts from the newest known one up to a (excluded)
// lost at at: an unfinished one ends as lost, a missing one is created
// lost.
func (e *recExec) loseBefore(a int, at time.Time) {
	for n := max(min(e.attempts, a), 1); n < a; n++ {
		r := e.att[n]
		switch {
		case r == nil:
			e.att[n] = &recAttempt{finishedAt: tp(at), outcome: domain.OutcomeLost, errText: lostError}
		case r.outcome == "":
			r.finishedAt, r.outcome, r.errText, r.output = tp(at), domain.OutcomeLost, lostError, ""
		default:
			continue
		}
		e.touch(n)
	}
}

// apply applies one valid event to e; now is the database's clock (the
// recording transaction's start). It marks what it changed dirty.
func (e *recExec) apply(ev *model.AttemptEvent, now time.Time) {
	at := ms(ev.At)
	// A delivery's dispatch time is when JetStream stored its message,
	// if the executor said; else when its first event is recorded.
	disp := now
	if ev.PublishedAt != nil && !ev.PublishedAt.IsZero() && ev.PublishedAt.Before(now) {
		disp = ms(*ev.PublishedAt)
	}
	p := prior{state: e.state, attempts: e.attempts, started: msPtr(ev.StartedAt), at: at, disp: disp}
	switch ev.Type {
	case domain.EventStarted, domain.EventHeartbeat:
		e.start(ev, p)
	case domain.EventDeferred:
		e.deferred(ev, p, now)
	case domain.EventCancelled:
		e.cancelled(ev, p)
	default:
		e.end(ev, p, now)
	}
}

// prior is what apply knew before an event: the execution's state and
// attempts, and the event's times (start, at and dispatch time, to the
// millisecond).
type prior struct {
	state    domain.ExecState
	attempts int
	started  *time.Time
	at, disp time.Time
}

// start applies a start or a heartbeat: the execution runs, unless the
// attempt is older than the newest known or finished already (the events
// came out of order), or the execution is over.
func (e *recExec) start(ev *model.AttemptEvent, p prior) {
	a, at, disp, prevState, prevAttempts := ev.Attempt, p.at, p.disp, p.state, p.attempts
	hb := ev.Type == domain.EventHeartbeat
	e.loseBefore(a, at)
	r := e.att[a]
	if r == nil {
		r = &recAttempt{executor: ev.Executor}
		e.att[a] = r
	} else if r.executor == "" {
		r.executor = ev.Executor
	}
	if hb {
		r.heartbeatAt = greatest(r.heartbeatAt, tp(at))
	} else {
		r.startedAt = least(r.startedAt, tp(at))
	}
	e.touch(a)
	if a >= prevAttempts && r.finishedAt == nil && !prevState.Final() {
		e.state, e.nextAttempt = domain.ExecRunning, nil
	}
	e.attempts = max(e.attempts, a)
	if !hb {
		e.startedAt = least(e.startedAt, tp(at))
	}
	if a > prevAttempts && e.dispatchedAt == nil {
		e.dispatchedAt = tp(disp)
	}
	if a >= prevAttempts && !prevState.Final() {
		e.executorID = ev.Executor
	}
}

// deferred applies a delivery handed back unrun, which is no attempt. If
// it is about the current dispatch and the execution still waits to run,
// it goes back into the outbox as its next dispatch.
func (e *recExec) deferred(ev *model.AttemptEvent, p prior, now time.Time) {
	a, at, prevState, prevAttempts := ev.Attempt, p.at, p.state, p.attempts
	e.loseBefore(a, at)
	requeue := a > prevAttempts && ev.Dispatch == e.dispatches &&
		(prevState == domain.ExecQueued || prevState == domain.ExecRunning || prevState == domain.ExecFailed)
	e.attempts = max(e.attempts, a-1)
	e.dirty = true
	if requeue {
		if e.state != domain.ExecFailed {
			e.state = domain.ExecQueued
		}
		e.nextAttempt = tp(now.Add(max(ev.RetryIn, 0)))
		e.dispatchedAt = nil
		e.dispatches++
		e.requeued = true
	}
}

// cancelled applies a cancellation. The attempt is recorded only if it
// began (a start time is given, or it has a row); the execution becomes
// cancelled unless it is over already.
func (e *recExec) cancelled(ev *model.AttemptEvent, p prior) {
	a, at, disp, started, prevState := ev.Attempt, p.at, p.disp, p.started, p.state
	began := started != nil || e.att[a] != nil
	e.loseBefore(a, at)
	if began {
		msg := cleanText(ev.Error)
		if msg == "" {
			msg = "cancelled"
		}
		r := e.att[a]
		if r == nil {
			e.att[a] = &recAttempt{executor: ev.Executor, startedAt: started, finishedAt: tp(at),
				outcome: domain.OutcomeCancelled, errText: msg}
			e.touch(a)
		} else if r.outcome == "" || r.outcome == domain.OutcomeLost {
			if r.executor == "" {
				r.executor = ev.Executor
			}
			r.startedAt = least(r.startedAt, started)
			r.finishedAt, r.outcome, r.errText = tp(at), domain.OutcomeCancelled, msg
			e.touch(a)
		}
		e.attempts = max(e.attempts, a)
	} else {
		e.attempts = max(e.attempts, a-1)
	}
	e.dirty = true
	if e.dispatchedAt == nil {
		e.dispatchedAt = tp(disp)
	}
	e.startedAt = least(e.startedAt, started)
	if !prevState.Final() {
		msg := cleanText(ev.Error)
		if msg == "" {
			msg = "cancelled"
		}
		e.state, e.finishedAt, e.nextAttempt, e.errText = domain.ExecCancelled, tp(at), nil, msg
	}
}

// end applies an attempt's end: a success or a failure. The first report
// of it wins (one that only the lost rule inferred gives way to it); a
// repeat changes nothing.
func (e *recExec) end(ev *model.AttemptEvent, p prior, now time.Time) {
	a, at, disp, started, prevState, prevAttempts := ev.Attempt, p.at, p.disp, p.started, p.state, p.attempts
	outcome := ev.Outcome()
	e.loseBefore(a, at)
	errText, output := cleanText(ev.Error), cleanText(ev.Output)
	r := e.att[a]
	switch {
	case r == nil:
		e.att[a] = &recAttempt{executor: ev.Executor, startedAt: started, finishedAt: tp(at),
			outcome: outcome, errText: errText, output: output}
	case r.outcome == "" || r.outcome == domain.OutcomeLost:
		if r.executor == "" {
			r.executor = ev.Executor
		}
		r.startedAt = least(r.startedAt, started)
		r.finishedAt, r.outcome, r.errText, r.output = tp(at), outcome, errText, output
	default:
		return
	}
	e.touch(a)
	// A success of any attempt makes the execution succeeded; a final
	// failure of its newest attempt, dead; another failure of its
	// newest attempt about its current dispatch puts it back in the
	// outbox (failed, due after the delay, as its next dispatch). A
	// late or stale failure records only the attempt.
	var next domain.ExecState
	switch {
	case prevState.Final():
	case ev.Type == domain.EventSucceeded:
		next = domain.ExecSucceeded
	case a < prevAttempts:
	case ev.Final:
		next = domain.ExecDead
	case ev.Dispatch != e.dispatches:
	default:
		next = domain.ExecFailed
	}
	e.attempts = max(e.attempts, a)
	switch {
	case next == domain.ExecFailed:
		e.dispatchedAt = nil
		e.dispatches++
		e.nextAttempt = tp(now.Add(max(ev.RetryIn, 0)))
		e.finishedAt = nil
		e.requeued = true
	case next != "":
		if e.dispatchedAt == nil {
			e.dispatchedAt = tp(disp)
		}
		e.nextAttempt = nil
		e.finishedAt = tp(at)
	case a > prevAttempts && e.dispatchedAt == nil:
		e.dispatchedAt = tp(disp)
	}
	e.startedAt = least(e.startedAt, started)
	if next != "" {
		e.state = next
		e.errText = errText
		if next == domain.ExecSucceeded {
			e.errText = ""
		}
		e.output = output
		if a >= prevAttempts {
			e.executorID = ev.Executor
		}
		e.succeeded = next == domain.ExecSucceeded
	}
}
