package calendar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tock-sched/tock/schedule"
)

// Compile checks specs, all the calendars that may be named together (a
// set of jobs' calendars and everything they extend), and returns them
// ready, by name. When anything is wrong it returns no calendars and an
// Errors holding a *FieldError for each problem, naming the calendar and
// the field as the API does:
//
//   - "name": empty, or the same as an earlier spec's.
//   - "timezone": not an IANA zone, or "Local", which would mean whatever
//     zone each server runs in.
//   - "mode": neither "exclude" nor "include" (empty is "exclude").
//   - "dates[i]": not a date of the form 2026-12-25 (2026-02-30 is not).
//   - "windows[i].start", "windows[i].end": not a local date and time of
//     the form 2026-12-24T18:00 or 2026-12-24T18:00:30, or an end that is
//     not after the start.
//   - "weekly[i].days", "weekly[i].days[j]": no day, or not a day's name.
//   - "weekly[i].start", "weekly[i].end", "daily[i].start",
//     "daily[i].end": not a time of day of the form 18:00 or 18:00:30, or
//     one of the two without the other (a daily entry needs both).
//   - "days[i]": not three cron day fields, or fields that match no day
//     (30 2 *), with the messages the schedule package gives jobs.
//   - "extends[i]": no calendar of that name among specs, or an extends
//     that closes a cycle (a calendar extending itself, directly or not).
func Compile(specs []Spec) (map[string]*Calendar, error) {
	var errs Errors
	cals := make([]*Calendar, len(specs))
	index := make(map[string]int, len(specs))
	zones := map[string]*time.Location{}
	for i, s := range specs {
		add := func(field, format string, args ...any) {
			errs = append(errs, &FieldError{Calendar: s.Name, Field: field, Message: fmt.Sprintf(format, args...)})
		}
		switch _, dup := index[s.Name]; {
		case s.Name == "":
			add("name", "a calendar needs a name")
		case dup:
			add("name", "another calendar is named %q", s.Name)
		default:
			index[s.Name] = i
		}
		cals[i] = compileSpec(s, zones, add)
	}

	// Resolve Extends, then look for cycles along the edges that resolved.
	edges := make([][]int, len(specs)) // -1 for a name that did not
	for i, s := range specs {
		for j, name := range s.Extends {
			k, ok := index[name]
			if !ok {
				errs = append(errs, &FieldError{Calendar: s.Name, Field: fmt.Sprintf("extends[%d]", j), Message: fmt.Sprintf("no calendar is named %q", name)})
				k = -1
			}
			edges[i] = append(edges[i], k)
		}
	}
	errs = append(errs, cycles(specs, edges)...)
	if len(errs) > 0 {
		return nil, errs
	}

	for i := range cals {
		for _, k := range edges[i] {
			cals[i].extends = append(cals[i].extends, cals[k])
		}
	}
	out := make(map[string]*Calendar, len(cals))
	for _, c := range cals {
		c.chain = chainOf(c, nil)
		out[c.name] = c
	}
	return out, nil
}

// chainOf appends c and everything it extends to chain, depth first,
// leaving out calendars already there.
func chainOf(c *Calendar, chain []*Calendar) []*Calendar {
	if slices.Contains(chain, c) {
		return chain
	}
	chain = append(chain, c)
	for _, e := range c.extends {
		chain = chainOf(e, chain)
	}
	return chain
}

