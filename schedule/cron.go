package schedule

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts 5 fields (minute first) or 6 (second first) and the
// descriptors. robfig parses; the search for run times is ours (cronSpec
// below), because robfig's own Next skips runs in the spring-forward gap.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is the bit robfig sets in a field's mask when the field is "*"
// or "?" (with no step above 1). Day matching depends on it, as in Vixie
// cron: when either day field is a star both must match, otherwise either
// may.
const starBit = 1 << 63

// horizonYears bounds the search for the next run. Any possible expression
// runs within it, bar February 29 around a skipped leap year (2100).
const horizonYears = 5

// maxDelay caps "in" and "@every" at ten years: anything longer is almost
// surely a mistake, and the cap keeps run times far from the year 9999
// limit of JSON and RFC 3339.
const maxDelay = 10 * 365 * 24 * time.Hour

// cronSpec is a parsed cron expression: the fields as bit masks (bit i set
// when value i matches) and how the job behaves around DST changes.
type cronSpec struct {
	second, minute, hour, dom, month, dow uint64
	// wall reports that the second, minute or hour field begins with "*":
	// the job follows the wall clock through DST changes. Otherwise it names
	// fixed times of day, each run once per day (see firstInstant).
	wall bool
}

// parseCron parses expr (already trimmed) into either a field spec or, for
// "@every", an interval; exactly one of the results is set on success.
func parseCron(expr string) (*cronSpec, time.Duration, error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, 0, fmt.Errorf("a TZ= or CRON_TZ= prefix is not allowed in %q; set schedule.timezone instead", expr)
	}
	fields := strings.Fields(expr)
	if strings.HasPrefix(expr, "@") {
		if fields[0] == "@every" {
			d, err := parseEvery(fields)
			return nil, d, err
		}
		if len(fields) != 1 {
			return nil, 0, fmt.Errorf("unrecognized descriptor %q", expr)
		}
		s, err := parser.Parse(fields[0])
		if err != nil {
			return nil, 0, fmt.Errorf("unrecognized descriptor %q: want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>", expr)
		}
		// Of the descriptors only @hourly has a star (its hour), so it
		// follows the wall clock like "0 0 * * * *"; the others name a
		// fixed time of day.
		return fromRobfig(s.(*cron.SpecSchedule), fields[0] == "@hourly"), 0, nil
	}

	// Count the fields ourselves: robfig's message for a wrong count lists
	// the fields back in Go syntax.
	switch len(fields) {
	case 5:
		// Minute first; the second is 0, a fixed value.
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, 0, fmt.Errorf("expected 5 or 6 fields, found %d", len(fields))
	}
	s, err := parser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, 0, fmt.Errorf("invalid expression %q: %v", expr, err)
	}
	// Vixie cron decides by the first character of the field, so "*/5" is
	// a wildcard but "0-59/5" is not. robfig treats "?" as "*"; so do we.
	wall := false
	for _, f := range fields[:3] {
		if strings.HasPrefix(f, "*") || strings.HasPrefix(f, "?") {
			wall = true
		}
	}
	c := fromRobfig(s.(*cron.SpecSchedule), wall)
	if !c.possible() {
		return nil, 0, fmt.Errorf("%q never runs: no month it names has the day of month it names", expr)
	}
	return c, 0, nil
}

// parseEvery parses the fields of "@every <duration>". The interval must be
// whole seconds, as cron run times are; robfig would silently round.
func parseEvery(fields []string) (time.Duration, error) {
	if len(fields) != 2 {
		return 0, fmt.Errorf("@every takes one duration, such as \"@every 90s\" or \"@every 1h30m\"")
	}
	d, err := time.ParseDuration(fields[1])
	switch {
	case err != nil:
		return 0, fmt.Errorf("@every: invalid duration %q, want one such as \"90s\" or \"1h30m\"", fields[1])
	case d < time.Second:
		return 0, fmt.Errorf("@every: interval %s is shorter than 1s", d)
	case d%time.Second != 0:
		return 0, fmt.Errorf("@every: interval %s is not a whole number of seconds", d)
	case d > maxDelay:
		return 0, fmt.Errorf("@every: interval %s is longer than %s (10 years)", d, maxDelay)
	}
	return d, nil
}

func fromRobfig(s *cron.SpecSchedule, wall bool) *cronSpec {
	return &cronSpec{
		second: s.Second, minute: s.Minute, hour: s.Hour,
		dom: s.Dom, month: s.Month, dow: s.Dow,
		wall: wall,
	}
}

// possible reports whether the expression names at least one real date.
// Only a day of month can be impossible (February 30, April 31); when both
// day fields are restricted either may match, and every month has every
// weekday.
func (c *cronSpec) possible() bool {
	if c.dom&starBit == 0 && c.dow&starBit == 0 {
		return true
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) == 0 {
			continue
		}
		longest := daysIn(2000, m) // a leap year: February 29 counts
		if nextBit(c.dom, 1, longest) >= 0 {
			return true
		}
	}
	return false
}

