package store

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Table tests of the execution state rules (rules.go). They need no
// database: they build the execution RecordAttemptEvents would have read, apply
// events to it and look at what the rules changed, so they pass with
// Postgres stopped (go test -run '^TestRule' ./store/). They stay in
// package store rather than a package of their own because the rules
// work on recExec, the row recordTx reads and writes back, and moving it
// out would export the recording's internals to serve its tests.

var (
	ruleT0 = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	// ruleAt is when the events happened, finer than the millisecond the
	// store keeps.
	ruleAt = ruleT0.Add(30*time.Second + 123456789)
	// ruleNow is the database's clock when they are recorded.
	ruleNow   = ruleT0.Add(time.Minute)
	ruleRetry = 10 * time.Second
)

// ruleExec is an execution in state as the rules find it: queued and
// published; running its attempt 1; failed after attempt 1 and waiting
// in the outbox for its second dispatch; or ended by attempt 1.
func ruleExec(state domain.ExecState) *recExec {
	e := &recExec{id: uuid.MustParse("00000000-0000-7000-8000-000000000001"), jobID: uuid.MustParse("00000000-0000-7000-8000-0000000000aa"),
		sched: ruleT0, bucket: 3, state: state, dispatchedAt: tp(ruleT0), att: map[int]*recAttempt{}}
	if state == domain.ExecQueued || state == domain.ExecWaiting {
		if state == domain.ExecWaiting {
			e.dispatchedAt = nil // never handed out
		}
		return e
	}
	e.attempts, e.executorID, e.startedAt = 1, "x1", tp(ruleT0.Add(time.Second))
	a := &recAttempt{executor: "x1", startedAt: tp(ruleT0.Add(time.Second))}
	e.att[1] = a
	end := tp(ruleT0.Add(2 * time.Second))
	switch state {
	case domain.ExecRunning:
	case domain.ExecFailed:
		a.finishedAt, a.outcome, a.errText = end, domain.OutcomeFailed, "boom"
		e.errText, e.dispatches, e.dispatchedAt, e.nextAttempt = "boom", 1, nil, tp(ruleT0.Add(2*time.Minute))
	case domain.ExecSucceeded:
		a.finishedAt, a.outcome, a.output = end, domain.OutcomeSucceeded, "ok"
		e.finishedAt, e.output = end, "ok"
	case domain.ExecDead:
		a.finishedAt, a.outcome, a.errText = end, domain.OutcomeFailed, "boom"
		e.finishedAt, e.errText = end, "boom"
	case domain.ExecCancelled:
		a.finishedAt, a.outcome, a.errText = end, domain.OutcomeCancelled, "cancelled"
		e.finishedAt, e.errText = end, "cancelled"
	}
	return e
}

// ruleEvent is an event of kind about attempt a of e's dispatch d. The
// kinds are the event types, and "failed final" and "timed out".
func ruleEvent(e *recExec, kind string, a, d int) model.AttemptEvent {
	ev := model.AttemptEvent{ID: e.id, Attempt: a, Dispatch: d, Executor: fmt.Sprintf("x%d", a), At: ruleAt, RetryIn: ruleRetry}
	switch kind {
	case "failed final":
		ev.Type, ev.Final, ev.Error = domain.EventFailed, true, "gave up"
	case "timed out":
		ev.Type, ev.TimedOut, ev.Error = domain.EventFailed, true, "timeout"
	case "failed":
		ev.Type, ev.Error = domain.EventFailed, "boom again"
	case "succeeded":
		// An error text on a success is the attempt's, not the execution's.
		ev.Type, ev.Output, ev.Error = domain.EventSucceeded, "done", "warning"
	default:
		ev.Type = domain.EventType(kind)
	}
	return ev
}

// attemptsText is a compact view of e's attempts: "1:lost 2:failed 3:"
// (3 still runs).
func attemptsText(e *recExec) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(e.att)) {
		parts = append(parts, fmt.Sprintf("%d:%s", n, e.att[n].outcome))
	}
	return strings.Join(parts, " ")
}

func timeText(t *time.Time) string {
	if t == nil {
		return "nil"
	}
	return t.Format(time.RFC3339Nano)
}

