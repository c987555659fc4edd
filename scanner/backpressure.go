package scanner

import (
	"time"

	"github.com/tock-sched/tock/dispatcher"
)

// Backpressure. When more is due than the executors can run, firing at
// the due rate only fills the exec queues, and the CPU it takes is not
// left for executing and recording: executed/s falls below what the
// node can do. So the scanner fires no further ahead of execution than a
// bounded backlog (Config.Backlog): before each batch it compares the
// executions waiting for executors (the last reading, plus the runs it
// fired since) with a limit of BacklogFor of the rate the executors take
// them at, but at least MinBacklog. Over it, the batch waits, and the
// runs stay due in Postgres (they fire late, in due order, and the jobs'
// missed-run policies judge how late, as after an outage). Without a
// reading it fires as if there were no backlog. While firing is held
// back, scans are put off: the heap holds the earliest due runs, and what
// a scan would add is due after them; so each due job is read about once
// however long the overload, not once a second.
//
// A queue counts at most 2 x BacklogFor of its own rate: a queue far
// behind for reasons of its own (a slow custom handler, or executors that
// are down, rate 0) does not hold back the firing of every other queue.

// Backlog reports the executions fired and not yet taken by executors;
// *dispatcher.BacklogWatch is one. ok is false when it cannot tell.
type Backlog interface {
	Backlog() (b dispatcher.Backlog, ok bool)
}

// holdRecheck is how often held firing looks at the backlog again.
const holdRecheck = 50 * time.Millisecond

// backlogCounted is reading b as firing counts it (each queue capped at
// 2 x within of its own rate, the dispatcher's unpublished added), and
// the limit: within of the queues' summed rate, at least floor.
func backlogCounted(b dispatcher.Backlog, within time.Duration, floor int) (waiting, limit int) {
	rate := 0.0
	for _, q := range b.Queues {
		rate += q.Rate
		waiting += min(q.Waiting, int(2*q.Rate*within.Seconds()))
	}
	waiting += b.Unpublished
	return waiting, max(floor, int(rate*within.Seconds()))
}

// landing is a firing transaction's counted runs and when they reached
// the dispatcher.
type landing struct {
	at time.Time // local clock
	n  int
}

// mayFire reports whether another batch may fire now: always without a
// Backlog or a reading; otherwise while the backlog read, plus the runs
// fired since it was read, is below its limit.
func (s *Scanner) mayFire() bool {
	if s.cfg.Backlog == nil {
		return true
	}
	b, ok := s.cfg.Backlog.Backlog()
	if !ok {
		s.m.backlogSeen.Set(-1)
		s.landed = s.landed[:0] // the next reading has them
		return true
	}
	// What landed before the reading began is in it.
	i := 0
	for i < len(s.landed) && !s.landed[i].at.After(b.At) {
		i++
	}
	s.landed = s.landed[i:]
	waiting, limit := backlogCounted(b, s.cfg.BacklogFor, s.cfg.MinBacklog)
	waiting += s.flyingCounted
	for _, l := range s.landed {
		waiting += l.n
	}
	s.m.backlogSeen.Set(float64(waiting))
	s.m.backlogLimit.Set(float64(limit))
	return waiting < limit
}

// counts reports whether a run due at due counts against the backlog
// when fired at now: one fired ahead of a burst (further ahead than
// FireLead) waits in the dispatcher for its time, not for an executor,
// and is counted once it is due (dispatcher.Dispatcher.Unpublished).
func (s *Scanner) counts(due, now time.Time) bool {
	return !due.After(now.Add(s.cfg.FireLead))
}

// setHeld records whether firing is held back, for the metrics and the
// log.
func (s *Scanner) setHeld(held bool) {
	now := time.Now()
	if !s.heldAt.IsZero() {
		s.m.heldSeconds.Add(now.Sub(s.heldAt).Seconds())
	}
	if !held {
		if !s.heldAt.IsZero() {
			s.nextScan = time.Time{} // scans were put off while held: scan now
		}
		s.heldAt = time.Time{}
		return
	}
	if s.heldAt.IsZero() && now.Sub(s.heldLogged) >= time.Minute {
		s.log.Warn("firing held back: more fired than executors take; due runs fire late",
			"min_backlog", s.cfg.MinBacklog, "backlog_for", s.cfg.BacklogFor)
		s.heldLogged = now
	}
	s.heldAt = now
}
