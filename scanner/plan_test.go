package scanner

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// summary is what a firing does, in numbers a table can state.
type summary struct {
	fired     int       // runs fired
	first     time.Time // first run fired (zero if none)
	skipped   int64     // scheduled times skipped
	reason    string
	next      time.Time // zero: the job completes
	plainFire bool      // handled by the plain statement
}

func summarize(f store.Firing) summary {
	var s summary
	switch {
	case f.Runs == nil:
		s.fired, s.first, s.plainFire = 1, f.ScheduledFor, true
	case len(f.Runs) > 0:
		s.fired, s.first = len(f.Runs), f.Runs[0].At
	}
	for _, k := range f.Skips {
		s.skipped += k.Count
		s.reason = k.Reason
	}
	if f.Next != nil {
		s.next = *f.Next
	}
	return s
}

func TestPlan(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second) }
	every := schedule.Spec{Cron: "* * * * * *"}
	policy := func(p string, grace string, max int) domain.JobPolicy {
		return domain.JobPolicy{Missed: domain.MissedPolicy{Policy: p, Grace: grace, Max: max}}
	}
	tests := []struct {
		name string
		due  model.Due
		want summary
	}{
		{"on time", model.Due{NextRunAt: sec(0), Schedule: every},
			summary{fired: 1, first: sec(0), next: sec(1), plainFire: true}},
		{"late within grace fires", model.Due{NextRunAt: sec(-59), Schedule: every},
			summary{fired: 1, first: sec(-59), next: sec(-58), plainFire: true}},
		// Ten missed seconds (-12 .. -3) before a grace of 2s.
		{"skip", model.Due{NextRunAt: sec(-12), Schedule: every, Policy: policy("skip", "2s", 0)},
			summary{skipped: 10, reason: "missed", next: sec(-2)}},
		{"latest", model.Due{NextRunAt: sec(-12), Schedule: every, Policy: policy("latest", "2s", 0)},
			summary{fired: 1, first: sec(-3), skipped: 9, reason: "missed", next: sec(-2)}},
		{"all up to max", model.Due{NextRunAt: sec(-12), Schedule: every, Policy: policy("all", "2s", 5)},
			summary{fired: 5, first: sec(-7), skipped: 5, reason: "missed", next: sec(-2)}},
		{"all within max", model.Due{NextRunAt: sec(-12), Schedule: every, Policy: policy("all", "2s", 100)},
			summary{fired: 10, first: sec(-12), next: sec(-2)}},
		{"one missed under latest fires plainly", model.Due{NextRunAt: sec(-3), Schedule: every, Policy: policy("latest", "2s", 0)},
			summary{fired: 1, first: sec(-3), next: sec(-2), plainFire: true}},
		{"cluster default: latest after a minute", model.Due{NextRunAt: sec(-70), Schedule: every},
			summary{fired: 1, first: sec(-61), skipped: 9, reason: "missed", next: sec(-60)}},
		{"one-shot fires however late", model.Due{NextRunAt: sec(-86400), Policy: policy("skip", "1s", 0)},
			summary{fired: 1, first: sec(-86400), plainFire: true}},
		{"paused runs skipped", model.Due{NextRunAt: sec(-30), Schedule: every, SkipBefore: ptr(sec(-5))},
			summary{skipped: 25, reason: "paused", next: sec(-5)}},
		{"max_runs: the last run completes the job", model.Due{NextRunAt: sec(0), FiredCount: 2, Schedule: schedule.Spec{Cron: "* * * * * *", MaxRuns: 3}},
			summary{fired: 1, first: sec(0), plainFire: true}},
		{"max_runs caps a catch-up", model.Due{NextRunAt: sec(-12), FiredCount: 1, Policy: policy("all", "2s", 100),
			Schedule: schedule.Spec{Cron: "* * * * * *", MaxRuns: 4}},
			summary{fired: 3, first: sec(-12)}},
		{"max_runs already reached", model.Due{NextRunAt: sec(0), FiredCount: 3, Schedule: schedule.Spec{Cron: "* * * * * *", MaxRuns: 3}},
			summary{}},
		{"end of the window completes the job", model.Due{NextRunAt: sec(0), Schedule: schedule.Spec{Cron: "* * * * * *", EndAt: ptr(sec(0))}},
			summary{fired: 1, first: sec(0), plainFire: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.due.ID = uuid.New()
			sch, err := schedule.Compile(tt.due.Schedule)
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(plan(tt.due, sch, nil, now, domain.DefaultMissed))
			if got != tt.want {
				t.Errorf("plan = %+v\nwant   %+v", got, tt.want)
			}
		})
	}
}