// TestRuleTransitions applies every event type to an execution in every
// state and checks where it ends: the state machine, as a table that
// must name every (state, event type) pair.
func TestRuleTransitions(t *testing.T) {
	const (
		Q, R, S, F, C, D = domain.ExecQueued, domain.ExecRunning, domain.ExecSucceeded, domain.ExecFailed, domain.ExecCancelled, domain.ExecDead
		W                = domain.ExecWaiting
	)
	seen := map[domain.ExecState]bool{} // "state+event type"
	for _, tc := range []struct {
		from domain.ExecState
		// the event, about attempt a of dispatch d
		kind string
		a, d int
		to   domain.ExecState
		// requeued: back in the outbox as dispatch dispatches
		requeued   bool
		dispatches int
		attempts   int
		// the attempts afterwards (attemptsText)
		att string
	}{
		// A queued execution: its first attempt starts, ends, or its
		// delivery is handed back.
		{from: Q, kind: "started", a: 1, to: R, attempts: 1, att: "1:"},
		{from: Q, kind: "heartbeat", a: 1, to: R, attempts: 1, att: "1:"},
		{from: Q, kind: "succeeded", a: 1, to: S, attempts: 1, att: "1:succeeded"},
		{from: Q, kind: "failed", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:failed"},
		{from: Q, kind: "timed out", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:timed_out"},
		{from: Q, kind: "failed final", a: 1, to: D, attempts: 1, att: "1:failed"},
		{from: Q, kind: "cancelled", a: 1, to: C, attempts: 0, att: ""},
		{from: Q, kind: "deferred", a: 1, to: Q, requeued: true, dispatches: 1, attempts: 0, att: ""},
		// A waiting execution is never handed out; should an executor report
		// on it all the same, what it did is recorded as for a queued one
		// (every attempt is recorded), but a deferral leaves it waiting.
		{from: W, kind: "started", a: 1, to: R, attempts: 1, att: "1:"},
		{from: W, kind: "heartbeat", a: 1, to: R, attempts: 1, att: "1:"},
		{from: W, kind: "succeeded", a: 1, to: S, attempts: 1, att: "1:succeeded"},
		{from: W, kind: "failed", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:failed"},
		{from: W, kind: "timed out", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:timed_out"},
		{from: W, kind: "failed final", a: 1, to: D, attempts: 1, att: "1:failed"},
		{from: W, kind: "cancelled", a: 1, to: C, attempts: 0, att: ""},
		{from: W, kind: "deferred", a: 1, to: W, attempts: 0, att: ""},
		// Running attempt 1; a deferral is of a later delivery (2), which
		// proves attempt 1 lost.
		{from: R, kind: "started", a: 1, to: R, attempts: 1, att: "1:"},
		{from: R, kind: "heartbeat", a: 1, to: R, attempts: 1, att: "1:"},
		{from: R, kind: "succeeded", a: 1, to: S, attempts: 1, att: "1:succeeded"},
		{from: R, kind: "failed", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:failed"},
		{from: R, kind: "timed out", a: 1, to: F, requeued: true, dispatches: 1, attempts: 1, att: "1:timed_out"},
		{from: R, kind: "failed final", a: 1, to: D, attempts: 1, att: "1:failed"},
		{from: R, kind: "cancelled", a: 1, to: C, attempts: 1, att: "1:cancelled"},
		{from: R, kind: "deferred", a: 2, to: Q, requeued: true, dispatches: 1, attempts: 1, att: "1:lost"},
		// Failed after attempt 1, waiting for dispatch 1: its attempt 2.
		{from: F, kind: "started", a: 2, d: 1, to: R, dispatches: 1, attempts: 2, att: "1:failed 2:"},
		{from: F, kind: "heartbeat", a: 2, d: 1, to: R, dispatches: 1, attempts: 2, att: "1:failed 2:"},
		{from: F, kind: "succeeded", a: 2, d: 1, to: S, dispatches: 1, attempts: 2, att: "1:failed 2:succeeded"},
		{from: F, kind: "failed", a: 2, d: 1, to: F, requeued: true, dispatches: 2, attempts: 2, att: "1:failed 2:failed"},
		{from: F, kind: "timed out", a: 2, d: 1, to: F, requeued: true, dispatches: 2, attempts: 2, att: "1:failed 2:timed_out"},
		{from: F, kind: "failed final", a: 2, d: 1, to: D, dispatches: 1, attempts: 2, att: "1:failed 2:failed"},
		{from: F, kind: "cancelled", a: 2, d: 1, to: C, dispatches: 1, attempts: 1, att: "1:failed"},
		{from: F, kind: "deferred", a: 2, d: 1, to: F, requeued: true, dispatches: 2, attempts: 1, att: "1:failed"},
		// Final states stay: a late delivery's attempt is recorded, the
		// execution is not touched.
		{from: S, kind: "started", a: 2, to: S, attempts: 2, att: "1:succeeded 2:"},
		{from: S, kind: "heartbeat", a: 2, to: S, attempts: 2, att: "1:succeeded 2:"},
		{from: S, kind: "succeeded", a: 2, to: S, attempts: 2, att: "1:succeeded 2:succeeded"},
		{from: S, kind: "failed", a: 2, to: S, attempts: 2, att: "1:succeeded 2:failed"},
		{from: S, kind: "timed out", a: 2, to: S, attempts: 2, att: "1:succeeded 2:timed_out"},
		{from: S, kind: "failed final", a: 2, to: S, attempts: 2, att: "1:succeeded 2:failed"},
		{from: S, kind: "cancelled", a: 2, to: S, attempts: 1, att: "1:succeeded"},
		{from: S, kind: "deferred", a: 2, to: S, attempts: 1, att: "1:succeeded"},
		{from: D, kind: "started", a: 2, to: D, attempts: 2, att: "1:failed 2:"},
		{from: D, kind: "heartbeat", a: 2, to: D, attempts: 2, att: "1:failed 2:"},
		{from: D, kind: "succeeded", a: 2, to: D, attempts: 2, att: "1:failed 2:succeeded"},
		{from: D, kind: "failed", a: 2, to: D, attempts: 2, att: "1:failed 2:failed"},
		{from: D, kind: "timed out", a: 2, to: D, attempts: 2, att: "1:failed 2:timed_out"},
		{from: D, kind: "failed final", a: 2, to: D, attempts: 2, att: "1:failed 2:failed"},
		{from: D, kind: "cancelled", a: 2, to: D, attempts: 1, att: "1:failed"},
		{from: D, kind: "deferred", a: 2, to: D, attempts: 1, att: "1:failed"},
		{from: C, kind: "started", a: 2, to: C, attempts: 2, att: "1:cancelled 2:"},
		{from: C, kind: "heartbeat", a: 2, to: C, attempts: 2, att: "1:cancelled 2:"},
		{from: C, kind: "succeeded", a: 2, to: C, attempts: 2, att: "1:cancelled 2:succeeded"},
		{from: C, kind: "failed", a: 2, to: C, attempts: 2, att: "1:cancelled 2:failed"},
		{from: C, kind: "timed out", a: 2, to: C, attempts: 2, att: "1:cancelled 2:timed_out"},
		{from: C, kind: "failed final", a: 2, to: C, attempts: 2, att: "1:cancelled 2:failed"},
		{from: C, kind: "cancelled", a: 2, to: C, attempts: 1, att: "1:cancelled"},
		{from: C, kind: "deferred", a: 2, to: C, attempts: 1, att: "1:cancelled"},
	} {
		name := fmt.Sprintf("%s+%s", tc.from, tc.kind)
		e := ruleExec(tc.from)
		before := *e
		ev := ruleEvent(e, tc.kind, tc.a, tc.d)
		seen[tc.from+"+"+domain.ExecState(ev.Type)] = true
		e.apply(&ev, ruleNow)
		if e.state != tc.to || e.requeued != tc.requeued || e.dispatches != tc.dispatches || e.attempts != tc.attempts {
			t.Errorf("%s: state %s requeued %v dispatches %d attempts %d; want %s %v %d %d",
				name, e.state, e.requeued, e.dispatches, e.attempts, tc.to, tc.requeued, tc.dispatches, tc.attempts)
		}
		if got := attemptsText(e); got != tc.att {
			t.Errorf("%s: attempts %q, want %q", name, got, tc.att)
		}
		if !e.dirty {
			t.Errorf("%s: the execution is not marked to be written", name)
		}
		if e.att[tc.a] != nil && !e.dirtyAtt[tc.a] {
			t.Errorf("%s: attempt %d is not marked to be written", name, tc.a)
		}
		switch {
		case tc.requeued:
			// Back in the outbox, due RetryIn after the database's now.
			if e.dispatchedAt != nil || !e.nextAttempt.Equal(ruleNow.Add(ruleRetry)) || e.finishedAt != nil {
				t.Errorf("%s: requeued with dispatched %s next %s finished %s; want nil, %s, nil",
					name, timeText(e.dispatchedAt), timeText(e.nextAttempt), timeText(e.finishedAt), ruleNow.Add(ruleRetry))
			}
		case tc.to.Final() && !tc.from.Final():
			// Ended now: out of the outbox, at the event's time.
			if e.nextAttempt != nil || !e.finishedAt.Equal(ms(ruleAt)) || e.dispatchedAt == nil {
				t.Errorf("%s: ended with next %s finished %s dispatched %s; want nil, %s, set",
					name, timeText(e.nextAttempt), timeText(e.finishedAt), timeText(e.dispatchedAt), ms(ruleAt))
			}
		case tc.from.Final():
			if e.finishedAt != before.finishedAt || e.executorID != before.executorID || e.errText != before.errText ||
				e.output != before.output || e.succeeded {
				t.Errorf("%s: a final execution changed: %+v, was %+v", name, e, before)
			}
		case tc.to == R:
			if e.nextAttempt != nil || e.executorID != ev.Executor {
				t.Errorf("%s: running with next %s executor %q; want nil and %q", name, timeText(e.nextAttempt), e.executorID, ev.Executor)
			}
		}
		if want := tc.to == S && tc.from != S; e.succeeded != want {
			t.Errorf("%s: succeeded (the job's last success may move) %v, want %v", name, e.succeeded, want)
		}
	}
	// Every state meets every event type.
	for _, st := range domain.ExecStates {
		for _, typ := range domain.EventTypes {
			if !seen[st+"+"+domain.ExecState(typ)] {
				t.Errorf("no transition of a %s execution on a %s event", st, typ)
			}
		}
	}
}

// A start or heartbeat of an attempt older than the newest known, or of
// one that has finished (events come out of order), records the attempt
// and leaves the execution alone.
func TestRuleLateStart(t *testing.T) {
	for _, kind := range []string{"started", "heartbeat"} {
		// Failed after attempt 1 and waiting for its retry: attempt 1's
		// start arrives last.
		e := ruleExec(domain.ExecFailed)
		ev := ruleEvent(e, kind, 1, 0)
		e.apply(&ev, ruleNow)
		if e.state != domain.ExecFailed || !e.nextAttempt.Equal(ruleT0.Add(2*time.Minute)) || e.executorID != "x1" || e.dispatchedAt != nil {
			t.Errorf("%s of a finished attempt: state %s next %s executor %q dispatched %s; want failed, unchanged",
				kind, e.state, timeText(e.nextAttempt), e.executorID, timeText(e.dispatchedAt))
		}
		// Failed after attempt 2, whose executor never reported attempt
		// 1's end: attempt 1's start arrives last.
		e = ruleExec(domain.ExecFailed)
		e.att[2], e.att[1] = e.att[1], &recAttempt{executor: "x1"}
		e.attempts, e.executorID = 2, "x2"
		ev = ruleEvent(e, kind, 1, 1)
		e.apply(&ev, ruleNow)
		if e.state != domain.ExecFailed || e.attempts != 2 || e.executorID != "x2" || e.nextAttempt == nil {
			t.Errorf("%s of an older attempt: state %s attempts %d executor %q next %s; want failed, 2, x2, unchanged",
				kind, e.state, e.attempts, e.executorID, timeText(e.nextAttempt))
		}
	}
}

// An attempt's start is its earliest report, its heartbeat the latest;
// a heartbeat is no start for the attempt or the execution.
func TestRuleStartAndHeartbeatTimes(t *testing.T) {
	e := ruleExec(domain.ExecQueued)
	earlier, later := ruleEvent(e, "started", 1, 0), ruleEvent(e, "started", 1, 0)
	earlier.At = ruleAt.Add(-time.Second)
	e.apply(&earlier, ruleNow)
	e.apply(&later, ruleNow)
	if want := ms(earlier.At); !e.att[1].startedAt.Equal(want) || !e.startedAt.Equal(want) {
		t.Errorf("starts at %s then %s: attempt started %s, execution %s; want %s",
			earlier.At, later.At, timeText(e.att[1].startedAt), timeText(e.startedAt), want)
	}

	e = ruleExec(domain.ExecQueued)
	hb1, hb2 := ruleEvent(e, "heartbeat", 1, 0), ruleEvent(e, "heartbeat", 1, 0)
	hb2.At = ruleAt.Add(-time.Second)
	e.apply(&hb1, ruleNow)
	e.apply(&hb2, ruleNow)
	if r := e.att[1]; !r.heartbeatAt.Equal(ms(ruleAt)) || r.startedAt != nil || e.startedAt != nil || e.state != domain.ExecRunning {
		t.Errorf("heartbeats at %s then %s: heartbeat %s, attempt started %s, execution started %s, state %s; want %s, nil, nil, running",
			hb1.At, hb2.At, timeText(r.heartbeatAt), timeText(r.startedAt), timeText(e.startedAt), e.state, ms(ruleAt))
	}
	// The executor of a heartbeat-only attempt is known from it, and a
	// row without one learns it.
	if e.att[1].executor != "x1" {
		t.Errorf("attempt executor %q, want x1", e.att[1].executor)
	}
}

// Ends: a success of any attempt makes the execution succeed; a final
// failure of the newest attempt, dead; another failure of the newest
// attempt about the current dispatch, failed and back in the outbox; a
// late or stale failure records only the attempt.
func TestRuleEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(e *recExec)
		kind    string
		a, d    int
		retryIn time.Duration
		want    domain.ExecState
		// next: the execution's next attempt afterwards (nil: none)
		next     *time.Time
		executor string
		err, out string
	}{
		{name: "success of an older attempt", kind: "succeeded", a: 1,
			setup: func(e *recExec) { lateSecond(e) },
			want:  domain.ExecSucceeded, executor: "x2", out: "done"},
		{name: "success clears the error", kind: "succeeded", a: 1,
			setup: func(e *recExec) { e.errText = "old" },
			want:  domain.ExecSucceeded, executor: "x1", out: "done"},
		{name: "final failure of the newest", kind: "failed final", a: 1,
			want: domain.ExecDead, executor: "x1", err: "gave up"},
		{name: "failure of the newest, current dispatch", kind: "failed", a: 1, retryIn: ruleRetry,
			want: domain.ExecFailed, next: tp(ruleNow.Add(ruleRetry)), executor: "x1", err: "boom again"},
		{name: "a negative delay is none", kind: "failed", a: 1, retryIn: -time.Minute,
			want: domain.ExecFailed, next: tp(ruleNow), executor: "x1", err: "boom again"},
		{name: "a requeue has no end", kind: "failed", a: 1, retryIn: ruleRetry,
			setup: func(e *recExec) { e.finishedAt = tp(ruleT0) },
			want:  domain.ExecFailed, next: tp(ruleNow.Add(ruleRetry)), executor: "x1", err: "boom again"},
		{name: "failure of an older attempt", kind: "failed", a: 1,
			setup: func(e *recExec) { lateSecond(e) },
			want:  domain.ExecRunning, executor: "x2"},
		{name: "final failure of an older attempt", kind: "failed final", a: 1,
			setup: func(e *recExec) { lateSecond(e) },
			want:  domain.ExecRunning, executor: "x2"},
		{name: "failure about an older dispatch", kind: "failed", a: 1, d: 0,
			setup: func(e *recExec) { e.dispatches = 1 },
			want:  domain.ExecRunning, executor: "x1"},
	} {
		e := ruleExec(domain.ExecRunning)
		if tc.setup != nil {
			tc.setup(e)
		}
		ev := ruleEvent(e, tc.kind, tc.a, tc.d)
		ev.RetryIn = tc.retryIn
		e.apply(&ev, ruleNow)
		if e.state != tc.want || timeText(e.nextAttempt) != timeText(tc.next) || e.executorID != tc.executor ||
			e.errText != tc.err || e.output != tc.out {
			t.Errorf("%s: state %s next %s executor %q error %q output %q; want %s %s %q %q %q", tc.name,
				e.state, timeText(e.nextAttempt), e.executorID, e.errText, e.output, tc.want, timeText(tc.next), tc.executor, tc.err, tc.out)
		}
		if tc.want == domain.ExecFailed && e.finishedAt != nil {
			t.Errorf("%s: failed and back in the outbox, yet finished at %s", tc.name, timeText(e.finishedAt))
		}
		if r := e.att[tc.a]; r.outcome != ev.Outcome() || !r.finishedAt.Equal(ms(ruleAt)) {
			t.Errorf("%s: attempt %d %q finished %s, want %q at %s", tc.name, tc.a, r.outcome, timeText(r.finishedAt), ev.Outcome(), ms(ruleAt))
		}
	}
}

// lateSecond makes running e's attempt 1 an older one: attempt 2 (x2)
// runs, attempt 1 still unfinished in the table.
func lateSecond(e *recExec) {
	e.attempts, e.executorID = 2, "x2"
	e.att[2] = &recAttempt{executor: "x2", startedAt: tp(ruleT0)}
}

// The first report of an attempt's end wins and a repeat changes
// nothing; an end the lost rule only inferred gives way to the real one.
func TestRuleFirstEndWins(t *testing.T) {
	e := ruleExec(domain.ExecRunning)
	ok, fail := ruleEvent(e, "succeeded", 1, 0), ruleEvent(e, "failed final", 1, 0)
	fail.At = ruleAt.Add(time.Second)
	e.apply(&ok, ruleNow)
	e.dirty, e.dirtyAtt = false, nil
	e.apply(&fail, ruleNow)
	if r := e.att[1]; r.outcome != domain.OutcomeSucceeded || r.output != "done" || !r.finishedAt.Equal(ms(ruleAt)) ||
		e.state != domain.ExecSucceeded || e.dirty {
		t.Errorf("success then failure: attempt %+v, state %s, dirty %v; want the success, unwritten", r, e.state, e.dirty)
	}

	// Attempt 2 starts: attempt 1 is lost. Then attempt 1's own end
	// arrives: it replaces the inferred one.
	e = ruleExec(domain.ExecRunning)
	start2 := ruleEvent(e, "started", 2, 0)
	e.apply(&start2, ruleNow)
	if r := e.att[1]; r.outcome != domain.OutcomeLost || r.errText != lostError {
		t.Fatalf("attempt 1 after attempt 2 started: %+v, want lost", r)
	}
	for _, kind := range []string{"failed", "cancelled"} {
		x := *e
		x.att = map[int]*recAttempt{1: ptr(*e.att[1]), 2: ptr(*e.att[2])}
		end1 := ruleEvent(&x, kind, 1, 0)
		end1.StartedAt = tp(ruleT0)
		x.apply(&end1, ruleNow)
		if r := x.att[1]; r.outcome != end1.Outcome() || r.errText == lostError || !r.startedAt.Equal(ruleT0) {
			t.Errorf("attempt 1's own %s after it was taken for lost: %+v", kind, r)
		}
	}
}

// A cancellation records the attempt only if it began (it has a start
// time or a row), with the executor's message or "cancelled"; the
// execution becomes cancelled unless it is over.
func TestRuleCancelled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    domain.ExecState
		started *time.Time
		msg     string
		// att: the attempts afterwards; err: the execution's error
		att, err string
		want     domain.ExecState
	}{
		{name: "before it began", from: domain.ExecQueued, att: "", err: "cancelled", want: domain.ExecCancelled},
		{name: "with a start time", from: domain.ExecQueued, started: tp(ruleT0), att: "1:cancelled", err: "cancelled", want: domain.ExecCancelled},
		{name: "running", from: domain.ExecRunning, att: "1:cancelled", err: "cancelled", want: domain.ExecCancelled},
		{name: "with a message", from: domain.ExecRunning, msg: "stop\x00ped", att: "1:cancelled", err: "stopped", want: domain.ExecCancelled},
		{name: "once over", from: domain.ExecSucceeded, att: "1:succeeded", err: "", want: domain.ExecSucceeded},
	} {
		e := ruleExec(tc.from)
		ev := ruleEvent(e, "cancelled", 1, 0)
		ev.StartedAt, ev.Error = tc.started, tc.msg
		e.apply(&ev, ruleNow)
		if got := attemptsText(e); got != tc.att || e.state != tc.want || e.errText != tc.err {
			t.Errorf("%s: attempts %q state %s error %q; want %q %s %q", tc.name, got, e.state, e.errText, tc.att, tc.want, tc.err)
		}
		if r := e.att[1]; r != nil && tc.from != domain.ExecSucceeded && (r.errText != tc.err || !r.finishedAt.Equal(ms(ruleAt))) {
			t.Errorf("%s: attempt %+v, want error %q at %s", tc.name, r, tc.err, ms(ruleAt))
		}
		if tc.started != nil && !e.startedAt.Equal(*tc.started) {
			t.Errorf("%s: execution started %s, want %s", tc.name, timeText(e.startedAt), tc.started)
		}
	}
}

// A deferral is no attempt. It puts the execution back in the outbox
// only if it is about a new attempt of the current dispatch and the
// execution still waits to run.
func TestRuleDeferred(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from     domain.ExecState
		a, d     int
		retryIn  time.Duration
		requeue  bool
		attempts int
	}{
		{name: "queued", from: domain.ExecQueued, a: 1, retryIn: ruleRetry, requeue: true},
		{name: "a negative delay is none", from: domain.ExecQueued, a: 1, retryIn: -time.Minute, requeue: true},
		{name: "queued, a later delivery", from: domain.ExecQueued, a: 3, requeue: true, attempts: 2},
		{name: "older dispatch", from: domain.ExecFailed, a: 2, d: 0, attempts: 1},
		{name: "known attempt", from: domain.ExecRunning, a: 1, attempts: 1},
		{name: "dead", from: domain.ExecDead, a: 2, attempts: 1},
	} {
		e := ruleExec(tc.from)
		before, had := *e, e.att[tc.a] != nil
		ev := ruleEvent(e, "deferred", tc.a, tc.d)
		ev.RetryIn = tc.retryIn
		e.apply(&ev, ruleNow)
		if e.requeued != tc.requeue || e.attempts != tc.attempts {
			t.Errorf("%s: requeued %v attempts %d; want %v %d", tc.name, e.requeued, e.attempts, tc.requeue, tc.attempts)
		}
		if want := ruleNow.Add(max(tc.retryIn, 0)); tc.requeue && (e.nextAttempt == nil || !e.nextAttempt.Equal(want)) {
			t.Errorf("%s: next attempt %s, want %s", tc.name, timeText(e.nextAttempt), want)
		}
		if !tc.requeue && (e.state != before.state || e.dispatches != before.dispatches ||
			timeText(e.nextAttempt) != timeText(before.nextAttempt) || timeText(e.dispatchedAt) != timeText(before.dispatchedAt)) {
			t.Errorf("%s: a deferral that requeues nothing changed the execution: %+v, was %+v", tc.name, e, before)
		}
		if e.att[tc.a] != nil && !had {
			t.Errorf("%s: the deferral made attempt %d a row: %+v", tc.name, tc.a, e.att[tc.a])
		}
	}
}

