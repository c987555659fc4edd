package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// CalendarYears is how far ahead a job's calendars must allow one of its
// runs: a job whose calendars allow none in as many years is refused.
const CalendarYears = 10

// checkCalendarNames checks the calendars a job names, and on_excluded,
// without reading them (CheckCalendars does).
func checkCalendarNames(names []string, onExcluded string, f *faults) {
	if len(names) > domain.MaxJobCalendars {
		f.add("calendars", "may name at most %d calendars", domain.MaxJobCalendars)
	}
	seen := map[string]bool{}
	for i, n := range names {
		field := fmt.Sprintf("calendars[%d]", i)
		if msg := NameProblem(n); msg != "" {
			f.add(field, "%s", msg)
		} else if seen[n] {
			f.add(field, "names calendar %q a second time", n)
		}
		seen[n] = true
	}
	if !domain.ValidOnExcluded(onExcluded) {
		f.add("on_excluded", "must be one of %s, %s", domain.OnExcludedSkip, domain.OnExcludedNextAllowed)
	}
}

// calendarPolicy is what a job stores of its calendars: none and no
// on_excluded, or the names and on_excluded with its default.
func calendarPolicy(names []string, onExcluded string) ([]string, string) {
	if len(names) == 0 {
		return nil, ""
	}
	if onExcluded == "" {
		onExcluded = domain.OnExcludedSkip
	}
	return append([]string(nil), names...), onExcluded
}

// CompileCalendars compiles a namespace's stored calendars.
func CompileCalendars(stored []model.Calendar) (map[string]*calendar.Calendar, error) {
	specs := make([]calendar.Spec, 0, len(stored))
	for _, c := range stored {
		var sp calendar.Spec
		if err := json.Unmarshal(c.Spec, &sp); err != nil {
			return nil, fmt.Errorf("stored calendar %s/%s: %w", c.Namespace, c.Name, err)
		}
		sp.Name = c.Name
		specs = append(specs, sp)
	}
	return calendar.Compile(specs)
}

// CheckCalendars checks the calendars job j names against its
// namespace's: each must exist (a fault on "calendars[i]"), and together
// they must allow one of its runs within CalendarYears (a fault on
// "calendars" naming the calendars that exclude them). A one-shot run
// they exclude is refused under on_excluded skip (it would never run);
// under next_allowed it runs at the first instant they allow. A chain
// (no schedule of its own) cannot name calendars. A job that names none
// is not read.
func (s *Service) CheckCalendars(ctx context.Context, j *model.Job) error {
	p := policyOf(j)
	if len(p.Calendars) == 0 {
		return nil
	}
	var f faults
	if j.Depends != nil && j.Depends.Chain {
		f.add("calendars", "a job without a schedule of its own (a chain) runs when its upstreams do: it cannot name calendars")
		return f.err()
	}
	stored, err := s.store.ListCalendars(ctx, j.Namespace)
	if err != nil {
		return err
	}
	compiled, err := CompileCalendars(stored)
	if err != nil {
		return err
	}
	cals := make([]*calendar.Calendar, 0, len(p.Calendars))
	for i, name := range p.Calendars {
		c := compiled[name]
		if c == nil {
			f.add(fmt.Sprintf("calendars[%d]", i), "no calendar %q in namespace %q", name, j.Namespace)
			continue
		}
		cals = append(cals, c)
	}
	if err := f.err(); err != nil {
		return err
	}
	sched, err := schedule.Compile(j.Schedule)
	if err != nil {
		return nil // the schedule's own fault is reported by its check
	}
	var after time.Time
	switch {
	case j.NextRunAt != nil:
		after = j.NextRunAt.Add(-time.Millisecond)
	case !sched.Recurring() && j.Schedule.At != nil:
		after = j.Schedule.At.Add(-time.Millisecond)
	default:
		if after, err = s.Now(ctx); err != nil {
			return err
		}
	}
	limit := after.AddDate(CalendarYears, 0, 0)
	if sched.Recurring() {
		if _, _, ok := calendar.FirstAllowed(cals, sched.Next, after, limit); !ok {
			f.add("calendars", "allow none of the job's scheduled times in the next %d years: %s", CalendarYears,
				excluders(cals, func(c []*calendar.Calendar) bool {
					_, _, ok := calendar.FirstAllowed(c, sched.Next, after, limit)
					return ok
				}))
		}
		return f.err()
	}
	// A one-shot job: its one run.
	t := after.Add(time.Millisecond)
	var refusedBy string
	for _, c := range cals {
		if !c.Allowed(t) {
			name, reason := c.Why(t)
			refusedBy = fmt.Sprintf("calendar %q (%s)", name, reason)
			break
		}
	}
	switch {
	case refusedBy == "":
	case p.OnExcluded != domain.OnExcludedNextAllowed:
		f.add("calendars", "do not allow the job's run at %s: %s excludes it, and with on_excluded skip it would never run (on_excluded next_allowed runs it at the first instant they allow)",
			t.UTC().Format(time.RFC3339), refusedBy)
	default:
		every := func(x time.Time) (time.Time, bool) { return x.Truncate(time.Second).Add(time.Second), true }
		if _, _, ok := calendar.FirstAllowed(cals, every, t, limit); !ok {
			f.add("calendars", "allow no instant after the job's run at %s in the next %d years: %s", t.UTC().Format(time.RFC3339), CalendarYears,
				excluders(cals, func(c []*calendar.Calendar) bool {
					_, _, ok := calendar.FirstAllowed(c, every, t, limit)
					return ok
				}))
		}
	}
	return f.err()
}