// cycles returns an error for each extends that closes a cycle, on the
// calendar whose extends does, found by a depth-first walk in the order of
// specs.
func cycles(specs []Spec, edges [][]int) Errors {
	const (
		unseen = iota
		open   // on the walk's current path
		done
	)
	var errs Errors
	state := make([]int, len(specs))
	var path []int
	var walk func(i int)
	walk = func(i int) {
		state[i] = open
		path = append(path, i)
		for j, k := range edges[i] {
			switch {
			case k < 0:
			case state[k] == open:
				var names []string
				for _, p := range path[slices.Index(path, k):] {
					names = append(names, specs[p].Name)
				}
				names = append(names, specs[k].Name)
				errs = append(errs, &FieldError{
					Calendar: specs[i].Name,
					Field:    fmt.Sprintf("extends[%d]", j),
					Message:  "extends form a cycle: " + strings.Join(names, " → "),
				})
			case state[k] == unseen:
				walk(k)
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range specs {
		if state[i] == unseen {
			walk(i)
		}
	}
	return errs
}

// compileSpec turns one spec into a calendar (without what it extends),
// reporting each problem through add. zones keeps the zones loaded so
// far, so that calendars of one zone share its *time.Location.
func compileSpec(s Spec, zones map[string]*time.Location, add func(field, format string, args ...any)) *Calendar {
	c := &Calendar{name: s.Name, loc: time.UTC}
	switch s.Timezone {
	case "", "UTC":
	case "Local":
		add("timezone", `"Local" would mean whatever zone each server runs in; name an IANA zone such as "Europe/Berlin"`)
	default:
		loc, ok := zones[s.Timezone]
		if !ok {
			var err error
			if loc, err = time.LoadLocation(s.Timezone); err != nil {
				add("timezone", "%q is not an IANA time zone", s.Timezone)
				break
			}
			zones[s.Timezone] = loc
		}
		c.loc = loc
	}

	switch s.Mode {
	case "", ModeExclude:
	case ModeInclude:
		c.include = true
	default:
		add("mode", `want "exclude" or "include", not %q`, s.Mode)
	}

	if len(s.Dates) > 0 {
		var days []int64
		for i, d := range s.Dates {
			day, err := parseDate(d)
			if err != nil {
				add(fmt.Sprintf("dates[%d]", i), "%v", err)
				continue
			}
			days = append(days, day)
		}
		c.rules = append(c.rules, dateRuleOf(days))
	}

	for i, w := range s.Windows {
		f := fmt.Sprintf("windows[%d]", i)
		start, errStart := parseDateTime(w.Start)
		if errStart != nil {
			add(f+".start", "%v", errStart)
		}
		end, errEnd := parseDateTime(w.End)
		if errEnd != nil {
			add(f+".end", "%v", errEnd)
		}
		if errStart != nil || errEnd != nil {
			continue
		}
		if end <= start {
			add(f+".end", "%q is not after the start, %q", w.End, w.Start)
			continue
		}
		c.rules = append(c.rules, &windowRule{start: start, end: end, text: w.Start + "–" + w.End})
	}

	for i, wk := range s.Weekly {
		f := fmt.Sprintf("weekly[%d]", i)
		r := &clockRule{weekly: true}
		if len(wk.Days) == 0 {
			add(f+".days", "name at least one day, such as SAT")
		}
		for j, name := range wk.Days {
			d := slices.Index(weekdayNames[:], strings.ToUpper(name))
			if d < 0 {
				add(fmt.Sprintf("%s.days[%d]", f, j), "%q is not a day of the week; want one of MON, TUE, WED, THU, FRI, SAT, SUN", name)
				continue
			}
			r.days[d] = true
		}
		if wk.Start == "" && wk.End == "" {
			r.length = secondsPerDay
		} else if !clockTimes(r, f, wk.Start, wk.End, add) {
			continue
		}
		c.rules = append(c.rules, r.done())
	}

	for i, dl := range s.Daily {
		r := &clockRule{days: [7]bool{true, true, true, true, true, true, true}}
		if clockTimes(r, fmt.Sprintf("daily[%d]", i), dl.Start, dl.End, add) {
			c.rules = append(c.rules, r.done())
		}
	}

	for i, d := range s.Days {
		r, err := parseDays(d)
		if err != nil {
			add(fmt.Sprintf("days[%d]", i), "%v", err)
			continue
		}
		c.rules = append(c.rules, r)
	}
	return c
}

// clockTimes parses a Weekly or Daily entry's start and end into r,
// reporting problems under the entry's field f; it returns whether both
// were good.
func clockTimes(r *clockRule, f, start, end string, add func(field, format string, args ...any)) bool {
	s, errStart := parseClock(start)
	if errStart != nil {
		add(f+".start", "%v", errStart)
	}
	e, errEnd := parseClock(end)
	if errEnd != nil {
		add(f+".end", "%v", errEnd)
	}
	if errStart != nil || errEnd != nil {
		return false
	}
	r.start = s
	r.length = e - s
	if r.length <= 0 {
		// Ends on the next day; "00:00" to "00:00" is the whole day.
		r.length += secondsPerDay
	}
	r.times = " " + start + "–" + end
	return true
}

// done marks a rule whose stretches cover all time, and returns it.
func (r *clockRule) done() *clockRule {
	r.always = r.length == secondsPerDay && !slices.Contains(r.days[:], false)
	return r
}

// dateRuleOf merges days into runs of consecutive days.
func dateRuleOf(days []int64) *dateRule {
	slices.Sort(days)
	days = slices.Compact(days)
	r := &dateRule{}
	for _, d := range days {
		if n := len(r.runs); n > 0 && r.runs[n-1][1] == d {
			r.runs[n-1][1] = d + 1
		} else {
			r.runs = append(r.runs, [2]int64{d, d + 1})
		}
	}
	return r
}

// parseDate parses "2026-12-25" into a day number.
func parseDate(s string) (int64, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a date; want the form 2026-12-25", s)
	}
	return floorDiv(t.Unix(), secondsPerDay), nil
}

// parseDateTime parses a local date and time, "2026-12-24T18:00" or
// "2026-12-24T18:00:30", into wall time.
func parseDateTime(s string) (int64, error) {
	date, clock, ok := strings.Cut(s, "T")
	if ok {
		if d, err := parseDate(date); err == nil {
			if c, err := parseClock(clock); err == nil {
				return d*secondsPerDay + c, nil
			}
		}
	}
	if s == "" {
		return 0, errors.New("a local date and time is required, such as 2026-12-24T18:00")
	}
	return 0, fmt.Errorf("%q is not a local date and time; want the form 2026-12-24T18:00 or 2026-12-24T18:00:30, without an offset", s)
}

// parseClock parses a time of day, "18:00" or "18:00:30", into seconds
// after midnight.
func parseClock(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("a time of day is required, such as 18:00")
	}
	bad := fmt.Errorf("%q is not a time of day; want the form 18:00 or 18:00:30, from 00:00 to 23:59:59", s)
	if len(s) != 5 && (len(s) != 8 || s[5] != ':') || s[2] != ':' {
		return 0, bad
	}
	var parts [3]int64
	for i := 0; i*3 < len(s); i++ {
		a, b := s[i*3], s[i*3+1]
		if a < '0' || a > '9' || b < '0' || b > '9' {
			return 0, bad
		}
		parts[i] = int64(a-'0')*10 + int64(b-'0')
	}
	if parts[0] > 23 || parts[1] > 59 || parts[2] > 59 {
		return 0, bad
	}
	return parts[0]*3600 + parts[1]*60 + parts[2], nil
}

// parseDays compiles a day rule, "DOM MONTH DOW", through the schedule
// package, and words its errors in terms of the rule as written.
func parseDays(s string) (*daysRule, error) {
	fields := strings.Fields(s)
	if len(fields) != 3 {
		return nil, fmt.Errorf("%q: want three fields, day of month, month and day of week, such as \"25 12 *\"; found %d", s, len(fields))
	}
	text := strings.Join(fields, " ")
	cron := "0 0 0 " + text
	sched, err := schedule.Compile(schedule.Spec{Cron: cron})
	if err != nil {
		msg := err.Error()
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			msg = fe.Message
		}
		return nil, fmt.Errorf("%s", strings.ReplaceAll(msg, strconv.Quote(cron), strconv.Quote(text)))
	}
	return &daysRule{sched: sched, text: s}, nil
}