// An event of an attempt newer than the known ones takes the execution
// out of the outbox at its dispatch time: when JetStream stored the
// message if the executor said (and it is not after the database's now),
// else now. Events of older attempts leave it in the outbox.
func TestRuleDispatchedAt(t *testing.T) {
	published := ruleT0.Add(20*time.Second + 456789)
	for _, tc := range []struct {
		name      string
		kind      string
		a         int
		published *time.Time
		want      *time.Time
	}{
		{name: "started, when published", kind: "started", a: 2, published: &published, want: tp(ms(published))},
		{name: "started, no publish time", kind: "started", a: 2, want: tp(ruleNow)},
		{name: "started, a publish time ahead of now", kind: "started", a: 2, published: tp(ruleNow.Add(time.Second)), want: tp(ruleNow)},
		{name: "zero publish time", kind: "heartbeat", a: 2, published: &time.Time{}, want: tp(ruleNow)},
		{name: "failed", kind: "failed final", a: 2, published: &published, want: tp(ms(published))},
		{name: "cancelled", kind: "cancelled", a: 2, want: tp(ruleNow)},
		{name: "an older attempt's start", kind: "started", a: 1},
		{name: "an older attempt's heartbeat", kind: "heartbeat", a: 1},
	} {
		// Failed, waiting in the outbox for dispatch 1.
		e := ruleExec(domain.ExecFailed)
		ev := ruleEvent(e, tc.kind, tc.a, 1)
		ev.PublishedAt = tc.published
		e.apply(&ev, ruleNow)
		if timeText(e.dispatchedAt) != timeText(tc.want) {
			t.Errorf("%s: dispatched %s, want %s", tc.name, timeText(e.dispatchedAt), timeText(tc.want))
		}
	}
}

