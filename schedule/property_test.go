package schedule

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

var testZones = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Asia/Tokyo", "Asia/Kolkata",
	"Australia/Sydney", "Australia/Lord_Howe", "America/Sao_Paulo", "America/Santiago", "Pacific/Apia",
}

// randField returns a random cron field over [lo, hi], mixing every shape
// the grammar allows, names included where the field has them.
func randField(r *rand.Rand, lo, hi int, names []string) string {
	val := func() string {
		v := lo + r.IntN(hi-lo+1)
		if names != nil && r.IntN(3) == 0 {
			return names[v-lo]
		}
		return fmt.Sprint(v)
	}
	span := func() (int, int) {
		a := lo + r.IntN(hi-lo+1)
		return a, a + r.IntN(hi-a+1)
	}
	switch r.IntN(8) {
	case 0, 1:
		return "*"
	case 2:
		return fmt.Sprintf("*/%d", 1+r.IntN(max(1, (hi-lo)/2)))
	case 3:
		return val()
	case 4:
		a, b := span()
		return fmt.Sprintf("%d-%d", a, b)
	case 5:
		// A "*" inside a list makes the field match everything, but only a
		// leading one makes it a star (Vixie cron reads the first
		// character).
		parts := make([]string, 1+r.IntN(3))
		for i := range parts {
			if r.IntN(6) == 0 {
				parts[i] = "*"
			} else {
				parts[i] = val()
			}
		}
		return strings.Join(parts, ",")
	case 6:
		a, b := span()
		return fmt.Sprintf("%d-%d/%d", a, b, 1+r.IntN(5))
	default:
		return fmt.Sprintf("%d/%d", lo+r.IntN(hi-lo+1), 1+r.IntN(10))
	}
}

var (
	monthNames = strings.Fields("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC")
	dowNames   = strings.Fields("SUN MON TUE WED THU FRI SAT")
)

// randDom returns a random day-of-month field: plain, or a list with the
// day forms (L, L-n, LW, nW), biased towards month ends where they differ.
func randDom(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return randField(r, 1, 31, nil)
	}
	parts := make([]string, 1+r.IntN(2))
	for i := range parts {
		switch r.IntN(7) {
		case 0:
			parts[i] = "L"
		case 1:
			parts[i] = fmt.Sprintf("L-%d", []int{0, 1, 2, 27, 28, 29, 30}[r.IntN(7)])
		case 2:
			parts[i] = fmt.Sprintf("L-%d", r.IntN(31))
		case 3:
			parts[i] = fmt.Sprintf("%dW", []int{1, 2, 15, 28, 29, 30, 31}[r.IntN(7)])
		case 4:
			parts[i] = fmt.Sprintf("%dw", 1+r.IntN(31))
		case 5:
			parts[i] = []string{"LW", "lw"}[r.IntN(2)]
		default:
			parts[i] = fmt.Sprint(1 + r.IntN(31))
		}
	}
	if r.IntN(4) == 0 {
		// A leading star: the forms are then redundant, but the field is
		// a star.
		parts = append([]string{[]string{"*", "*/2", "?"}[r.IntN(3)]}, parts...)
	}
	return strings.Join(parts, ",")
}

// randDow returns a random day-of-week field: plain, or a list with the
// day forms (DAY#n, DAYL).
func randDow(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return randField(r, 0, 6, dowNames)
	}
	day := func() string {
		if r.IntN(2) == 0 {
			return fmt.Sprint(r.IntN(7))
		}
		n := dowNames[r.IntN(7)]
		if r.IntN(3) == 0 {
			n = strings.ToLower(n)
		}
		return n
	}
	parts := make([]string, 1+r.IntN(2))
	for i := range parts {
		switch r.IntN(5) {
		case 0, 1:
			parts[i] = fmt.Sprintf("%s#%d", day(), 1+r.IntN(5))
		case 2, 3:
			parts[i] = day() + "L"
		default:
			parts[i] = day()
		}
	}
	if r.IntN(4) == 0 {
		parts = append([]string{[]string{"*", "*/3", "?"}[r.IntN(3)]}, parts...)
	}
	return strings.Join(parts, ",")
}