// excluders names the calendars of cals that, each on its own, allow
// nothing (by allows), or says that they do so together.
func excluders(cals []*calendar.Calendar, allows func([]*calendar.Calendar) bool) string {
	var names []string
	for _, c := range cals {
		if !allows([]*calendar.Calendar{c}) {
			names = append(names, fmt.Sprintf("%q", c.Name()))
		}
	}
	switch len(names) {
	case 0:
		all := make([]string, len(cals))
		for i, c := range cals {
			all[i] = fmt.Sprintf("%q", c.Name())
		}
		return "calendars " + strings.Join(all, ", ") + " exclude them together"
	case 1:
		return "calendar " + names[0] + " excludes them"
	}
	return "calendars " + strings.Join(names, ", ") + " exclude them"
}

// maxCalendarJobs bounds the jobs a calendar's change looks at.
const maxCalendarJobs = 100_000

// CalendarUsers names the jobs of namespace that name calendar name
// directly, at most limit of them (by name).
func (s *Service) CalendarUsers(ctx context.Context, namespace, name string, limit int) ([]string, error) {
	js, err := s.store.ListCalendarJobs(ctx, namespace, []string{name}, limit)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Name
	}
	return out, nil
}

// CalendarChanged applies a change of calendar name (stored already) to
// the jobs of namespace that name it, directly or through calendars that
// extend it: a job whose next run was moved past runs the calendars
// excluded (see scanner's plan) gets its schedule's first run after now
// instead, when that is sooner, so that it does not sleep through runs
// the calendar now allows; the scanner then decides that run by the
// calendars as they are. The moves are compare-and-set on each job's
// next run, and announced to the scanners. It returns how many jobs it
// moved.
func (s *Service) CalendarChanged(ctx context.Context, namespace, name string) (int, error) {
	stored, err := s.store.ListCalendars(ctx, namespace)
	if err != nil {
		return 0, err
	}
	names := users(stored, name)
	js, err := s.store.ListCalendarJobs(ctx, namespace, names, maxCalendarJobs)
	if err != nil {
		return 0, err
	}
	now, err := s.Now(ctx)
	if err != nil {
		return 0, err
	}
	var moves []model.NextRunMove
	for _, j := range js {
		if j.State != domain.JobActive || j.NextRunAt == nil {
			continue
		}
		sched, err := s.compiled.Compile(j.Schedule)
		if err != nil {
			continue
		}
		var to time.Time
		switch {
		case sched.Recurring():
			t, ok := sched.Next(now)
			if !ok {
				continue
			}
			to = t
		case j.Schedule.At != nil:
			// A one-shot run moved to the first instant its calendars
			// allowed (next_allowed): back to its own time, or now.
			to = j.Schedule.At.UTC().Truncate(time.Millisecond)
			if to.Before(now) {
				to = now.Truncate(time.Millisecond)
			}
		default:
			continue
		}
		if to.Before(*j.NextRunAt) {
			moves = append(moves, model.NextRunMove{ID: j.ID, Bucket: j.Bucket, From: *j.NextRunAt, To: to})
		}
	}
	return s.store.UpdateJobNextRuns(ctx, moves)
}

// users is name and the calendars of stored that extend it, directly or
// not.
func users(stored []model.Calendar, name string) []string {
	extends := map[string][]string{}
	for _, c := range stored {
		var sp calendar.Spec
		if json.Unmarshal(c.Spec, &sp) == nil {
			extends[c.Name] = sp.Extends
		}
	}
	out := []string{name}
	seen := map[string]bool{name: true}
	for changed := true; changed; {
		changed = false
		for c, ext := range extends {
			if seen[c] {
				continue
			}
			for _, e := range ext {
				if seen[e] {
					seen[c], changed = true, true
					out = append(out, c)
					break
				}
			}
		}
	}
	return out
}
