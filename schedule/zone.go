package schedule

import (
	"math"
	"time"
)

// A zone period is a stretch of instants [start, end) (Unix seconds) over
// which a location keeps one UTC offset. Within a period civil time and
// instants map one to one and in order; all DST handling happens at period
// boundaries. We walk periods ourselves instead of asking time.Date for a
// civil time, because time.Date leaves the answer for skipped and repeated
// wall times unspecified.
type period struct {
	offset     int64 // seconds east of UTC
	start, end int64 // math.MinInt64 / math.MaxInt64 when unbounded
}

// maxZoneReach bounds how far an instant can be from its civil time: real
// offsets stay within ±15h (some historical local mean times came close),
// so an instant holding civil time w lies in (w-maxZoneReach, w+maxZoneReach).
const maxZoneReach = 26 * 3600

// periodAt returns the period of loc that holds instant u.
//
// It does not take Time.ZoneBounds at its word. Past a zone's last listed
// transition Go derives periods from the zone's TZ rule, and there, in the
// last UTC day of a leap year, ZoneBounds reports an end before the
// instant asked about (golang/go#81583); a search that stepped to that end
// would never move. Rule-derived periods change offset only at the rule's
// two yearly transitions, so such a period really runs on to the next new
// year (UTC); we check that much and otherwise claim no more than u itself.
// Boundaries where the offset does not change (Go also reports one at
// every new year there) are harmless to every caller.
func periodAt(loc *time.Location, u int64) period {
	t := time.Unix(u, 0).In(loc)
	_, off := t.Zone()
	p := period{offset: int64(off), start: math.MinInt64, end: math.MaxInt64}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		p.start = min(start.Unix(), u)
	}
	if !end.IsZero() {
		p.end = end.Unix()
	}
	if p.end <= u {
		y := time.Unix(u, 0).UTC().Year()
		p.end = time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
		if _, o := time.Unix(p.end-1, 0).In(loc).Zone(); o != off {
			p.end = u + 1
		}
	}
	return p
}

// firstInstant returns the instant a fixed-time job scheduled at civil time
// w runs at: the earliest instant whose wall clock reads w (the first pass
// of a repeated hour), or, when w was skipped by a forward jump, the first
// instant after that gap.
func firstInstant(loc *time.Location, w int64) int64 {
	// Walk periods in instant order, starting early enough that the first
	// one cannot begin after w's instant.
	u := w - maxZoneReach
	for {
		p := periodAt(loc, u)
		x := w - p.offset
		if x < p.start {
			// w comes before this period's first wall time, yet (as the
			// previous period did not hold it) after the previous period's
			// last one: w lies in the gap that ends where this period starts.
			return p.start
		}
		if x < p.end {
			return x
		}
		u = p.end
	}
}
