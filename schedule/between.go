package schedule

import "time"

// Between returns the runs of a recurring schedule at or after from and
// before to, oldest first, at most n of them (none when n ≤ 0), as Next
// computes them (so within the window, Spec.StartAt to Spec.EndAt).
// more reports whether runs of the range were left out because of n.
// A one-shot schedule has none: its single run is First's.
func (c *Schedule) Between(from, to time.Time, n int) (runs []time.Time, more bool) {
	if n <= 0 {
		_, ok := c.firstBetween(from, to)
		return nil, ok
	}
	t, ok := c.firstBetween(from, to)
	for ok {
		if len(runs) == n {
			return runs, true
		}
		runs = append(runs, t)
		t, ok = c.Next(t)
		ok = ok && t.Before(to)
	}
	return runs, false
}

// Count is how many runs Between(from, to, …) holds, counting no further
// than limit: ok is false when the range holds more than limit runs.
func (c *Schedule) Count(from, to time.Time, limit int) (n int, ok bool) {
	t, more := c.firstBetween(from, to)
	for more {
		if n == limit {
			return n, false
		}
		n++
		t, more = c.Next(t)
		more = more && t.Before(to)
	}
	return n, true
}

// firstBetween is the first run at or after from, if it is before to.
// Runs fall on whole milliseconds, so the first strictly after the
// millisecond before from is the first at or after it.
func (c *Schedule) firstBetween(from, to time.Time) (time.Time, bool) {
	t, ok := c.Next(from.Truncate(time.Millisecond).Add(-time.Millisecond))
	if t.Before(from) {
		// from had a fraction of a millisecond: its own millisecond is
		// before it.
		t, ok = c.Next(t)
	}
	return t, ok && t.Before(to)
}
