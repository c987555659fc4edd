package scanner

import (
	"slices"
	"time"
)

// The adaptive fire lead. A run is fired FireLead before its time, and
// the dispatcher holds its execution until then. When a second has more
// runs than firing commits in FireLead (50,000 jobs at the top of an
// hour, say), FireLead is too short: the last of them would be committed
// seconds late. So the scanner counts the runs in its heap by second
// after every scan, measures the rate its firing transactions sustain,
// and fires every run due up to second T as soon as
//
//	T - now <= FireLead + (runs due up to T) / rate
//
// bounded by MaxFireLead. In a steady load the lead stays near FireLead;
// before a burst it grows to what the burst takes to fire.

// initialFireRate is the firing rate assumed before any batch has been
// measured: a low guess, so that the first burst fires early rather than
// late.
const initialFireRate = 5_000

// minMeasuredBatch: smaller batches say more about round trips than
// about the rate a burst is fired at, and are not measured.
const minMeasuredBatch = 100

// measureFire folds a committed batch of n firings that took d into the
// firing rate: n/d per transaction, times the transactions in flight at
// once, averaged over the last few batches.
func (s *Scanner) measureFire(n int, d time.Duration) {
	if n < minMeasuredBatch || d <= 0 {
		return
	}
	rate := float64(n) / d.Seconds() * float64(s.cfg.FireConcurrency)
	if s.fireRate == 0 {
		s.fireRate = rate
		return
	}
	s.fireRate = 0.8*s.fireRate + 0.2*rate
}

func (s *Scanner) rate() float64 {
	if s.fireRate > 0 {
		return s.fireRate
	}
	return initialFireRate
}

// countDue counts the heap's runs by second (cumulatively), for
// fireHorizon. It walks the heap once per scan; runs fired since are
// still counted until the next scan, which only makes the lead a little
// longer.
func (s *Scanner) countDue() {
	s.dueBy = s.dueBy[:0]
	if len(s.heap) == 0 {
		return
	}
	by := map[time.Time]int{}
	for _, e := range s.heap {
		if s.index[e.job.ID] == e {
			by[e.due.Truncate(time.Second)]++
		}
	}
	for at, n := range by {
		s.dueBy = append(s.dueBy, dueCount{at: at, cum: n})
	}
	slices.SortFunc(s.dueBy, func(a, b dueCount) int { return a.at.Compare(b.at) })
	for i := 1; i < len(s.dueBy); i++ {
		s.dueBy[i].cum += s.dueBy[i-1].cum
	}
}

// leadFor is how long before the runs of second at (and those before it)
// firing must start: FireLead plus what they take to fire, at most
// MaxFireLead.
func (s *Scanner) leadFor(cum int) time.Duration {
	lead := s.cfg.FireLead + time.Duration(float64(cum)/s.rate()*float64(time.Second))
	return min(lead, s.cfg.MaxFireLead)
}

// fireHorizon is the latest due time fired at now: now + FireLead, or
// later when a coming second needs a longer lead.
func (s *Scanner) fireHorizon(now time.Time) time.Time {
	horizon := now.Add(s.cfg.FireLead)
	for _, d := range s.dueBy {
		end := d.at.Add(time.Second - time.Nanosecond)
		if !end.After(horizon) {
			continue
		}
		if d.at.Sub(now) > s.cfg.MaxFireLead {
			break
		}
		if !d.at.After(now.Add(s.leadFor(d.cum))) {
			horizon = end
		}
	}
	return horizon
}

// fireAt is when a run due at due is fired: due minus its lead.
func (s *Scanner) fireAt(due time.Time) time.Time {
	sec := due.Truncate(time.Second)
	i, found := slices.BinarySearchFunc(s.dueBy, sec, func(d dueCount, t time.Time) int { return d.at.Compare(t) })
	if !found {
		return due.Add(-s.cfg.FireLead)
	}
	at := sec.Add(-s.leadFor(s.dueBy[i].cum))
	return minTime(at, due.Add(-s.cfg.FireLead))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
