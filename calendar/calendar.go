package calendar

import (
	"math"
	"time"
)

// Calendar is a compiled Spec, ready to say which instants it allows. Get
// one from Compile; the zero value is not usable. It is immutable and
// safe for concurrent use.
type Calendar struct {
	name    string
	loc     *time.Location
	include bool
	rules   []rule
	extends []*Calendar // as Extends names them
	// chain is the calendar itself and then everything it extends,
	// directly or not, each once (depth first, in the order of Extends):
	// an instant is allowed when every calendar of the chain allows it
	// by its own rules.
	chain []*Calendar
}

// Name returns the calendar's name.
func (c *Calendar) Name() string { return c.name }

// Location returns the zone the calendar's rules are read in.
func (c *Calendar) Location() *time.Location { return c.loc }

// Allowed reports whether instant t is allowed by c and everything it
// extends. Only t's whole second counts: every rule is at second
// granularity.
func (c *Calendar) Allowed(t time.Time) bool {
	u := t.Unix()
	var w wallCache
	for _, k := range c.chain {
		r := k.listing(w.of(k.loc, u))
		if (r != nil) != k.include {
			return false
		}
	}
	return true
}

// NextAllowed returns the first instant at or after t that c allows,
// and ok false when there is none at or before limit. It returns t itself
// when c allows it, and otherwise the start of a whole second, in t's
// location. It steps from the end of one listed stretch of time to the
// next, never second by second, so an excluded weekend costs a handful of
// steps and ten years of nothing allowed a few thousand at most.
func (c *Calendar) NextAllowed(t, limit time.Time) (time.Time, bool) {
	return nextAllowed(c.chain, t, limit)
}

// Why says which rule keeps t from being allowed: the name of the
// calendar (c or one it extends, the first of them that refuses t) and a
// short reason, such as "date 2026-12-25", "weekly SAT", "weekly SAT
// 22:00–02:00", "window 2026-12-24T18:00–2026-12-27T06:00", "daily
// 22:00–06:00", `days "L * *"`, or "not in an include calendar". Of
// several rules listing t, it names the first in the order dates,
// windows, weekly, daily, days, each in the order written. Both are ""
// when c allows t.
func (c *Calendar) Why(t time.Time) (calendar, reason string) {
	u := t.Unix()
	var wc wallCache
	for _, k := range c.chain {
		w := wc.of(k.loc, u)
		r := k.listing(w)
		switch {
		case k.include && r == nil:
			return k.name, "not in an include calendar"
		case !k.include && r != nil:
			return k.name, r.reason(w)
		}
	}
	return "", ""
}

// FirstAllowed returns the first time next yields after `after` that every
// calendar in cals allows, searching no further than limit; ok is false
// when there is none. next is a sorted source of candidate times, such as
// a schedule's Next: next(x) returns the first candidate strictly after x.
//
// Where a candidate is not allowed, FirstAllowed does not try the
// candidates after it one by one: it finds the first allowed instant a
// with NextAllowed and asks next for the first candidate at or after a.
// An every-second schedule across an excluded month so costs a few calls
// to next, not millions.
//
// skipped counts the candidates FirstAllowed found not allowed, each a run
// that really is skipped: 0 exactly when the first candidate is allowed.
// It is a lower bound of the candidates passed over, because those after
// a refused one and before the next allowed instant are jumped over
// without being asked for; each jump counts one.
func FirstAllowed(cals []*Calendar, next func(after time.Time) (time.Time, bool), after, limit time.Time) (t time.Time, skipped int, ok bool) {
	var chain []*Calendar
	for _, c := range cals {
		chain = appendChain(chain, c)
	}
	cand, ok := next(after)
	for ok && !cand.After(limit) {
		a, found := nextAllowed(chain, cand, limit)
		if !found {
			return time.Time{}, skipped, false
		}
		if a.Equal(cand) {
			return cand, skipped, true
		}
		skipped++
		prev := cand
		cand, ok = next(a.Add(-time.Nanosecond))
		if ok && !cand.After(prev) {
			// A source that does not move forward would loop forever.
			return time.Time{}, skipped, false
		}
	}
	return time.Time{}, skipped, false
}

// appendChain appends c's chain to chain, leaving out the calendars
// already there.
func appendChain(chain []*Calendar, c *Calendar) []*Calendar {
	for _, k := range c.chain {
		seen := false
		for _, x := range chain {
			if x == k {
				seen = true
				break
			}
		}
		if !seen {
			chain = append(chain, k)
		}
	}
	return chain
}

// nextAllowed returns the first instant at or after t that every calendar
// of chain allows by its own rules, at or before limit.
func nextAllowed(chain []*Calendar, t, limit time.Time) (time.Time, bool) {
	if t.After(limit) {
		return time.Time{}, false
	}
	// A whole second u is at or before limit exactly when u <= lim.
	lim := limit.Unix()
	u0 := t.Unix()
	u := u0
	// Each calendar moves u to its own next allowed second; once a whole
	// round moves nothing, every calendar allows u. u only grows, and
	// each move crosses a stretch that one calendar refuses.
	for moved := true; moved; {
		moved = false
		for _, k := range chain {
			v, ok := k.nextOwn(u, lim)
			if !ok {
				return time.Time{}, false
			}
			if v != u {
				u, moved = v, true
			}
		}
	}
	if u == u0 {
		return t, true
	}
	return time.Unix(u, 0).In(t.Location()), true
}

