package schedule

import (
	"fmt"
	"math"
	"time"
)

// DSTMark says how a run relates to a daylight saving change in the
// schedule's zone.
type DSTMark string

// The marks of a previewed run; the zero mark means the run's wall time is
// an ordinary one.
const (
	// DSTMoved: the wall time the cron expression names was skipped by a
	// forward jump, so the run moved to the first instant after the gap
	// (fixed-time expressions only; see the package doc).
	DSTMoved DSTMark = "moved"
	// DSTRepeated: the run's wall time happens twice, the clocks going
	// back; Fire.Occurrence says which pass this run is.
	DSTRepeated DSTMark = "repeated"
)

// Fire is one run of a schedule as a preview shows it.
type Fire struct {
	// At is the run time, in UTC: the scheduled time its execution gets.
	At time.Time
	// Local is At in the schedule's zone.
	Local time.Time
	// DST marks a run next to a daylight saving change; "" for none.
	DST DSTMark
	// Nominal is, for a moved run, the wall time the expression named,
	// which did not exist that day (the earliest such, when several
	// shared the run), as "2006-01-02T15:04:05" without an offset.
	Nominal string
	// Occurrence is, for a repeated wall time, 1 for its first pass and 2
	// for its second; 0 otherwise.
	Occurrence int
	// Note explains the mark in words fit for the user; "" without one.
	Note string
}

// Preview returns the first n runs of a job with this schedule created at
// from: First(from), then Next of each run, as the scanner chains them.
// So a cron schedule lists its next n runs strictly after from, a
// one-shot schedule its single run. Each run is classified as Classify
// does. It stops early when Next finds no run within its horizon, and
// fails as First does (a moment before from, an expression with no run).
func (c *Schedule) Preview(from time.Time, n int) ([]Fire, error) {
	if n <= 0 {
		return nil, nil
	}
	t, err := c.First(from)
	if err != nil {
		return nil, err
	}
	out := make([]Fire, 0, min(n, 1024))
	out = append(out, c.Classify(t))
	for c.Recurring() && len(out) < n {
		var ok bool
		if t, ok = c.Next(t); !ok {
			break
		}
		out = append(out, c.Classify(t))
	}
	return out, nil
}

// Classify describes run time t (one that First or Next returned) in the
// schedule's zone, and marks it if a daylight saving change shaped it:
//
//   - DSTMoved when t is the first instant after a forward jump and the
//     expression, a fixed-time one, names a wall time inside the gap: by
//     the package's rule that time runs at t. Wall-clock expressions
//     ("*" in the second, minute or hour field) have no run in a gap, so
//     none of their runs is moved.
//   - DSTRepeated when t's wall time happens twice, with Occurrence 1 or 2.
//     A fixed-time expression runs only on the first pass; a wall-clock
//     one (and "@every", which ignores the zone) on both.
//
// It uses the zone periods and the field matching that Next uses, so a
// mark says what the firing path did rather than re-deriving it.
func (c *Schedule) Classify(t time.Time) Fire {
	f := Fire{At: t.UTC(), Local: t.In(c.loc)}
	u := t.Unix() // periods change at whole seconds: u's period is t's
	p := periodAt(c.loc, u)

	if c.cron != nil && !c.cron.wall && p.start == u {
		if prev := periodAt(c.loc, u-1); prev.offset < p.offset {
			// The wall times [u+prev.offset, u+p.offset) were skipped.
			gapFrom, gapTo := u+prev.offset, u+p.offset
			if w, ok := c.cron.nextCivil(gapFrom, civilYear(gapTo)); ok && w < gapTo {
				f.DST, f.Nominal = DSTMoved, civilText(w)
				f.Note = fmt.Sprintf("%s did not exist (clocks went forward from %s to %s); runs at the first instant after the gap",
					clockText(w), clockText(gapFrom), clockText(gapTo))
				return f
			}
		}
	}

	wall := u + p.offset
	fixed := c.cron != nil && !c.cron.wall
	if p.end != math.MaxInt64 {
		if next := periodAt(c.loc, p.end); next.offset < p.offset && wall >= p.end+next.offset {
			f.DST, f.Occurrence = DSTRepeated, 1
			back := fmt.Sprintf("clocks go back from %s to %s", clockText(p.end+p.offset), clockText(p.end+next.offset))
			switch {
			case fixed:
				f.Note = fmt.Sprintf("%s happens twice (%s); runs on the first occurrence only", clockText(wall), back)
			case c.Recurring():
				f.Note = fmt.Sprintf("%s happens twice (%s); runs on both occurrences, this is the first", clockText(wall), back)
			default:
				f.Note = fmt.Sprintf("%s happens twice (%s); this is the first occurrence", clockText(wall), back)
			}
			return f
		}
	}
	if p.start != math.MinInt64 {
		if prev := periodAt(c.loc, p.start-1); prev.offset > p.offset && wall < p.start+prev.offset {
			f.DST, f.Occurrence = DSTRepeated, 2
			f.Note = fmt.Sprintf("%s happens twice (clocks went back from %s to %s); this is the second occurrence",
				clockText(wall), clockText(p.start+prev.offset), clockText(p.start+p.offset))
		}
	}
	return f
}

// civilText formats a civil time (see civil.go) as an RFC 3339 date and
// time without an offset.
func civilText(w int64) string {
	return time.Unix(w, 0).UTC().Format("2006-01-02T15:04:05")
}

// clockText formats the time of day of a civil time, for notes: 02:30,
// or 02:30:15 when the seconds are not zero.
func clockText(w int64) string {
	t := time.Unix(w, 0).UTC()
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}
