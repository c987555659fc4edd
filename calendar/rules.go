package calendar

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/tock-sched/tock/schedule"
)

// Rules work on wall time: a local date and time of day as one integer,
// the seconds since 1970-01-01T00:00:00 on a clock that never changes
// offset. An instant's wall time is the instant plus its zone's offset at
// that instant; calendar.go maps stretches of wall time back to instants,
// zone period by zone period.

// secondsPerDay is the length of a day in wall time, DST or not: a local
// day is a day of wall time however many real seconds it holds.
const secondsPerDay = 86400

// wallMin and wallMax stand for "no bound" in wall time: far beyond any
// time a caller can pass, yet far enough from the int64 limits that adding
// a day or a zone offset cannot overflow.
const (
	wallMin = -1 << 62
	wallMax = 1 << 62
)

// A rule is one entry of a calendar (all its dates together, a window, a
// weekly or daily entry, a day rule): a set of stretches of wall time.
type rule interface {
	// span returns the first stretch [start, end) of wall time the rule
	// lists that ends after w, or ok false when there is none. The
	// stretch holds w when start <= w; otherwise it is the next one.
	// Adjacent stretches may come back one by one.
	span(w int64) (start, end int64, ok bool)
	// reason says which of the rule's stretches holds w (one that span
	// says is listed), in words for Why.
	reason(w int64) string
}

// floorDiv is integer division rounding toward negative infinity, so that
// wall times before 1970 land in the right day.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// weekday returns the day of the week (0 = Sunday) of a day number;
// 1970-01-01 was a Thursday.
func weekday(day int64) int {
	w := (day + 4) % 7
	if w < 0 {
		w += 7
	}
	return int(w)
}

var weekdayNames = [7]string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// dateString formats a day number as "2006-01-02".
func dateString(day int64) string {
	return time.Unix(day*secondsPerDay, 0).UTC().Format(time.DateOnly)
}

// dateRule is all of a calendar's Dates: runs of consecutive days
// [first, end), as day numbers, sorted and merged.
type dateRule struct {
	runs [][2]int64
}

func (r *dateRule) span(w int64) (int64, int64, bool) {
	d := floorDiv(w, secondsPerDay)
	i := sort.Search(len(r.runs), func(i int) bool { return r.runs[i][1] > d })
	if i == len(r.runs) {
		return 0, 0, false
	}
	return r.runs[i][0] * secondsPerDay, r.runs[i][1] * secondsPerDay, true
}

func (r *dateRule) reason(w int64) string {
	return "date " + dateString(floorDiv(w, secondsPerDay))
}

// windowRule is one dated window [start, end) of wall time.
type windowRule struct {
	start, end int64
	text       string // "2026-12-24T18:00–2026-12-27T06:00", as written
}

func (r *windowRule) span(w int64) (int64, int64, bool) {
	if w >= r.end {
		return 0, 0, false
	}
	return r.start, r.end, true
}

func (r *windowRule) reason(int64) string {
	return "window " + r.text
}

// clockRule is a Weekly or Daily entry: on each day whose weekday it
// names, the stretch from start seconds after midnight for length seconds
// (up to a whole day, so it may run into the next day).
type clockRule struct {
	days   [7]bool
	start  int64
	length int64 // in (0, secondsPerDay]
	// always is set when the stretches cover all time (every day, whole
	// days), so a search crosses them in one step rather than day by day.
	always bool
	weekly bool   // a Weekly entry, whose reason names the day
	times  string // " 22:00–02:00" as written, or "" for whole days
}

func (r *clockRule) span(w int64) (int64, int64, bool) {
	if r.always {
		return wallMin, wallMax, true
	}
	// A stretch is at most a day long, so the one holding w started on
	// w's day or the day before; the next one starts within a week.
	today := floorDiv(w, secondsPerDay)
	for d := today - 1; d <= today+7; d++ {
		if !r.days[weekday(d)] {
			continue
		}
		start := d*secondsPerDay + r.start
		if end := start + r.length; end > w {
			return start, end, true
		}
	}
	return 0, 0, false // no day named, which Compile refuses
}

func (r *clockRule) reason(w int64) string {
	if !r.weekly {
		return "daily" + r.times
	}
	// The day the stretch holding w started on.
	d := floorDiv(w-r.start, secondsPerDay)
	return "weekly " + weekdayNames[weekday(d)] + r.times
}

// daysRule is a cron-style day rule, "DOM MONTH DOW", evaluated by the
// schedule package as the cron expression "0 0 0 DOM MONTH DOW" in UTC:
// a wall day matches when that expression runs at its midnight. This
// keeps the day fields' meaning (L, nW, DAY#n, the Vixie rule joining the
// two day fields) the same as in jobs' schedules.
type daysRule struct {
	sched *schedule.Schedule
	text  string // as written
	// last is the previous answer of span, which holds for every wall
	// time from the midnight before the one asked about to the end of
	// the day found: callers ask about nearby times over and over
	// (Allowed for each run of a schedule, a search stepping through a
	// day), and each new answer costs a cron search.
	last atomic.Pointer[daysSpan]
}

// daysSpan is an answer of daysRule.span: the day [start, end) is the
// first matching day ending after any wall time in [from, end).
type daysSpan struct {
	from, start, end int64
}

func (r *daysRule) span(w int64) (int64, int64, bool) {
	if l := r.last.Load(); l != nil && l.from <= w && w < l.end {
		return l.start, l.end, true
	}
	d := floorDiv(w, secondsPerDay)
	next, ok := r.sched.Next(time.Unix(d*secondsPerDay-1, 0))
	if !ok {
		return 0, 0, false
	}
	start := floorDiv(next.Unix(), secondsPerDay) * secondsPerDay
	r.last.Store(&daysSpan{from: d * secondsPerDay, start: start, end: start + secondsPerDay})
	return start, start + secondsPerDay, true
}

func (r *daysRule) reason(int64) string {
	return fmt.Sprintf("days %q", r.text)
}