// wallCache keeps an instant's wall time in the last zone asked about:
// the calendars of a chain mostly share one zone (Compile gives calendars
// of the same zone name one *time.Location).
type wallCache struct {
	loc  *time.Location
	wall int64
}

// of returns instant u's wall time in loc.
func (wc *wallCache) of(loc *time.Location, u int64) int64 {
	if loc != wc.loc {
		_, off := time.Unix(u, 0).In(loc).Zone()
		wc.loc, wc.wall = loc, u+int64(off)
	}
	return wc.wall
}

// listing returns the first of c's own rules that lists wall time w, or
// nil for none.
func (c *Calendar) listing(w int64) rule {
	for _, r := range c.rules {
		if start, _, ok := r.span(w); ok && start <= w {
			return r
		}
	}
	return nil
}

// nextOwn returns the first second at or after u that c's own rules
// allow, if it is at or before lim.
func (c *Calendar) nextOwn(u, lim int64) (int64, bool) {
	if c.include {
		return c.nextListed(u, lim)
	}
	return c.nextUnlisted(u, lim)
}

// nextListed returns the first second at or after u that one of c's rules
// lists, if it is at or before lim.
//
// Within a zone period, where the offset holds still, instants and wall
// times map one to one and in order, so the first listed wall time at or
// after u's is the answer if it falls in the period. Otherwise the search
// goes on from the next period, whose wall times may start earlier (the
// clocks went back) or later (they jumped forward).
func (c *Calendar) nextListed(u, lim int64) (int64, bool) {
	for u <= lim {
		off, end := zonePeriod(c.loc, u)
		w := u + off
		best := int64(wallMax)
		for _, r := range c.rules {
			if start, _, ok := r.span(w); ok {
				best = min(best, max(start, w))
			}
		}
		if x := best - off; x < end {
			return x, x <= lim
		}
		u = end
	}
	return 0, false
}

// nextUnlisted returns the first second at or after u that none of c's
// rules lists, if it is at or before lim: within a zone period it steps
// from the end of one listed stretch to the end of the next stretch that
// holds it, until no rule holds the wall time reached.
func (c *Calendar) nextUnlisted(u, lim int64) (int64, bool) {
	for u <= lim {
		off, end := zonePeriod(c.loc, u)
		w := u + off
		for {
			moved := false
			for _, r := range c.rules {
				if start, stop, ok := r.span(w); ok && start <= w {
					w, moved = stop, true
				}
			}
			x := w - off
			if !moved {
				return x, x <= lim
			}
			if x >= end {
				break // listed to the end of the period
			}
			if x > lim {
				return 0, false
			}
		}
		u = end
	}
	return 0, false
}

// zonePeriod returns the offset (seconds east of UTC) of loc at instant u
// and the end of the period over which loc keeps it: the next instant at
// which the offset may change, math.MaxInt64 when it never does.
//
// It does not take Time.ZoneBounds at its word. Past a zone's last listed
// transition Go derives periods from the zone's TZ rule, and there, in the
// last UTC day of a leap year, ZoneBounds reports an end before the
// instant asked about (golang/go#81583, as the schedule package found);
// a search that stepped to that end would never move. Rule-derived
// periods change offset only at the rule's two yearly transitions, so
// such a period really runs on to the next new year (UTC); we check that
// much and otherwise claim no more than u itself.
func zonePeriod(loc *time.Location, u int64) (offset, end int64) {
	t := time.Unix(u, 0).In(loc)
	_, off := t.Zone()
	end = math.MaxInt64
	if _, e := t.ZoneBounds(); !e.IsZero() {
		end = e.Unix()
	}
	if end <= u {
		y := time.Unix(u, 0).UTC().Year()
		end = time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
		if _, o := time.Unix(end-1, 0).In(loc).Zone(); o != off {
			end = u + 1
		}
	}
	return int64(off), end
}

// Period is a stretch of time a calendar does not allow, from Start up to
// but not including End, with the calendar and rule that keep its start
// from being allowed (Why).
type Period struct {
	Start, End       time.Time
	Calendar, Reason string
}

// Periods lists, in order, the stretches of time from `from` up to `to`
// that c (with what it extends) does not allow, at most max of them, in
// UTC. Stretches that touch are one, named by the rule at its start; the
// last is cut at `to`. Like NextAllowed, it steps from one stretch to the
// next, never second by second.
func (c *Calendar) Periods(from, to time.Time, max int) []Period {
	lim := to.Unix()
	u := from.Unix()
	var out []Period
	for u < lim && len(out) < max {
		// The first second at or after u that some calendar of the chain
		// refuses by its own rules.
		start, found := int64(math.MaxInt64), false
		for _, k := range c.chain {
			var v int64
			var ok bool
			if k.include {
				v, ok = k.nextUnlisted(u, lim)
			} else {
				v, ok = k.nextListed(u, lim)
			}
			if ok && v < start {
				start, found = v, true
			}
		}
		if !found || start >= lim {
			break
		}
		s := time.Unix(start, 0).UTC()
		end, ok := nextAllowed(c.chain, s, to)
		if !ok {
			end = to
		}
		cal, why := c.Why(s)
		out = append(out, Period{Start: s, End: end.UTC(), Calendar: cal, Reason: why})
		if !ok {
			break
		}
		u = end.Unix()
	}
	return out
}
