package calendar

import (
	"slices"
	"strings"
	"time"
)

// The reference evaluator: a second opinion on what a calendar allows,
// written the naive way. It reads a Spec directly (nothing of Compile),
// converts each instant to local fields with t.In, and checks each rule
// by comparing strings of local dates and times, one instant at a time.
// It is slow and has no notion of spans, periods or day numbers, which is
// the point.

// localFields is an instant as the reference sees it in one zone.
type localFields struct {
	date     string // "2026-03-29"
	dateTime string // "2026-03-29T02:30:00"
	clock    string // "02:30:00"
	year     int
	month    time.Month
	day      int
	weekday  time.Weekday
}

// fieldsOf is t in loc, taken apart.
func fieldsOf(t time.Time, loc *time.Location) localFields {
	lt := t.In(loc)
	y, m, d := lt.Date()
	hh, mm, ss := lt.Clock()
	// What fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d") would give,
	// without its cost: this runs for millions of seconds.
	b := []byte("0000-00-00T00:00:00")
	for i, v := range []int{y / 100, y % 100, int(m), d, hh, mm, ss} {
		at := []int{0, 2, 5, 8, 11, 14, 17}[i]
		b[at], b[at+1] = byte('0'+v/10), byte('0'+v%10)
	}
	dateTime := string(b)
	return localFields{
		date: dateTime[:10], dateTime: dateTime, clock: dateTime[11:],
		year: y, month: m, day: d, weekday: lt.Weekday(),
	}
}

// refCal is a spec and the reference calendars it extends, with its times
// written out with seconds and its days of the week looked up, once.
type refCal struct {
	spec    Spec
	loc     *time.Location
	extends []*refCal
	windows [][2]string // start, end: "2026-12-24T18:00:00"
	weekly  []refWeekly
	daily   [][2]string // start, end: "22:00:00"
}

// refWeekly is a Weekly entry with its days as a set and its times with
// seconds ("" for a whole day).
type refWeekly struct {
	days       [7]bool // by time.Weekday
	start, end string
}

func newRef(specs []Spec) map[string]*refCal {
	out := map[string]*refCal{}
	for _, s := range specs {
		loc := time.UTC
		if s.Timezone != "" {
			var err error
			if loc, err = time.LoadLocation(s.Timezone); err != nil {
				panic(err)
			}
		}
		r := &refCal{spec: s, loc: loc}
		for _, w := range s.Windows {
			r.windows = append(r.windows, [2]string{withSeconds(w.Start), withSeconds(w.End)})
		}
		for _, wk := range s.Weekly {
			rw := refWeekly{start: withSeconds(wk.Start), end: withSeconds(wk.End)}
			for _, d := range wk.Days {
				rw.days[refDayNames[strings.ToUpper(d)]] = true
			}
			r.weekly = append(r.weekly, rw)
		}
		for _, d := range s.Daily {
			r.daily = append(r.daily, [2]string{withSeconds(d.Start), withSeconds(d.End)})
		}
		out[s.Name] = r
	}
	for _, r := range out {
		for _, e := range r.spec.Extends {
			r.extends = append(r.extends, out[e])
		}
	}
	return out
}

// allowed reports whether every calendar down the extends allows t.
func (r *refCal) allowed(t time.Time) bool {
	listed := r.lists(fieldsOf(t, r.loc))
	if r.spec.Mode == "include" && !listed || r.spec.Mode != "include" && listed {
		return false
	}
	for _, e := range r.extends {
		if !e.allowed(t) {
			return false
		}
	}
	return true
}

// allowedFields is allowed for a calendar and its extends all in the
// zone f was taken in, which saves the conversion per calendar.
func (r *refCal) allowedFields(f localFields) bool {
	listed := r.lists(f)
	if r.spec.Mode == "include" && !listed || r.spec.Mode != "include" && listed {
		return false
	}
	for _, e := range r.extends {
		if !e.allowedFields(f) {
			return false
		}
	}
	return true
}

// withSeconds writes "18:00" as "18:00:00" and leaves "18:00:30" alone,
// so that times compare as strings.
func withSeconds(s string) string {
	if s != "" && strings.Count(s, ":") == 1 {
		return s + ":00"
	}
	return s
}

var refDayNames = map[string]time.Weekday{
	"SUN": time.Sunday, "MON": time.Monday, "TUE": time.Tuesday, "WED": time.Wednesday,
	"THU": time.Thursday, "FRI": time.Friday, "SAT": time.Saturday,
}

// inClock reports whether clock is in the stretch start-end of a day
// whose weekday counts (today) or of the day before (yesterday), where an
// end at or before the start runs into the next day.
func inClock(clock, start, end string, today, yesterday bool) bool {
	if end > start {
		return today && clock >= start && clock < end
	}
	return today && clock >= start || yesterday && clock < end
}

// refDays are the day rules the tests use, each checked by hand.
var refDays = map[string]func(f localFields) bool{
	"25 12 *":     func(f localFields) bool { return f.month == 12 && f.day == 25 },
	"1 1 *":       func(f localFields) bool { return f.month == 1 && f.day == 1 },
	"29 2 *":      func(f localFields) bool { return f.month == 2 && f.day == 29 },
	"* * SAT,SUN": func(f localFields) bool { return f.weekday == time.Saturday || f.weekday == time.Sunday },
	"* * MON#1":   func(f localFields) bool { return f.weekday == time.Monday && f.day <= 7 },
	"* * SUN#2":   func(f localFields) bool { return f.weekday == time.Sunday && f.day > 7 && f.day <= 14 },
	"L * *": func(f localFields) bool {
		// The last day: tomorrow is in another month.
		return time.Date(f.year, f.month, f.day+1, 12, 0, 0, 0, time.UTC).Month() != f.month
	},
	"* * *": func(localFields) bool { return true },
}

// lists reports whether any rule of the spec lists the local time f.
func (r *refCal) lists(f localFields) bool {
	if slices.Contains(r.spec.Dates, f.date) {
		return true
	}
	for _, w := range r.windows {
		if f.dateTime >= w[0] && f.dateTime < w[1] {
			return true
		}
	}
	yesterday := (f.weekday + 6) % 7
	for _, wk := range r.weekly {
		if wk.start == "" {
			if wk.days[f.weekday] {
				return true
			}
			continue
		}
		if inClock(f.clock, wk.start, wk.end, wk.days[f.weekday], wk.days[yesterday]) {
			return true
		}
	}
	for _, d := range r.daily {
		if inClock(f.clock, d[0], d[1], true, true) {
			return true
		}
	}
	for _, d := range r.spec.Days {
		match, ok := refDays[d]
		if !ok {
			panic("the reference knows no day rule " + d)
		}
		if match(f) {
			return true
		}
	}
	return false
}