// An event of attempt a proves the earlier ones over: from the newest
// known attempt up, one unfinished is lost, a number with no row gets a
// lost row.
func TestRuleLostAttempts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     map[int]domain.Outcome // the attempts before; "" runs
		attempts int
		kind     string
		a        int
		want     string
	}{
		{name: "the running one", rows: map[int]domain.Outcome{1: ""}, attempts: 1, kind: "started", a: 2, want: "1:lost 2:"},
		{name: "with gaps", rows: map[int]domain.Outcome{1: ""}, attempts: 1, kind: "succeeded", a: 4, want: "1:lost 2:lost 3:lost 4:succeeded"},
		{name: "finished ones stay", rows: map[int]domain.Outcome{1: domain.OutcomeFailed}, attempts: 1, kind: "heartbeat", a: 3, want: "1:failed 2:lost 3:"},
		{name: "only from the newest known", rows: map[int]domain.Outcome{1: "", 2: ""}, attempts: 2, kind: "failed", a: 3, want: "1: 2:lost 3:failed"},
		{name: "a deferral", rows: map[int]domain.Outcome{1: ""}, attempts: 1, kind: "deferred", a: 3, want: "1:lost 2:lost"},
		{name: "a cancellation", rows: map[int]domain.Outcome{}, attempts: 0, kind: "cancelled", a: 2, want: "1:lost"},
		{name: "nothing before the first", rows: map[int]domain.Outcome{}, attempts: 0, kind: "started", a: 1, want: "1:"},
	} {
		e := ruleExec(domain.ExecRunning)
		e.att, e.attempts = map[int]*recAttempt{}, tc.attempts
		for n, o := range tc.rows {
			e.att[n] = &recAttempt{executor: "old", startedAt: tp(ruleT0), outcome: o}
			if o != "" {
				e.att[n].finishedAt = tp(ruleT0)
			}
		}
		ev := ruleEvent(e, tc.kind, tc.a, 0)
		e.apply(&ev, ruleNow)
		if got := attemptsText(e); got != tc.want {
			t.Errorf("%s: attempts %q, want %q", tc.name, got, tc.want)
		}
		for n := range tc.a {
			if r := e.att[n]; r != nil && r.outcome == domain.OutcomeLost {
				if r.errText != lostError || !r.finishedAt.Equal(ms(ruleAt)) || !e.dirtyAtt[n] {
					t.Errorf("%s: lost attempt %d %+v (written %v), want %q at %s", tc.name, n, r, e.dirtyAtt[n], lostError, ms(ruleAt))
				}
			}
		}
	}
}