// A long outage is decided a chunk at a time, and the chunks together
// skip every missed run but the one latest fires.
func TestPlanChunks(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	sch, _ := schedule.Compile(schedule.Spec{Cron: "* * * * * *"})
	d := model.Due{ID: uuid.New(), NextRunAt: now.Add(-25 * time.Hour), Schedule: schedule.Spec{Cron: "* * * * * *"}}
	var skipped int64
	fired := 0
	for i := 0; ; i++ {
		if i > 20 {
			t.Fatal("more than 20 chunks for a day of seconds")
		}
		f := plan(d, sch, nil, now, domain.DefaultMissed)
		for _, k := range f.Skips {
			skipped += k.Count
		}
		if f.Runs == nil {
			fired++
		} else {
			fired += len(f.Runs)
		}
		if d.NextRunAt = *f.Next; !d.NextRunAt.Before(now.Add(-time.Minute)) {
			break
		}
	}
	// 25 hours minus the minute of grace: 89,940 missed, one fired.
	if fired != 1 || skipped != 89_939 {
		t.Errorf("fired %d and skipped %d, want 1 and 89,939", fired, skipped)
	}
}

// Under the missed-run policy skip, more missed runs than a chunk are
// skipped a chunk at a time (it indexed past the chunk's end before).
func TestPlanSkipChunks(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	spec := schedule.Spec{Cron: "* * * * * *"}
	sch, _ := schedule.Compile(spec)
	d := model.Due{ID: uuid.New(), NextRunAt: now.Add(-25 * time.Hour), Schedule: spec,
		Policy: domain.JobPolicy{Missed: domain.MissedPolicy{Policy: domain.MissedSkip}}}
	f := plan(d, sch, nil, now, domain.DefaultMissed)
	if len(f.Skips) != 1 || f.Skips[0].Count != skipChunk || f.Next == nil || !f.Next.Equal(d.NextRunAt.Add(skipChunk*time.Second)) {
		t.Errorf("skips %+v, next %v", f.Skips, f.Next)
	}
}

func TestPlanJitter(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	spec := schedule.Spec{Cron: "0 * * * * *", Jitter: "30s"}
	sch, _ := schedule.Compile(spec)
	d := model.Due{ID: uuid.New(), NextRunAt: now, Schedule: spec}
	f := plan(d, sch, nil, now, domain.DefaultMissed)
	if len(f.Runs) != 1 || f.Runs[0].Due == nil {
		t.Fatalf("a jittered run: %+v", f.Runs)
	}
	off := f.Runs[0].Due.Sub(now)
	if off < 0 || off >= 30*time.Second {
		t.Errorf("offset %v outside [0, 30s)", off)
	}
	if again := plan(d, sch, nil, now.Add(time.Second), domain.DefaultMissed); !again.Runs[0].Due.Equal(*f.Runs[0].Due) {
		t.Errorf("a retried firing of the same run got another publish time: %v, then %v", *f.Runs[0].Due, *again.Runs[0].Due)
	}
}

func ptr[T any](v T) *T { return &v }

// cals compiles calendars for a test, each named by its spec.
func cals(t *testing.T, specs ...calendar.Spec) []*calendar.Calendar {
	t.Helper()
	m, err := calendar.Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*calendar.Calendar, len(specs))
	for i, sp := range specs {
		out[i] = m[sp.Name]
	}
	return out
}