// randMonth returns a random month field, often February, where the day
// forms differ between leap and other years.
func randMonth(r *rand.Rand) string {
	switch r.IntN(5) {
	case 0, 1:
		return "*"
	case 2:
		return "2"
	default:
		return randField(r, 1, 12, monthNames)
	}
}

// randCron returns a random valid expression. With dense set, the day
// fields are mostly stars so that runs land on the DST days under test.
func randCron(r *rand.Rand, dense bool) string {
	for {
		var f []string
		if !dense && r.IntN(10) == 0 {
			descs := []string{"@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@every 1m", "@every 45s", "@every 7h"}
			return descs[r.IntN(len(descs))]
		}
		f = append(f, randField(r, 0, 59, nil), randField(r, 0, 59, nil), randField(r, 0, 23, nil))
		if dense && r.IntN(4) != 0 {
			f = append(f, "*", "*", "*")
		} else {
			f = append(f, randDom(r), randMonth(r), randDow(r))
		}
		if r.IntN(3) == 0 {
			f = f[1:] // the 5-field form: second 0
		}
		expr := strings.Join(f, " ")
		if _, err := Compile(Spec{Cron: expr}); err == nil {
			return expr
		}
	}
}

// checkChain follows Next from start and checks what every caller relies
// on: each run is strictly after the previous one, in UTC at whole
// milliseconds (whole seconds for cron), and Next is consistent: asking
// again from just before a run returns that run.
func checkChain(t *testing.T, c *Schedule, what string, start time.Time, n int) {
	t.Helper()
	after := start
	for i := 0; i < n; i++ {
		next, ok := c.Next(after)
		if !ok {
			return // beyond the horizon, e.g. February 29 near 2100
		}
		switch {
		case !next.After(after):
			t.Fatalf("%s: Next(%v) = %v, not after", what, after, next)
		case next.Location() != time.UTC || next.Nanosecond() != 0:
			t.Fatalf("%s: Next(%v) = %v, want whole seconds in UTC", what, after, next)
		}
		if again, ok := c.Next(next.Add(-time.Millisecond)); !ok || !again.Equal(next) {
			t.Fatalf("%s: Next(%v) = %v but Next(that - 1ms) = %v, %v", what, after, next, again, ok)
		}
		if i == 0 {
			// Any time between start and the first run leads to it.
			mid := after.Add(next.Sub(after) / 2)
			if again, _ := c.Next(mid); !again.Equal(next) {
				t.Fatalf("%s: Next(%v) = %v but Next(%v) = %v", what, after, next, mid, again)
			}
		}
		after = next
	}
}

func TestNextProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo := mustTime(t, "1990-01-01T00:00:00Z").Unix()
	hi := mustTime(t, "2090-01-01T00:00:00Z").Unix()
	transitions := dstTransitions(t)
	for i := 0; i < 400; i++ {
		expr := randCron(r, i%2 == 0)
		tz := testZones[r.IntN(len(testZones))]
		c := mustCompile(t, Spec{Cron: expr, Timezone: tz})
		var start time.Time
		if i%2 == 0 {
			// Just before a DST change, where the interesting runs are.
			start = transitions[r.IntN(len(transitions))].Add(-time.Duration(r.IntN(4*3600)) * time.Second)
		} else {
			start = time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9))
		}
		checkChain(t, c, fmt.Sprintf("%q in %s", expr, tz), start, 30)
	}
}