// least and greatest are SQL's LEAST and GREATEST: NULLs are ignored.
func TestRuleLeastGreatest(t *testing.T) {
	a, b := tp(ruleT0), tp(ruleT0.Add(time.Second))
	for _, tc := range []struct {
		x, y        *time.Time
		least, most *time.Time
	}{
		{nil, nil, nil, nil},
		{a, nil, a, a},
		{nil, b, b, b},
		{a, b, a, b},
		{b, a, a, b},
	} {
		if got := least(tc.x, tc.y); timeText(got) != timeText(tc.least) {
			t.Errorf("least(%s, %s) = %s, want %s", timeText(tc.x), timeText(tc.y), timeText(got), timeText(tc.least))
		}
		if got := greatest(tc.x, tc.y); timeText(got) != timeText(tc.most) {
			t.Errorf("greatest(%s, %s) = %s, want %s", timeText(tc.x), timeText(tc.y), timeText(got), timeText(tc.most))
		}
	}
}

// What each event records as its attempt's outcome, and which events
// RecordAttemptEvents refuses before the rules see them.
func TestRuleEventOutcomeAndCheck(t *testing.T) {
	for _, tc := range []struct {
		ev   model.AttemptEvent
		want domain.Outcome
		bad  bool
	}{
		{ev: model.AttemptEvent{Type: domain.EventStarted}},
		{ev: model.AttemptEvent{Type: domain.EventHeartbeat}},
		{ev: model.AttemptEvent{Type: domain.EventDeferred}},
		{ev: model.AttemptEvent{Type: domain.EventSucceeded}, want: domain.OutcomeSucceeded},
		{ev: model.AttemptEvent{Type: domain.EventFailed}, want: domain.OutcomeFailed},
		{ev: model.AttemptEvent{Type: domain.EventFailed, Final: true}, want: domain.OutcomeFailed},
		{ev: model.AttemptEvent{Type: domain.EventFailed, TimedOut: true}, want: domain.OutcomeTimedOut},
		{ev: model.AttemptEvent{Type: domain.EventCancelled}, want: domain.OutcomeCancelled},
		{ev: model.AttemptEvent{Type: domain.EventSucceeded, TimedOut: true}, want: domain.OutcomeSucceeded, bad: true},
		{ev: model.AttemptEvent{Type: "exploded"}, bad: true},
		{ev: model.AttemptEvent{Type: domain.EventStarted, Attempt: -1}, bad: true},
		{ev: model.AttemptEvent{Type: domain.EventStarted, Dispatch: -1}, bad: true},
	} {
		ev := tc.ev
		if ev.Attempt == 0 {
			ev.Attempt = 1
		}
		if got := ev.Outcome(); got != tc.want {
			t.Errorf("%+v: outcome %q, want %q", ev, got, tc.want)
		}
		if err := checkEvent(&ev); (err != nil) != tc.bad {
			t.Errorf("%+v: check = %v, want an error: %v", ev, err, tc.bad)
		}
	}
}

