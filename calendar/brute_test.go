package calendar

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// bruteZones are the zones the brute-force tests run in: odd offsets,
// DST of 30 minutes, DST changes at midnight, DST in the southern
// hemisphere, Ramadan's DST, and none at all.
var bruteZones = []string{
	"Australia/Lord_Howe", "Pacific/Chatham", "America/New_York", "Europe/Berlin",
	"America/Sao_Paulo", "Asia/Kolkata", "Pacific/Apia", "America/Santiago",
	"Africa/Casablanca", "UTC",
}

// scene is a stretch of seconds around one moment that matters in one
// zone (a change of offset, a leap day), with calendars made for it.
type scene struct {
	name     string
	from, to time.Time // every second of [from, to) is checked
	specs    []Spec
	check    []string // the calendars compared
}

// offsetChanges returns the instants in [from, to) at which loc's offset
// changes, found by looking at every hour and then halving down to the
// second (not with ZoneBounds, which the package uses).
func offsetChanges(loc *time.Location, from, to time.Time) []time.Time {
	offset := func(t time.Time) int { _, o := t.In(loc).Zone(); return o }
	var out []time.Time
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		lo, hi := t, t.Add(time.Hour)
		if offset(lo) == offset(hi) {
			continue
		}
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if offset(mid) == offset(lo) {
				lo = mid
			} else {
				hi = mid
			}
		}
		out = append(out, hi)
	}
	return out
}

