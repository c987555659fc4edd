package schedule

import (
	"fmt"
	"math/rand/v2"
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
		parts := make([]string, 1+r.IntN(3))
		for i := range parts {
			parts[i] = val()
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
			f = append(f, randField(r, 1, 31, nil), randField(r, 1, 12, monthNames), randField(r, 0, 6, dowNames))
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
// zones without DST changes, where the two must agree.
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
				t.Fatal(err)
			}
			ref.(*cron.SpecSchedule).Location = loc
			after := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9))
			for j := 0; j < 10; j++ {
				want := ref.Next(after)
				got, ok := c.Next(after)
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

// brute is the reference: robfig's bit masks, matched field by field
// against the wall clock that the time package reports.
type brute struct {
	s    *cron.SpecSchedule
	wall bool
	loc  *time.Location
}

func newBrute(t *testing.T, expr string, loc *time.Location) brute {
	t.Helper()
	s, err := parser.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(expr)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	wall := false
	for _, x := range f[:3] {
		wall = wall || x[0] == '*' || x[0] == '?'
	}
	return brute{s.(*cron.SpecSchedule), wall, loc}
}

func (b brute) matches(tm time.Time) bool {
	has := func(mask uint64, v int) bool { return mask&(1<<uint(v)) != 0 }
	if !has(b.s.Second, tm.Second()) || !has(b.s.Minute, tm.Minute()) || !has(b.s.Hour, tm.Hour()) || !has(b.s.Month, int(tm.Month())) {
		return false
	}
	dom, dow := has(b.s.Dom, tm.Day()), has(b.s.Dow, int(tm.Weekday()))
	if b.s.Dom&starBit != 0 || b.s.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
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
