package calendar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/schedule"
)

func mustCompile(t *testing.T, specs ...Spec) map[string]*Calendar {
	t.Helper()
	cals, err := Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	return cals
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestSpecJSON reads the API's JSON of a calendar.
func TestSpecJSON(t *testing.T) {
	const body = `{
		"name": "holidays", "timezone": "Europe/Berlin", "mode": "exclude",
		"dates": ["2026-12-25"],
		"windows": [{"start": "2026-12-24T18:00", "end": "2026-12-27T06:00:30"}],
		"weekly": [{"days": ["SAT", "SUN"]}, {"days": ["FRI"], "start": "22:00", "end": "02:00"}],
		"daily": [{"start": "22:00", "end": "06:00"}],
		"days": ["L * *", "* * MON#1"],
		"extends": ["business"]
	}`
	var s Spec
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Weekly[1].End != "02:00" || s.Windows[0].End != "2026-12-27T06:00:30" || s.Extends[0] != "business" {
		t.Fatalf("decoded %+v", s)
	}
	mustCompile(t, s, Spec{Name: "business", Mode: ModeInclude, Weekly: []Weekly{{Days: []string{"mon", "Tue", "WED", "THU", "FRI"}}}})
}

// TestWhy checks the reasons, and that they name the calendar down the
// extends that refuses.
func TestWhy(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	cals := mustCompile(t,
		Spec{
			Name: "holidays", Timezone: "Europe/Berlin",
			Dates:   []string{"2026-12-25"},
			Windows: []Window{{Start: "2026-12-24T18:00", End: "2026-12-27T06:00"}},
			Weekly:  []Weekly{{Days: []string{"SAT"}, Start: "22:00", End: "02:00"}, {Days: []string{"sun"}}},
			Daily:   []Daily{{Start: "22:00", End: "06:00"}},
			Days:    []string{"L * *"},
			Extends: []string{"business"},
		},
		Spec{Name: "business", Timezone: "Europe/Berlin", Mode: ModeInclude, Weekly: []Weekly{{Days: []string{"MON", "TUE", "WED", "THU", "FRI", "SAT"}}}},
	)
	c := cals["holidays"]
	for _, tc := range []struct {
		at            time.Time
		calendar, why string
	}{
		{time.Date(2026, 12, 25, 12, 0, 0, 0, berlin), "holidays", "date 2026-12-25"},
		{time.Date(2026, 12, 24, 19, 0, 0, 0, berlin), "holidays", "window 2026-12-24T18:00–2026-12-27T06:00"},
		{time.Date(2026, 12, 6, 1, 0, 0, 0, berlin), "holidays", "weekly SAT 22:00–02:00"}, // Sunday 01:00
		{time.Date(2026, 12, 6, 12, 0, 0, 0, berlin), "holidays", "weekly SUN"},
		{time.Date(2026, 12, 8, 23, 0, 0, 0, berlin), "holidays", "daily 22:00–06:00"},
		{time.Date(2026, 11, 30, 12, 0, 0, 0, berlin), "holidays", `days "L * *"`},
		{time.Date(2026, 12, 8, 12, 0, 0, 0, berlin), "", ""},
		// A Sunday that the window, the weekly rule and business all
		// refuse: the calendar's own first rule is named.
		{time.Date(2026, 12, 27, 3, 0, 0, 0, berlin), "holidays", "window 2026-12-24T18:00–2026-12-27T06:00"},
	} {
		cal, why := c.Why(tc.at)
		if cal != tc.calendar || why != tc.why {
			t.Errorf("Why(%v) = %q, %q; want %q, %q", tc.at, cal, why, tc.calendar, tc.why)
		}
		if allowed := c.Allowed(tc.at); allowed != (why == "") {
			t.Errorf("Allowed(%v) = %v, yet Why says %q", tc.at, allowed, why)
		}
	}

	// Business refuses a Sunday its own rules do not list; with the
	// weekly SUN rule gone from holidays, Why names business.
	cals = mustCompile(t,
		Spec{Name: "holidays", Timezone: "Europe/Berlin", Dates: []string{"2026-12-25"}, Extends: []string{"business"}},
		Spec{Name: "business", Timezone: "Europe/Berlin", Mode: ModeInclude, Weekly: []Weekly{{Days: []string{"MON", "TUE", "WED", "THU", "FRI"}}}},
	)
	if cal, why := cals["holidays"].Why(time.Date(2026, 12, 6, 12, 0, 0, 0, berlin)); cal != "business" || why != "not in an include calendar" {
		t.Errorf("Why(a Sunday) = %q, %q; want business, not in an include calendar", cal, why)
	}
}

// TestFirstAllowedJumps runs an every-second schedule into an excluded
// month (and the holiday and weekend after it): FirstAllowed must jump
// over them with a few calls to next, not walk 3 million seconds.
func TestFirstAllowedJumps(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	cals := mustCompile(t, Spec{
		Name: "december", Timezone: "Europe/Berlin",
		Windows: []Window{{Start: "2026-12-01T00:00", End: "2027-01-01T00:00"}},
		Dates:   []string{"2027-01-01"},
		Weekly:  []Weekly{{Days: []string{"SAT", "SUN"}}},
	})
	calls := 0
	everySecond := func(after time.Time) (time.Time, bool) {
		calls++
		return after.Truncate(time.Second).Add(time.Second), true
	}
	after := time.Date(2026, 11, 30, 23, 59, 58, 0, berlin)
	got, skipped, ok := FirstAllowed([]*Calendar{cals["december"]}, everySecond, after, after.AddDate(10, 0, 0))
	if want := time.Date(2026, 11, 30, 23, 59, 59, 0, berlin); !ok || !got.Equal(want) || skipped != 0 {
		t.Fatalf("FirstAllowed = %v, %d, %v; want %v, 0, true", got, skipped, ok, want)
	}

	calls = 0
	after = after.Add(time.Second)
	got, skipped, ok = FirstAllowed([]*Calendar{cals["december"]}, everySecond, after, after.AddDate(10, 0, 0))
	if want := time.Date(2027, 1, 4, 0, 0, 0, 0, berlin); !ok || !got.Equal(want) {
		t.Fatalf("FirstAllowed = %v, %v; want %v (Monday after New Year and the weekend)", got, ok, want)
	}
	if skipped < 1 {
		t.Errorf("skipped = %d; want at least 1", skipped)
	}
	if calls >= 100 {
		t.Errorf("FirstAllowed called next %d times; it should jump, not step", calls)
	}
	t.Logf("%d calls to next, skipped %d", calls, skipped)

	// Nothing allowed before the limit.
	if _, _, ok := FirstAllowed([]*Calendar{cals["december"]}, everySecond, after, time.Date(2027, 1, 3, 0, 0, 0, 0, berlin)); ok {
		t.Error("FirstAllowed found a time past its limit")
	}
}

// TestFirstAllowedMatchesStepping compares FirstAllowed over several
// calendars with trying every run of real schedules one by one.
func TestFirstAllowedMatchesStepping(t *testing.T) {
	cals := mustCompile(t,
		Spec{Name: "business", Timezone: "America/New_York", Mode: ModeInclude,
			Weekly: []Weekly{{Days: []string{"MON", "TUE", "WED", "THU", "FRI"}, Start: "08:00", End: "18:00"}}},
		Spec{Name: "holidays", Timezone: "America/New_York", Dates: []string{"2026-11-26", "2026-12-25"}, Days: []string{"1 1 *"}},
		Spec{Name: "freeze", Timezone: "Europe/Berlin", Windows: []Window{{Start: "2026-12-18T00:00", End: "2027-01-05T00:00"}}},
	)
	list := []*Calendar{cals["business"], cals["holidays"], cals["freeze"]}
	for _, cron := range []string{"0 30 9 * * *", "0 */15 * * * *", "0 0 3 * * *", "0 0 12 * * SAT"} {
		sched, err := schedule.Compile(schedule.Spec{Cron: cron, Timezone: "America/New_York"})
		if err != nil {
			t.Fatal(err)
		}
		from := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
		limit := from.AddDate(0, 3, 0)
		for after := from; after.Before(from.AddDate(0, 2, 0)); after = after.Add(7 * time.Hour) {
			// Stepping: every run until one that all allow.
			var want time.Time
			wantOK, wantSkipped := false, 0
			for run, ok := sched.Next(after); ok && !run.After(limit); run, ok = sched.Next(run) {
				if cals["business"].Allowed(run) && cals["holidays"].Allowed(run) && cals["freeze"].Allowed(run) {
					want, wantOK = run, true
					break
				}
				wantSkipped++
			}
			got, skipped, ok := FirstAllowed(list, sched.Next, after, limit)
			if ok != wantOK || !got.Equal(want) {
				t.Errorf("%s after %v: FirstAllowed = %v, %v; stepping finds %v, %v", cron, after, got, ok, want, wantOK)
			}
			if skipped > wantSkipped || (skipped == 0) != (wantSkipped == 0) {
				t.Errorf("%s after %v: skipped %d; stepping skipped %d", cron, after, skipped, wantSkipped)
			}
		}
	}
}

// TestNothingAllowed: calendars that allow nothing give up at the limit.
func TestNothingAllowed(t *testing.T) {
	cals := mustCompile(t,
		Spec{Name: "empty-include", Mode: ModeInclude},
		Spec{Name: "all-day", Timezone: "America/Santiago", Daily: []Daily{{Start: "00:00", End: "00:00"}}},
		Spec{Name: "all-days", Timezone: "Pacific/Chatham", Daily: []Daily{{Start: "09:00", End: "09:00"}}},
		Spec{Name: "all-week", Timezone: "Europe/Berlin", Weekly: []Weekly{{Days: []string{"MON", "TUE", "WED", "THU"}}, {Days: []string{"FRI", "SAT", "SUN"}}}},
		Spec{Name: "every-day", Timezone: "Australia/Lord_Howe", Days: []string{"* * *"}},
		Spec{Name: "weekdays", Timezone: "America/New_York", Mode: ModeInclude, Weekly: []Weekly{{Days: []string{"MON", "TUE", "WED", "THU", "FRI"}}}},
		Spec{Name: "weekends", Timezone: "America/New_York", Mode: ModeInclude, Weekly: []Weekly{{Days: []string{"SAT", "SUN"}}}, Extends: []string{"weekdays"}},
		Spec{Name: "past-window", Mode: ModeInclude, Windows: []Window{{Start: "2020-01-01T00:00", End: "2020-01-02T00:00"}}},
	)
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	limit := at.AddDate(10, 0, 0)
	for _, name := range []string{"empty-include", "all-day", "all-days", "all-week", "every-day", "weekends", "past-window"} {
		c := cals[name]
		if got, ok := c.NextAllowed(at, limit); ok {
			t.Errorf("%s.NextAllowed = %v; want none within 10 years", name, got)
		}
		if c.Allowed(at) || c.Allowed(limit) {
			t.Errorf("%s allows an instant", name)
		}
	}
	// "weekdays" alone allows weekdays: the emptiness of "weekends" is the
	// intersection's.
	if got, ok := cals["weekdays"].NextAllowed(at, limit); !ok || got.Weekday() != time.Monday {
		t.Errorf("weekdays.NextAllowed(a Sunday) = %v, %v; want Monday", got, ok)
	}
}

// TestNextAllowedAcrossLeapYearEnd crosses the last UTC day of a leap year
// past the zone's listed transitions, where Time.ZoneBounds reports an end
// before the instant asked about; the search must still move on.
func TestNextAllowedAcrossLeapYearEnd(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	cals := mustCompile(t,
		Spec{Name: "in", Timezone: "America/New_York", Mode: ModeInclude, Dates: []string{"2041-01-05"}},
		Spec{Name: "ex", Timezone: "America/New_York", Windows: []Window{{Start: "2040-12-20T00:00", End: "2041-01-05T00:00"}}},
	)
	at := time.Date(2040, 12, 20, 0, 0, 0, 0, ny)
	want := time.Date(2041, 1, 5, 0, 0, 0, 0, ny)
	for _, name := range []string{"in", "ex"} {
		done := make(chan struct{})
		var got time.Time
		var ok bool
		go func() {
			defer close(done)
			got, ok = cals[name].NextAllowed(at, at.AddDate(10, 0, 0))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s.NextAllowed does not return", name)
		}
		if !ok || !got.Equal(want) {
			t.Errorf("%s.NextAllowed = %v, %v; want %v", name, got, ok, want)
		}
	}
}

// TestCompileErrors checks that each problem is a FieldError naming the
// calendar and the field.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		specs    []Spec
		calendar string
		field    string
	}{
		{"bad date", []Spec{{Name: "a", Dates: []string{"2026-12-25", "2026-12-26", "2026-02-30"}}}, "a", "dates[2]"},
		{"date with a time", []Spec{{Name: "a", Dates: []string{"2026-12-25T00:00"}}}, "a", "dates[0]"},
		{"window end before start", []Spec{{Name: "a", Windows: []Window{{Start: "2026-12-24T18:00", End: "2026-12-24T17:59:59"}}}}, "a", "windows[0].end"},
		{"empty window", []Spec{{Name: "a", Windows: []Window{{Start: "2026-12-24T18:00", End: "2026-12-24T18:00:00"}}}}, "a", "windows[0].end"},
		{"window with an offset", []Spec{{Name: "a", Windows: []Window{{Start: "2026-12-24T18:00+01:00", End: "2026-12-25T18:00"}}}}, "a", "windows[0].start"},
		{"unknown weekday", []Spec{{Name: "a", Weekly: []Weekly{{Days: []string{"SAT"}}, {Days: []string{"SAT", "SUNDAY"}}}}}, "a", "weekly[1].days[1]"},
		{"no weekday", []Spec{{Name: "a", Weekly: []Weekly{{Start: "10:00", End: "11:00"}}}}, "a", "weekly[0].days"},
		{"weekly start without end", []Spec{{Name: "a", Weekly: []Weekly{{Days: []string{"MON"}, Start: "10:00"}}}}, "a", "weekly[0].end"},
		{"bad clock", []Spec{{Name: "a", Daily: []Daily{{Start: "24:00", End: "06:00"}}}}, "a", "daily[0].start"},
		{"short clock", []Spec{{Name: "a", Daily: []Daily{{Start: "22:00", End: "6:00"}}}}, "a", "daily[0].end"},
		{"day rule fields", []Spec{{Name: "a", Days: []string{"25 12 * *"}}}, "a", "days[0]"},
		{"day rule syntax", []Spec{{Name: "a", Days: []string{"1 1 *", "32 * *"}}}, "a", "days[1]"},
		{"day rule never", []Spec{{Name: "a", Days: []string{"30 2 *"}}}, "a", "days[0]"},
		{"unknown extends", []Spec{{Name: "a", Extends: []string{"b"}}}, "a", "extends[0]"},
		{"self extends", []Spec{{Name: "a", Extends: []string{"a"}}}, "a", "extends[0]"},
		{"extends cycle", []Spec{{Name: "a", Extends: []string{"b"}}, {Name: "b", Extends: []string{"c"}}, {Name: "c", Extends: []string{"a"}}}, "c", "extends[0]"},
		{"bad zone", []Spec{{Name: "a", Timezone: "Mars/Olympus_Mons"}}, "a", "timezone"},
		{"Local", []Spec{{Name: "a", Timezone: "Local"}}, "a", "timezone"},
		{"mode", []Spec{{Name: "a", Mode: "sometimes"}}, "a", "mode"},
		{"no name", []Spec{{Dates: []string{"2026-12-25"}}}, "", "name"},
		{"same name", []Spec{{Name: "a"}, {Name: "a"}}, "a", "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cals, err := Compile(tc.specs)
			if err == nil {
				t.Fatalf("Compile accepted it: %v", cals)
			}
			var list Errors
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("Compile = %v; want one error in an Errors", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Compile = %v; want a *FieldError", err)
			}
			if fe.Calendar != tc.calendar || fe.Field != tc.field {
				t.Errorf("error on %q %q; want %q %q (%v)", fe.Calendar, fe.Field, tc.calendar, tc.field, err)
			}
			t.Log(err)
		})
	}

	// Several problems, all reported, in order.
	_, err := Compile([]Spec{
		{Name: "a", Mode: "sometimes", Dates: []string{"2026-13-01"}},
		{Name: "b", Timezone: "Local", Extends: []string{"a", "nope"}},
	})
	var list Errors
	if !errors.As(err, &list) {
		t.Fatalf("Compile = %v", err)
	}
	var got []string
	for _, fe := range list {
		got = append(got, fe.Calendar+" "+fe.Field)
	}
	want := []string{"a mode", "a dates[0]", "b timezone", "b extends[1]"}
	if len(got) != len(want) {
		t.Fatalf("errors on %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("errors on %v; want %v", got, want)
		}
	}
}