// scenes returns the scenes of zone: its offset changes in 2026 (or in
// the years that make it interesting), the leap day 2028-02-29, and a
// plain Sunday for zones without changes.
func scenes(t *testing.T, zone string) []scene {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	moments := offsetChanges(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	switch zone {
	case "America/Sao_Paulo":
		// DST began at midnight on 2018-11-04 (00:00 became 01:00) and
		// ended at midnight on 2019-02-17 (00:00 became 23:00 of the
		// 16th); there has been none since 2019.
		moments = append(moments, offsetChanges(loc, time.Date(2018, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC))...)
	case "Pacific/Apia":
		// Samoa skipped 2011-12-30 whole, moving across the date line.
		moments = append(moments, offsetChanges(loc, time.Date(2011, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC))...)
	}
	if len(moments) == 0 {
		moments = append(moments, time.Date(2026, 3, 8, 12, 0, 0, 0, loc))
	}
	moments = append(moments, time.Date(2028, 2, 29, 12, 0, 0, 0, loc))

	var out []scene
	for _, m := range moments {
		out = append(out, sceneAt(zone, loc, m))
	}
	return out
}

// sceneAt makes the calendars of a scene around moment m: windows whose
// ends fall just before and after it, whole days next to it, the
// midnight-crossing daily 22:00–06:00 and weekly SAT 22:00–02:00, include
// and exclude modes, and extends two deep.
func sceneAt(zone string, loc *time.Location, m time.Time) scene {
	lm := m.In(loc)
	y, mo, d := lm.Date()
	day := func(n int) string { return time.Date(y, mo, d+n, 12, 0, 0, 0, time.UTC).Format(time.DateOnly) }
	clock := func(delta time.Duration) string { return m.Add(delta).In(loc).Format("15:04") }
	wall := func(delta time.Duration, layout string) string { return m.Add(delta).In(loc).Format(layout) }
	wd := weekdayNames[lm.Weekday()]
	// The wall time just after the last second before m: where a jump
	// forward starts skipping, or where the clock going back would have
	// gone on. Stretches starting exactly there catch an off-by-one at
	// the end of a zone period.
	lb := m.Add(-time.Second).In(loc)
	edge := time.Date(lb.Year(), lb.Month(), lb.Day(), lb.Hour(), lb.Minute(), lb.Second()+1, 0, time.UTC)
	edgeClock := func(delta time.Duration) string { return edge.Add(delta).Format("15:04:05") }

	ex := Spec{
		Name: "ex", Timezone: zone,
		Weekly: []Weekly{{Days: []string{"SAT"}, Start: "22:00", End: "02:00"}},
		Days:   []string{"L * *"},
	}
	if start, end := wall(-50*time.Minute-30*time.Second, "2006-01-02T15:04:05"), wall(40*time.Minute, "2006-01-02T15:04"); end > start {
		ex.Windows = []Window{{Start: start, End: end}}
	}
	specs := []Spec{
		ex,
		{
			Name: "in", Timezone: zone, Mode: "include",
			Daily:  []Daily{{Start: "22:00", End: "06:00"}},
			Weekly: []Weekly{{Days: []string{wd}, Start: clock(-time.Hour), End: clock(90 * time.Minute)}},
			Days:   []string{"* * MON#1", "29 2 *"},
		},
		{
			// The days either side, so that the day's own midnights
			// are edges; in Apia the day before was skipped.
			Name: "days", Timezone: zone,
			Dates: []string{day(-1), day(1)},
		},
		{
			// Alone, so that nothing else covers it: a stretch from
			// the edge, which a jump forward skips whole.
			Name: "edge", Timezone: zone, Mode: "include",
			Daily: []Daily{{Start: edgeClock(0), End: edgeClock(15 * time.Minute)}},
		},
		{
			// A stretch ending at the edge, where the zone period ends,
			// and one from the wall time after the change.
			Name: "edges", Timezone: zone,
			Daily: []Daily{{Start: edgeClock(-time.Hour), End: edgeClock(0)}, {Start: clock(0), End: clock(30 * time.Minute)}},
		},
		{
			Name: "mix", Timezone: zone,
			Daily:   []Daily{{Start: clock(-20 * time.Minute), End: clock(25 * time.Minute)}},
			Extends: []string{"ex", "in"},
		},
		{
			Name: "top", Timezone: zone, Mode: "include",
			Weekly:  []Weekly{{Days: []string{wd}}},
			Daily:   []Daily{{Start: clock(-3 * time.Hour), End: "22:30"}},
			Extends: []string{"mix", "days", "ex"},
		},
	}
	// From two hours before the day's midnight (so from 22:00 of the
	// day before, where the weekly stretch starts) to two after its end;
	// time.Date may pick either side of a skipped or repeated midnight,
	// which the margins absorb.
	from := time.Date(y, mo, d, 0, 0, 0, 0, loc).Add(-2 * time.Hour)
	to := time.Date(y, mo, d+1, 0, 0, 0, 0, loc).Add(2 * time.Hour)
	return scene{
		name:  fmt.Sprintf("%s %s (%s)", zone, lm.Format(time.DateOnly), m.UTC().Format(time.DateTime)),
		from:  from,
		to:    to,
		specs: specs,
		check: []string{"ex", "in", "days", "edge", "edges", "top"},
	}
}

// TestAllowedMatchesReference compares Allowed with the reference
// evaluator for every second of every scene, and NextAllowed with the
// first allowed second the reference finds, from random instants.
func TestAllowedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	seconds := 0
	for _, zone := range bruteZones {
		for _, sc := range scenes(t, zone) {
			t.Run(sc.name, func(t *testing.T) {
				cals, err := Compile(sc.specs)
				if err != nil {
					t.Fatal(err)
				}
				refs := newRef(sc.specs)
				var check []*Calendar
				var ref []*refCal
				for _, name := range sc.check {
					check = append(check, cals[name])
					ref = append(ref, refs[name])
				}
				loc := check[0].Location()
				n := int(sc.to.Sub(sc.from) / time.Second)
				seconds += n

				// want[i][s]: the reference's verdict on calendar i at
				// second s of the scene.
				want := make([][]bool, len(check))
				for i := range want {
					want[i] = make([]bool, n)
				}
				mismatches := 0
				for s := range n {
					at := sc.from.Add(time.Duration(s) * time.Second)
					f := fieldsOf(at, loc)
					for i, c := range check {
						w := ref[i].allowedFields(f)
						want[i][s] = w
						if got := c.Allowed(at); got != w && mismatches < 10 {
							mismatches++
							t.Errorf("%s.Allowed(%s, local %s) = %v, the reference says %v", c.Name(), at.UTC().Format(time.DateTime), f.dateTime, got, w)
						}
					}
				}

				for i, c := range check {
					for range 100 {
						s := rng.IntN(n)
						at := sc.from.Add(time.Duration(s)*time.Second + time.Duration(rng.IntN(1e9)))
						got, ok := c.NextAllowed(at, at.AddDate(10, 0, 0))
						j := s
						for j < n && !want[i][j] {
							j++
						}
						switch {
						case j == s:
							if !ok || !got.Equal(at) {
								t.Errorf("%s.NextAllowed(%s) = %v, %v; want the instant itself, which is allowed", c.Name(), at.UTC().Format(time.RFC3339Nano), got, ok)
							}
						case j < n:
							if w := sc.from.Add(time.Duration(j) * time.Second); !ok || !got.Equal(w) {
								t.Errorf("%s.NextAllowed(%s) = %v, %v; want %v", c.Name(), at.UTC().Format(time.RFC3339Nano), got.UTC(), ok, w.UTC())
							} else if _, ok := c.NextAllowed(at, w.Add(-time.Nanosecond)); ok {
								t.Errorf("%s.NextAllowed(%s) with a limit just before %v found one", c.Name(), at.UTC().Format(time.RFC3339Nano), w.UTC())
							}
						default:
							// Nothing allowed before the scene ends: any
							// answer lies beyond it and is allowed.
							if ok && (got.Before(sc.to) || !ref[i].allowed(got)) {
								t.Errorf("%s.NextAllowed(%s) = %v, which the reference does not allow or should have found", c.Name(), at.UTC().Format(time.RFC3339Nano), got.UTC())
							}
						}
					}
				}

				// Periods covers exactly the seconds the reference refuses.
				for i, c := range check {
					got := make([]bool, n)
					for k := range got {
						got[k] = true
					}
					for _, p := range c.Periods(sc.from, sc.to, n) {
						if p.Calendar == "" || p.Reason == "" {
							t.Errorf("%s: period %v-%v says no why", c.Name(), p.Start, p.End)
						}
						for k := int(p.Start.Sub(sc.from) / time.Second); k < int(p.End.Sub(sc.from)/time.Second) && k < n; k++ {
							got[k] = false
						}
					}
					for k := range n {
						if got[k] != want[i][k] {
							t.Errorf("%s.Periods: second %s allowed %v, the reference says %v", c.Name(),
								sc.from.Add(time.Duration(k)*time.Second).UTC().Format(time.DateTime), got[k], want[i][k])
							break
						}
					}
				}
			})
		}
	}
	t.Logf("compared %d seconds, 6 calendars each", seconds)
}