// TestNextMatchesRobfig checks the search against robfig's own Next in
// zones without DST changes, where the two must agree once robfig's star
// bits follow Vixie cron (a day field is a star when its first character
// is). robfig knows no day forms (L, W, #) and looks only five years
// ahead; TestDayFieldsMatchBruteForce covers those.
func TestNextMatchesRobfig(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lo := mustTime(t, "2000-01-01T00:00:00Z").Unix()
	hi := mustTime(t, "2080-01-01T00:00:00Z").Unix()
	for _, tz := range []string{"UTC", "Asia/Tokyo", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			expr := randCron(r, false)
			if strings.HasPrefix(expr, "@every") {
				continue
			}
			c := mustCompile(t, Spec{Cron: expr, Timezone: tz})
			ref, err := parser.Parse(expr)
			if err != nil {
				continue // a day form
			}
			rs := ref.(*cron.SpecSchedule)
			rs.Location = loc
			if f := strings.Fields(expr); len(f) >= 5 {
				setStar := func(mask *uint64, field string) {
					*mask &^= starBit
					if field[0] == '*' || field[0] == '?' {
						*mask |= starBit
					}
				}
				setStar(&rs.Dom, f[len(f)-3])
				setStar(&rs.Dow, f[len(f)-1])
			}
			after := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9))
			for j := 0; j < 10; j++ {
				want := ref.Next(after)
				got, ok := c.Next(after)
				if want.IsZero() && (!ok || got.After(after.AddDate(5, 0, 0))) {
					break // beyond robfig's five years
				}
				if want.IsZero() != !ok || !got.Equal(want) {
					t.Fatalf("%q in %s: Next(%v) = %v, %v; robfig says %v", expr, tz, after, got, ok, want)
				}
				if !ok {
					break
				}
				after = got
			}
		}
	}
}

// TestNextMatchesBruteForce compares runs around DST changes with a slow
// reference that looks at every second and applies the rules of
// DESIGN.md "Time" literally, using only the time package.
func TestNextMatchesBruteForce(t *testing.T) {
	exprs := []string{
		"* * * * * *", "*/15 * * * * *", "0 */20 * * * *", "0 30 * * * *", "0 0 * * * *",
		"0 30 2 * * *", "0 0 2 * * *", "0 0,30 1-3 * * *", "0 0-59/7 0-4 * * *", "30 15 2,3 * * *",
		"*/20 30 1 * * *", "59 59 1 * * *", "0 15,45 * * * *", "? 0 2 * * *",
	}
	r := rand.New(rand.NewPCG(5, 6))
	for len(exprs) < 40 {
		e := randCron(r, true)
		if !strings.HasPrefix(e, "@") {
			exprs = append(exprs, e)
		}
	}
	const window = 2 * 3600
	for _, tr := range dstTransitions(t) {
		loc := tr.Location()
		from, to := tr.Unix()-window, tr.Unix()+window
		for _, expr := range exprs {
			c := mustCompile(t, Spec{Cron: expr, Timezone: loc.String()})
			ref := newBrute(t, expr, loc)
			want := ref.runs(from, to)
			var got []int64
			after := time.Unix(from, 0)
			for {
				next, ok := c.Next(after)
				if !ok || next.Unix() > to {
					break
				}
				got = append(got, next.Unix())
				after = next
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%q in %s around %v:\n got %s\nwant %s", expr, loc, tr, fmtRuns(got, loc), fmtRuns(want, loc))
			}
		}
	}
}