func TestPlanCalendars(t *testing.T) {
	now := time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC) // a Thursday
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hourly := schedule.Spec{Cron: "0 0 * * * *"}
	holidays := calendar.Spec{Name: "holidays", Dates: []string{"2026-12-25", "2026-12-26"}}
	nightly := calendar.Spec{Name: "maintenance", Daily: []calendar.Daily{{Start: "12:00", End: "12:30"}}}
	nextAllowed := domain.JobPolicy{OnExcluded: domain.OnExcludedNextAllowed}
	tests := []struct {
		name   string
		due    model.Due
		cals   []calendar.Spec
		now    time.Time
		want   summary
		detail string
	}{
		{"allowed run fires plainly", model.Due{NextRunAt: now, Schedule: hourly}, []calendar.Spec{holidays}, now,
			summary{fired: 1, first: now, next: now.Add(time.Hour), plainFire: true}, ""},
		// Two excluded days of an hourly job: 48 runs, one range, one jump.
		{"excluded stretch: one range, next at the first allowed run",
			model.Due{NextRunAt: at("2026-12-25T00:00:00Z"), Schedule: hourly}, []calendar.Spec{holidays}, at("2026-12-25T00:00:00Z"),
			summary{skipped: 48, reason: "calendar", next: at("2026-12-27T00:00:00Z")}, "holidays: date 2026-12-25"},
		// Every 10 minutes, a window 12:00-12:30: 12:00, 12:10 and 12:20
		// excluded; next_allowed runs once at 12:30, which is a run time
		// itself, so it is the next run either way.
		{"next_allowed on a run time is the next run",
			model.Due{NextRunAt: now, Schedule: schedule.Spec{Cron: "0 */10 * * * *"}, Policy: nextAllowed}, []calendar.Spec{nightly}, now,
			summary{skipped: 3, reason: "calendar", next: at("2026-12-24T12:30:00Z")}, "maintenance: daily 12:00–12:30"},
		// Hourly: 12:00 excluded, the first allowed instant is 12:30, an
		// hour before the next allowed run (13:00).
		{"next_allowed runs once at the first allowed instant",
			model.Due{NextRunAt: now, Schedule: hourly, Policy: nextAllowed}, []calendar.Spec{nightly}, now,
			summary{skipped: 1, reason: "calendar", next: at("2026-12-24T12:30:00Z")}, "maintenance: daily 12:00–12:30; runs once at 2026-12-24T12:30:00Z (next_allowed)"},
		{"the deferred instant fires, then the schedule goes on",
			model.Due{NextRunAt: at("2026-12-24T12:30:00Z"), Schedule: hourly, Policy: nextAllowed}, []calendar.Spec{nightly}, at("2026-12-24T12:30:00Z"),
			summary{fired: 1, first: at("2026-12-24T12:30:00Z"), next: at("2026-12-24T13:00:00Z"), plainFire: true}, ""},
		// Down from 23:00 on the 24th to 03:00 on the 26th (grace 1m,
		// latest): 00:00 to 02:00 of the 25th... all excluded, 23:00 on the
		// 24th the latest allowed missed run fires.
		{"missed runs and a calendar",
			model.Due{NextRunAt: at("2026-12-24T22:00:00Z"), Schedule: hourly}, []calendar.Spec{holidays}, at("2026-12-25T03:00:30Z"),
			summary{fired: 1, first: at("2026-12-24T23:00:00Z"), skipped: 4, reason: "calendar", next: at("2026-12-25T03:00:00Z")}, "holidays: date 2026-12-25"},
		{"one-shot excluded is skipped and completes",
			model.Due{NextRunAt: at("2026-12-25T09:00:00Z")}, []calendar.Spec{holidays}, at("2026-12-25T09:00:00Z"),
			summary{skipped: 1, reason: "calendar"}, "holidays: date 2026-12-25"},
		{"one-shot excluded with next_allowed moves to the first allowed instant",
			model.Due{NextRunAt: at("2026-12-25T09:00:00Z"), Policy: nextAllowed}, []calendar.Spec{holidays}, at("2026-12-25T09:00:00Z"),
			summary{skipped: 1, reason: "calendar", next: at("2026-12-27T00:00:00Z")}, "holidays: date 2026-12-25; runs once at 2026-12-27T00:00:00Z (next_allowed)"},
		// New York, the day clocks fall back (2026-11-01, 25 hours): a
		// whole local day excluded holds 25 hourly runs.
		{"a whole day on a DST day",
			model.Due{NextRunAt: at("2026-11-01T04:00:00Z"), Schedule: hourly},
			[]calendar.Spec{{Name: "ny", Timezone: "America/New_York", Dates: []string{"2026-11-01"}}}, at("2026-11-01T04:00:00Z"),
			summary{skipped: 25, reason: "calendar", next: at("2026-11-02T05:00:00Z")}, "ny: date 2026-11-01"},
		// Every second over an excluded day: one firing, one range.
		{"every second over an excluded day",
			model.Due{NextRunAt: at("2026-12-25T00:00:00Z"), Schedule: schedule.Spec{Cron: "* * * * * *"}},
			[]calendar.Spec{{Name: "xmas", Dates: []string{"2026-12-25"}}}, at("2026-12-25T00:00:00Z"),
			summary{skipped: 86400, reason: "calendar", next: at("2026-12-26T00:00:00Z")}, "xmas: date 2026-12-25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.due.ID = uuid.New()
			sch, err := schedule.Compile(tt.due.Schedule)
			if err != nil {
				t.Fatal(err)
			}
			f := plan(tt.due, sch, cals(t, tt.cals...), tt.now, domain.DefaultMissed)
			if got := summarize(f); got != tt.want {
				t.Errorf("plan = %+v\nwant   %+v", got, tt.want)
			}
			var detail string
			for _, k := range f.Skips {
				if k.Reason == domain.SkipCalendar {
					detail = k.Detail
					if n := len(f.Skips); n != 1 && tt.name != "missed runs and a calendar" {
						t.Errorf("%d skip ranges, want one", n)
					}
				}
			}
			if detail != tt.detail {
				t.Errorf("detail %q, want %q", detail, tt.detail)
			}
		})
	}
}