// nextBit returns the lowest value v in [from, max] whose bit is set in
// mask, or -1.
func nextBit(mask uint64, from, max int) int {
	if from > max {
		return -1
	}
	m := mask & (^uint64(0) << from) & (^uint64(0) >> (63 - max))
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// dayMatches applies the day-of-month and day-of-week fields to one date.
func (c *cronSpec) dayMatches(d, wd int) bool {
	domOK := c.dom&(1<<d) != 0
	dowOK := c.dow&(1<<wd) != 0
	if c.dom&starBit != 0 || c.dow&starBit != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextCivil returns the first civil time at or after w (civil seconds, see
// civil.go) that the fields match, giving up after the end of year maxYear.
// It moves field by field from the largest, jumping straight to the next
// set bit, so its cost does not depend on how sparse the expression is.
func (c *cronSpec) nextCivil(w int64, maxYear int64) (int64, bool) {
	days := floorDiv(w, secondsPerDay)
	sod := int(w - days*secondsPerDay)
	y, mo, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60

	// Each step either accepts the current value of a field or moves to a
	// later time and starts over from the month; a field that overflows
	// (minute 60, day 32, month 13) makes the next larger field move on.
	for y <= maxYear {
		m := nextBit(c.month, mo, 12)
		if m < 0 {
			y, mo, d, h, mi, s = y+1, 1, 1, 0, 0, 0
			continue
		}
		if m != mo {
			mo, d, h, mi, s = m, 1, 0, 0, 0
		}

		dd := c.nextDay(y, mo, d)
		if dd < 0 {
			mo, d, h, mi, s = mo+1, 1, 0, 0, 0
			continue
		}
		if dd != d {
			d, h, mi, s = dd, 0, 0, 0
		}

		hh := nextBit(c.hour, h, 23)
		if hh < 0 {
			d, h, mi, s = d+1, 0, 0, 0
			continue
		}
		if hh != h {
			h, mi, s = hh, 0, 0
		}

		mm := nextBit(c.minute, mi, 59)
		if mm < 0 {
			h, mi, s = h+1, 0, 0
			continue
		}
		if mm != mi {
			mi, s = mm, 0
		}

		ss := nextBit(c.second, s, 59)
		if ss < 0 {
			mi, s = mi+1, 0
			continue
		}
		return civilSeconds(y, mo, d, h, mi, ss), true
	}
	return 0, false
}

// nextDay returns the first day from d on in month mo of year y that the
// day fields match, or -1.
func (c *cronSpec) nextDay(y int64, mo, d int) int {
	n := daysIn(y, mo)
	if d > n {
		return -1
	}
	wd := weekday(daysFromCivil(y, mo, d))
	for ; d <= n; d++ {
		if c.dayMatches(d, wd) {
			return d
		}
		wd = (wd + 1) % 7
	}
	return -1
}

// next returns the first run strictly after instant a (Unix seconds,
// fractions already dropped, so "after a" means "at or after a+1") in loc.
func (c *cronSpec) next(loc *time.Location, a int64) (int64, bool) {
	if c.wall {
		return c.nextWall(loc, a)
	}
	return c.nextFixed(loc, a)
}

// nextWall finds the first instant after a whose wall clock matches. Within
// a zone period wall time and instants advance together, so we search the
// period's wall times and, if the match lies past the period's end, carry
// on from the start of the next period. A forward jump thus skips the wall
// times in its gap, and a backward jump replays the repeated ones.
func (c *cronSpec) nextWall(loc *time.Location, a int64) (int64, bool) {
	u := a + 1
	p := periodAt(loc, u)
	maxYear := civilYear(u+p.offset) + horizonYears
	for {
		w, ok := c.nextCivil(u+p.offset, maxYear)
		if !ok {
			return 0, false
		}
		if x := w - p.offset; x < p.end {
			return x, true
		}
		u = p.end
		p = periodAt(loc, u)
	}
}

// nextFixed finds the first run after a of a job at fixed times of day:
// each matching wall time runs at firstInstant, a function of the wall time
// that never decreases, so the answer is firstInstant of the first matching
// wall time whose firstInstant is after a.
//
// No wall time up to a's own wall clock qualifies (firstInstant of a's wall
// clock is at most a), so the search starts just after it. If a lies in the
// second pass of a repeated hour, the wall times still left in that hour
// ran in the first pass; skip them.
func (c *cronSpec) nextFixed(loc *time.Location, a int64) (int64, bool) {
	p := periodAt(loc, a)
	w := a + p.offset + 1
	if p.start != minInt64 {
		// The previous period must cover the wall times we skip (it always
		// does unless two transitions come within hours of each other).
		prev := periodAt(loc, p.start-1)
		if prev.offset > p.offset && (prev.start == minInt64 || prev.start <= w-prev.offset) {
			w = max(w, p.start+prev.offset)
		}
	}
	maxYear := civilYear(w) + horizonYears
	for {
		var ok bool
		if w, ok = c.nextCivil(w, maxYear); !ok {
			return 0, false
		}
		if x := firstInstant(loc, w); x > a {
			return x, true
		}
		// Only the second pass of a repeated hour gets here, and only when
		// the skip above could not be proven safe; step on.
		w++
	}
}

const minInt64 = -1 << 63

// civilYear returns the year of a civil time.
func civilYear(w int64) int64 {
	y, _, _ := civilFromDays(floorDiv(w, secondsPerDay))
	return y
}