// dstTransitions returns the 2026 DST changes the tests look at, each as
// the first instant of the new offset, in its zone.
func dstTransitions(t testing.TB) []time.Time {
	var out []time.Time
	for _, s := range []struct{ zone, at string }{
		{"America/New_York", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T06:00:00Z"},
		{"Europe/Berlin", "2026-03-29T01:00:00Z"},
		{"Europe/Berlin", "2026-10-25T01:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T15:30:00Z"},
	} {
		loc, err := time.LoadLocation(s.zone)
		if err != nil {
			t.Fatal(err)
		}
		tr := mustTime(t, s.at).In(loc)
		_, before := tr.Add(-time.Second).Zone()
		if _, after := tr.Zone(); before == after {
			t.Fatalf("%s: no offset change at %v", s.zone, tr)
		}
		out = append(out, tr)
	}
	return out
}

func fmtRuns(runs []int64, loc *time.Location) string {
	var b strings.Builder
	for _, u := range runs {
		b.WriteString(time.Unix(u, 0).In(loc).Format("15:04:05Z07 "))
	}
	return b.String()
}

// brute is the reference: robfig's bit masks for the second, minute,
// hour and month, and refDays for the day fields, matched against the
// wall clock that the time package reports.
type brute struct {
	s    *cron.SpecSchedule
	days refDays
	wall bool
	loc  *time.Location
}

func newBrute(t *testing.T, expr string, loc *time.Location) brute {
	t.Helper()
	f := strings.Fields(expr)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	s, err := parser.Parse(strings.Join([]string{f[0], f[1], f[2], "*", f[4], "*"}, " "))
	if err != nil {
		t.Fatal(err)
	}
	wall := false
	for _, x := range f[:3] {
		wall = wall || x[0] == '*' || x[0] == '?'
	}
	return brute{s.(*cron.SpecSchedule), newRefDays(t, f[3], f[5]), wall, loc}
}

func (b brute) matches(tm time.Time) bool {
	has := func(mask uint64, v int) bool { return mask&(1<<uint(v)) != 0 }
	if !has(b.s.Second, tm.Second()) || !has(b.s.Minute, tm.Minute()) || !has(b.s.Hour, tm.Hour()) || !has(b.s.Month, int(tm.Month())) {
		return false
	}
	return b.days.match(refDayOf(tm))
}

// refDay is a date as the reference sees it: y-m-d, its weekday
// (0 = Sunday) and the number of days in its month.
type refDay struct{ y, m, d, wd, last int }

func refDayOf(tm time.Time) refDay {
	y, m, d := tm.Date()
	return refDay{y, int(m), d, int(tm.Weekday()), time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()}
}

// weekdayOf returns the weekday of day d of x's month.
func (x refDay) weekdayOf(d int) int { return ((x.wd+d-x.d)%7 + 7) % 7 }

// refDays is the reference reading of the two day fields, written from
// the rules in doc.go rather than from the package's code: a field is a
// star when its first character is "*" or "?"; a star field must match as
// well as the other, otherwise either may; a list is the union of its
// elements; plain elements go through robfig, day forms by definition.
type refDays struct {
	domStar, dowStar bool
	dom, dow         []func(refDay) bool
}

var (
	reLast    = regexp.MustCompile(`(?i)^L(?:-(\d+))?$`)
	reNearest = regexp.MustCompile(`(?i)^(\d+)W$`)
	reLastWd  = regexp.MustCompile(`(?i)^LW$`)
	reNth     = regexp.MustCompile(`(?i)^(\w+)#(\d)$`)
	reLastDow = regexp.MustCompile(`(?i)^(\w+)L$`)
)

func newRefDays(t testing.TB, dom, dow string) refDays {
	t.Helper()
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		return n
	}
	weekday := func(s string) int {
		for i, n := range dowNames {
			if strings.EqualFold(s, n) {
				return i
			}
		}
		return atoi(s)
	}
	plain := func(expr string, pick func(*cron.SpecSchedule) uint64, of func(refDay) int) func(refDay) bool {
		s, err := parser.Parse(expr)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		mask := pick(s.(*cron.SpecSchedule))
		return func(x refDay) bool { return mask&(1<<of(x)) != 0 }
	}
	var r refDays
	r.domStar = dom[0] == '*' || dom[0] == '?'
	r.dowStar = dow[0] == '*' || dow[0] == '?'
	for _, e := range strings.Split(dom, ",") {
		var f func(refDay) bool
		if m := reLast.FindStringSubmatch(e); m != nil {
			n := 0
			if m[1] != "" {
				n = atoi(m[1])
			}
			f = func(x refDay) bool { return x.d == x.last-n }
		} else if reLastWd.MatchString(e) {
			// The last day of the month that is Monday to Friday.
			f = func(x refDay) bool {
				d := x.last
				for x.weekdayOf(d) == 0 || x.weekdayOf(d) == 6 {
					d--
				}
				return x.d == d
			}
		} else if m := reNearest.FindStringSubmatch(e); m != nil {
			// The weekday (Monday to Friday) of the month closest to day
			// n; none if the month has no day n.
			n := atoi(m[1])
			f = func(x refDay) bool {
				if n > x.last {
					return false
				}
				best := 0
				for d := 1; d <= x.last; d++ {
					if wd := x.weekdayOf(d); wd == 0 || wd == 6 {
						continue
					}
					if best == 0 || abs(d-n) < abs(best-n) {
						best = d
					}
				}
				return x.d == best
			}
		} else {
			f = plain("0 0 0 "+e+" * *", func(s *cron.SpecSchedule) uint64 { return s.Dom }, func(x refDay) int { return x.d })
		}
		r.dom = append(r.dom, f)
	}
	for _, e := range strings.Split(dow, ",") {
		var f func(refDay) bool
		if m := reNth.FindStringSubmatch(e); m != nil {
			wd, n := weekday(m[1]), atoi(m[2])
			f = func(x refDay) bool { return x.wd == wd && (x.d-1)/7+1 == n }
		} else if m := reLastDow.FindStringSubmatch(e); m != nil {
			wd := weekday(m[1])
			f = func(x refDay) bool { return x.wd == wd && x.d+7 > x.last }
		} else {
			f = plain("0 0 0 * * "+e, func(s *cron.SpecSchedule) uint64 { return s.Dow }, func(x refDay) int { return x.wd })
		}
		r.dow = append(r.dow, f)
	}
	return r
}