// A batch's successes move each job's last success to its latest one:
// the one that ended last, or of two at the same time the greater id
// (whatever the batch's order). That a success older than the recorded
// one moves nothing is updateSuccessesSQL's condition.
func TestRuleLastSuccessInABatch(t *testing.T) {
	job := uuid.New()
	mk := func(id string, end time.Time) *recExec {
		return &recExec{id: uuid.MustParse(id), jobID: job, finishedAt: tp(end)}
	}
	early := mk("00000000-0000-7000-8000-000000000009", ruleT0)
	late := mk("00000000-0000-7000-8000-000000000001", ruleT0.Add(time.Second))
	tieLow := mk("00000000-0000-7000-8000-000000000002", ruleT0.Add(2*time.Second))
	tieHigh := mk("00000000-0000-7000-8000-000000000003", ruleT0.Add(2*time.Second))
	for _, order := range [][]*recExec{{early, late}, {late, early}, {tieLow, tieHigh, early}, {tieHigh, tieLow}} {
		var rows successRows
		for _, e := range order {
			rows.add(e)
		}
		want := late
		if slices.Contains(order, tieHigh) {
			want = tieHigh
		}
		if got := rows[job]; got != want || len(rows) != 1 {
			var ids []string
			for _, e := range order {
				ids = append(ids, e.id.String())
			}
			t.Errorf("successes of %v: %d rows, the job's is %s; want %s", ids, len(rows), got.id, want.id)
		}
	}
}
