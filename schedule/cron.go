package schedule

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts 5 fields (minute first) or 6 (second first) and the
// descriptors. robfig parses; the search for run times is ours (cronSpec
// below), because robfig's own Next skips runs in the spring-forward gap.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is the bit robfig sets in a field's mask when the field is "*"
// or "?" (with no step above 1). Only the descriptors are read through it
// (see fromRobfig); for fields we decide star-ness ourselves, by the first
// character, as Vixie cron does.
const starBit = 1 << 63

// horizonYears bounds the search for the next run. Every expression that
// Compile accepts runs within it: the rarest dates are February 29 on a
// given weekday ("0 0 9 ? 2 MON#5", "0 0 9 29 2 */7"), which, once 2100
// skips a leap year, can be 40 years apart (Saturdays: 2076, then 2116).
// Only a job whose every match falls in a skipped DST hour can exhaust it.
const horizonYears = 40

// maxDelay caps "in" and "@every" at ten years: anything longer is almost
// surely a mistake, and the cap keeps run times far from the year 9999
// limit of JSON and RFC 3339.
const maxDelay = 10 * 365 * 24 * time.Hour

// cronSpec is a parsed cron expression: the fields as bit masks (bit i set
// when value i matches), the day forms that depend on the month (L, nW,
// DAY#n, DAYL), and how the job behaves around DST changes.
type cronSpec struct {
	second, minute, hour, dom, month, dow uint64

	// domStar and dowStar report that the day field begins with "*" or
	// "?". If either does, a day must match both fields; otherwise either
	// field may match (Vixie cron's rule).
	domStar, dowStar bool
	// domForms and dowForms are the day forms of each field, matched in
	// addition to the field's mask (a list is a union).
	domForms, dowForms []dayForm
	// dowDays[w] has bit d set when day d of a month whose 1st is weekday
	// w (0 = Sunday) matches the dow mask.
	dowDays [7]uint64

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

	// robfig knows neither L, W nor #: take those forms out of the day
	// fields and let robfig parse the rest.
	domPlain, domForms, err := splitDayField(fields[3], parseDomForm)
	if err != nil {
		return nil, 0, fmt.Errorf("invalid expression %q: day of month %w", expr, err)
	}
	dowPlain, dowForms, err := splitDayField(fields[5], parseDowForm)
	if err != nil {
		return nil, 0, fmt.Errorf("invalid expression %q: day of week %w", expr, err)
	}
	plain := slices.Clone(fields)
	if domPlain != "" {
		plain[3] = domPlain
	} else {
		plain[3] = "*" // masked out below
	}
	if dowPlain != "" {
		plain[5] = dowPlain
	} else {
		plain[5] = "*"
	}
	s, err := parser.Parse(strings.Join(plain, " "))
	if err != nil {
		return nil, 0, fmt.Errorf("invalid expression %q: %v", expr, err)
	}

	// Vixie cron decides by the first character of the field, so "*/5" is
	// a wildcard but "0-59/5" is not. robfig treats "?" as "*"; so do we.
	star := func(f string) bool { return f[0] == '*' || f[0] == '?' }
	wall := star(fields[0]) || star(fields[1]) || star(fields[2])
	rs := s.(*cron.SpecSchedule)
	c := &cronSpec{
		second: rs.Second, minute: rs.Minute, hour: rs.Hour, month: rs.Month,
		dom: rs.Dom &^ starBit, dow: rs.Dow &^ starBit,
		domStar: star(fields[3]), dowStar: star(fields[5]),
		domForms: domForms, dowForms: dowForms,
		wall: wall,
	}
	if domPlain == "" {
		c.dom = 0
	}
	if dowPlain == "" {
		c.dow = 0
	}
	c.fillDowDays()
	if !c.possible() {
		msg := fmt.Sprintf("%q never runs: no date matches its month and day fields", expr)
		starred := fields[3]
		if c.dowStar {
			starred = fields[5]
		}
		if c.domStar != c.dowStar && starred != "*" && starred != "?" {
			// "*/20 * MON#2": say why the fields are not joined by "or".
			msg += fmt.Sprintf(" (%q starts with %c, so both day fields must match)", starred, starred[0])
		}
		return nil, 0, fmt.Errorf("%s", msg)
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

// fromRobfig converts a descriptor's schedule, whose star bits are exact
// (@weekly is "0 0 0 * * 0", @monthly "0 0 0 1 * *").
func fromRobfig(s *cron.SpecSchedule, wall bool) *cronSpec {
	c := &cronSpec{
		second: s.Second, minute: s.Minute, hour: s.Hour,
		dom: s.Dom &^ starBit, month: s.Month, dow: s.Dow &^ starBit,
		domStar: s.Dom&starBit != 0, dowStar: s.Dow&starBit != 0,
		wall: wall,
	}
	c.fillDowDays()
	return c
}

// fillDowDays fills dowDays from dow.
func (c *cronSpec) fillDowDays() {
	for w := range c.dowDays {
		var m uint64
		for d := 1; d <= 31; d++ {
			if c.dow&(1<<((w+d-1)%7)) != 0 {
				m |= 1 << d
			}
		}
		c.dowDays[w] = m
	}
}

// possible reports whether the expression names at least one real date.
// Which days of a month match depends only on the month, its length and
// the weekday of its 1st, and in the 400 years after which the Gregorian
// calendar repeats every month takes each of its lengths starting on each
// weekday; so trying those combinations is exact.
func (c *cronSpec) possible() bool {
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) == 0 {
			continue
		}
		// 2001 is a common year, 2000 a leap year.
		for n := daysIn(2001, m); n <= daysIn(2000, m); n++ {
			for w := range 7 {
				if c.days(n, w) != 0 {
					return true
				}
			}
		}
	}
	return false
}

// days returns the days that the day fields match in a month of n days
// whose 1st is weekday first (0 = Sunday), as a mask with bit d set for
// day d.
func (c *cronSpec) days(n, first int) uint64 {
	dom, dow := c.dom, c.dowDays[first]
	for _, f := range c.domForms {
		dom |= f.day(n, first)
	}
	for _, f := range c.dowForms {
		dow |= f.day(n, first)
	}
	var m uint64
	if c.domStar || c.dowStar {
		m = dom & dow
	} else {
		m = dom | dow
	}
	return m & (1<<(n+1) - 2)
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
	return nextBit(c.days(n, weekday(daysFromCivil(y, mo, 1))), d, n)
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