func (r refDays) match(x refDay) bool {
	anyOf := func(fs []func(refDay) bool) bool {
		for _, f := range fs {
			if f(x) {
				return true
			}
		}
		return false
	}
	dom, dow := anyOf(r.dom), anyOf(r.dow)
	if r.domStar || r.dowStar {
		return dom && dow
	}
	return dom || dow
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestDayFieldsMatchBruteForce compares the days Next picks with refDays,
// walking every day of a few years: random day fields (stars, steps,
// lists with a "*" inside, L, L-n, nW, DAY#n, DAYL) and months (often
// February), over windows that hold leap years, common years and 2100.
// Expressions Compile refuses as never running are checked against every
// day of the 400-year Gregorian cycle, which holds every kind of month.
func TestDayFieldsMatchBruteForce(t *testing.T) {
	fixed := []string{
		"*/2 * MON", "1,* * MON", "13 * */2", "15 * *,1", "15 * 1,*", "? * ?", "*/1 * MON",
		"L * *", "L-0 2 *", "L-28 2 ?", "L-30 * ?", "31W 4 *", "1W * ?", "31W * *", "29W 2 *", "30W,L * ?",
		"? 2 MON#5", "? * FRIL", "L * FRIL", "L,15W * *", "? * MON#1,FRIL", "29 2 */7", "*/2 * sat#1",
		"LW * *", "LW 2 ?", "LW,L * ?", "LW,1W * *", "LW * FRIL",
	}
	seed := uint64(time.Now().UnixNano())
	for _, run := range []struct {
		seed uint64
		n    int
	}{{7, 300}, {seed, 60}} {
		r := rand.New(rand.NewPCG(run.seed, 8))
		exprs := fixed
		if run.seed != 7 {
			exprs = nil
		}
		for len(exprs) < run.n {
			exprs = append(exprs, randDom(r)+" "+randMonth(r)+" "+randDow(r))
		}
		refused := 0
		for _, days := range exprs {
			checkDays(t, r, run.seed, days, &refused)
		}
	}
}

// checkDays checks one set of day fields ("dom month dow") at noon UTC.
func checkDays(t *testing.T, r *rand.Rand, seed uint64, days string, refused *int) {
	t.Helper()
	expr := "0 0 12 " + days
	f := strings.Fields(days)
	ref := newRefDays(t, f[0], f[2])
	ms, err := parser.Parse("0 0 0 * " + f[1] + " *")
	if err != nil {
		t.Fatal(err)
	}
	month := ms.(*cron.SpecSchedule).Month
	refMatch := func(x refDay) bool { return month&(1<<x.m) != 0 && ref.match(x) }

	c, err := Compile(Spec{Cron: expr})
	if err != nil {
		if !strings.Contains(err.Error(), "never runs") {
			t.Fatalf("seed %d: %q: %v", seed, expr, err)
		}
		// Walking 400 years is slow; a few refusals make the point.
		if *refused++; *refused > 8 {
			return
		}
		forEachDay(2000, 2400, func(x refDay) bool {
			if refMatch(x) {
				t.Errorf("seed %d: %q refused as never running, but runs on %d-%02d-%02d", seed, expr, x.y, x.m, x.d)
				return false
			}
			return true
		})
		return
	}

	// Three years from a random one in 1998-2101: leap years, common
	// years, 2000 (leap) and 2100 (not).
	y0 := 1998 + r.IntN(102)
	var want []string
	forEachDay(y0, y0+3, func(x refDay) bool {
		if refMatch(x) {
			want = append(want, fmt.Sprintf("%d-%02d-%02d", x.y, x.m, x.d))
		}
		return true
	})
	var got []string
	after := time.Date(y0, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(y0+3, 1, 1, 0, 0, 0, 0, time.UTC)
	for {
		next, ok := c.Next(after)
		if !ok {
			// Every expression Compile accepts runs within the horizon.
			t.Fatalf("seed %d: %q: no run after %v", seed, expr, after)
		}
		if !next.Before(end) {
			break
		}
		got = append(got, next.Format(time.DateOnly))
		after = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("seed %d: %q from %d for three years:\n got %v\nwant %v", seed, expr, y0, got, want)
	}
}

// forEachDay calls fn on every day of the years [from, to), in order,
// until it returns false.
func forEachDay(from, to int, fn func(refDay) bool) {
	for y := from; y < to; y++ {
		for m := time.January; m <= time.December; m++ {
			first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
			x := refDay{y: y, m: int(m), wd: int(first.Weekday()), last: first.AddDate(0, 1, -1).Day()}
			for x.d = 1; x.d <= x.last; x.d++ {
				if !fn(x) {
					return
				}
				x.wd = (x.wd + 1) % 7
			}
		}
	}
}

// runs lists the run instants in (from, to].
func (b brute) runs(from, to int64) []int64 {
	var out []int64
	prev := time.Unix(from, 0).In(b.loc)
	for u := from + 1; u <= to; u++ {
		tm := time.Unix(u, 0).In(b.loc)
		_, o1 := prev.Zone()
		_, o2 := tm.Zone()
		prev = tm
		run := false
		if b.matches(tm) {
			run = true
			if !b.wall {
				// A fixed-time job skips the second pass of a repeated
				// wall time: the same wall clock an offset change earlier.
				for _, k := range []int64{1800, 3600, 7200} {
					if sameWall(time.Unix(u-k, 0).In(b.loc), tm) {
						run = false
					}
				}
			}
		}
		if !b.wall && o2 > o1 {
			// Wall times skipped by this jump run now, at the first
			// instant after the gap.
			for w := u + int64(o1); w < u+int64(o2); w++ {
				if b.matches(time.Unix(w, 0).UTC()) {
					run = true
				}
			}
		}
		if run {
			out = append(out, u)
		}
	}
	return out
}

func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() && a.Second() == b.Second()
}

// FuzzCompile throws arbitrary expressions at Compile and Next: they must
// not panic, and what compiles must keep Next's promises. `go test` runs
// the seeds; `go test -fuzz FuzzCompile ./schedule/` explores.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"* * * * *", "0 30 2 * * *", "@every 1h", "@hourly", "TZ=", "TZ=UTC", "CRON_TZ",
		"0 0 0 30 2 *", "*/0 * * * *", "1-2-3 * * * *", "5/ * * * *", "/ * * * * *", "@", "@every",
		"0 0 0 31 2,4 MON", "0 0 0 29 2 *", "? ? ? ? ? ?", "0-59/59 */59 */23 */31 */12 */6",
		"0 0 L * FRIL", "0 0 9 ? 2 MON#5", "0 0 L-30 2 *", "0 0 31W 4 *", "0 0 * * L", "0 0 1W-3W * *",
		"0 0 L-,W * #", "0 0 */20 * MON#2", "* 30 2 ? 3 SUN#2", "0 0 12 1,* * MON",
	} {
		f.Add(s, uint8(1), int64(1772953200)) // 2026-03-08 07:00Z, a DST change
	}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64) {
		c, err := Compile(Spec{Cron: expr, Timezone: testZones[int(zone)%len(testZones)]})
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("error %v is a %T", err, err)
			}
			return
		}
		// Keep start times where calendars and JSON make sense.
		const lo, span = 0, 4102444800 // 1970 to 2100
		start := time.Unix(lo+(unix%span+span)%span, 0)
		checkChain(t, c, fmt.Sprintf("%q", expr), start, 5)
	})
}