// TestWholeDayOnDSTDays checks the lengths the package doc promises: a
// whole local day lasts 23 hours when clocks spring forward, 25 when they
// fall back, and a day starting at a skipped midnight starts at 01:00.
func TestWholeDayOnDSTDays(t *testing.T) {
	for _, tc := range []struct {
		zone, date string
		start      string // RFC 3339, the day's first instant
		hours      float64
	}{
		{"America/New_York", "2026-03-08", "2026-03-08T00:00:00-05:00", 23},
		{"America/New_York", "2026-11-01", "2026-11-01T00:00:00-04:00", 25},
		{"Australia/Lord_Howe", "2026-04-05", "2026-04-05T00:00:00+11:00", 24.5},
		{"America/Sao_Paulo", "2018-11-04", "2018-11-04T01:00:00-02:00", 23},
		{"America/Santiago", "2026-04-04", "2026-04-04T00:00:00-03:00", 25},
	} {
		cals := mustCompile(t, Spec{Name: "day", Timezone: tc.zone, Mode: ModeInclude, Dates: []string{tc.date}})
		c := cals["day"]
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if tc.date < "2026" {
			from = time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		start, ok := c.NextAllowed(from, from.AddDate(2, 0, 0))
		if want, _ := time.Parse(time.RFC3339, tc.start); !ok || !start.Equal(want) {
			t.Errorf("%s %s starts at %v, %v; want %v", tc.zone, tc.date, start, ok, want)
			continue
		}
		// The day ends where the include calendar stops allowing:
		// the first allowed instant of its complement.
		ex := mustCompile(t, Spec{Name: "day", Timezone: tc.zone, Dates: []string{tc.date}})["day"]
		end, ok := ex.NextAllowed(start, start.AddDate(0, 0, 2))
		if got := end.Sub(start).Hours(); !ok || got != tc.hours {
			t.Errorf("%s %s lasts %v hours (ends %v); want %v", tc.zone, tc.date, got, end, tc.hours)
		}
	}
}
