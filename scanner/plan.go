package scanner

import (
	"time"

	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// defaultGrace is the grace of a policy whose Grace cannot be read.
const defaultGrace = time.Minute

// skipChunk bounds the scheduled times one firing looks at when a job
// missed many (an every-second job after a day down): the rest are
// decided by the job's next firings, a chunk each, so one firing stays
// small whatever the outage.
const skipChunk = 10_000

// calendarYears is how far ahead the search for a time a job's calendars
// allow goes: the API refuses a job whose calendars allow none of its
// runs in as many years.
const calendarYears = 10

// calendarChunk bounds the excluded runs one firing counts into its skip
// range: an excluded stretch holding more (a month of an every-second
// job) is skipped a chunk per firing, each a few milliseconds of work.
const calendarChunk = 100_000

// maxSkipRanges bounds the skip ranges one firing records when missed
// runs and runs its calendars exclude alternate: the rest is decided by
// the job's next firing.
const maxSkipRanges = 100

// plan decides what firing job d's due run does at time now (the
// database's clock), given its compiled schedule (nil if it cannot be
// compiled: the run fires and the job completes), its compiled calendars
// (nil when it names none) and the cluster's default missed-run policy:
//
//   - a one-shot job fires its run, however late;
//   - runs before d.SkipBefore (a resume without catch-up) are skipped
//     as paused;
//   - a run later than its grace is missed, and the job's missed-run
//     policy decides which missed runs fire (the rest are skipped); a
//     run within its grace fires;
//   - no more runs fire than max_runs allows, and the job completes at
//     its last run (or the end of its window);
//   - each run fired carries its jitter offset;
//   - the job's overlap policy goes along, for the store to apply;
//   - a run its calendars do not allow does not fire (see excluded): it
//     is skipped with the rest of the excluded stretch, as one range
//     (reason calendar, the detail naming the calendar and its rule),
//     and the job's next run is the first scheduled time they allow or,
//     with on_excluded next_allowed, the first instant they allow if
//     that comes sooner; missed runs they exclude are skipped the same
//     way, and the missed-run policy chooses among the others.
//
// Every scheduled time from d.NextRunAt up to the returned Next is
// either fired or skipped, in one decision that depends only on d, the
// schedule and now, so any node makes the same one.
func plan(d model.Due, sch *schedule.Schedule, cals []*calendar.Calendar, now time.Time, def domain.MissedPolicy) store.Firing {
	f := store.Firing{JobID: d.ID, Bucket: d.Bucket, ScheduledFor: d.NextRunAt}
	t := d.NextRunAt
	if sch == nil || !sch.Recurring() {
		if len(cals) > 0 && !allowed(cals, t) {
			// A one-shot run they exclude is skipped, or with next_allowed
			// moved to the first instant they allow (where it fires).
			f.Runs = []model.Run{}
			f.Skips = []model.Skip{{First: t, Last: t, Count: 1, Reason: domain.SkipCalendar, Detail: why(cals, t)}}
			if d.Policy.OnExcluded == domain.OnExcludedNextAllowed {
				if b, ok := firstInstant(cals, t); ok {
					f.Next = &b
					f.Skips[0].Detail += nextAllowedNote(b)
				}
			}
			return named(f, d)
		}
		f.Runs = jittered(sch, d, []time.Time{t})
		return named(f, d)
	}
	var runs []time.Time
	policy := d.Policy.Missed.WithDefaults(def)
	cutoff := now.Add(-policy.GraceDuration(defaultGrace))
	switch {
	case d.SkipBefore != nil && t.Before(*d.SkipBefore):
		times, after := collect(sch, t, *d.SkipBefore, skipChunk)
		f.Skips = skipsOf(times, domain.SkipPaused)
		f.Next = after
	case len(cals) > 0 && !allowed(cals, t):
		f.Skips, f.Next = excluded(d, sch, cals, t)
	case t.Before(cutoff) && len(cals) > 0:
		runs, f.Skips, f.Next = missedAllowed(d, sch, cals, cutoff, policy)
	case t.Before(cutoff):
		runs, f.Skips, f.Next = missed(d, sch, cutoff, policy)
	default:
		runs = []time.Time{t}
		if next, ok := sch.Next(t); ok {
			f.Next = &next
		}
	}
	if m := d.Schedule.MaxRuns; m > 0 {
		if left := max(m-d.FiredCount, 0); int64(len(runs)) >= left {
			runs, f.Next = runs[:left], nil
		}
	}
	f.Runs = jittered(sch, d, runs)
	if o := d.Policy.Overlap; o != "" && o != domain.OverlapAllow {
		// The store applies the overlap policy to the runs.
		f.Overlap = o
	}
	return named(f, d)
}

// named marks f with d's dependencies (runs that wait for upstreams, runs
// that chains follow) and, when that or its overlap policy sends it down
// the store's policy path, names its run: Runs nil fires ScheduledFor.
func named(f store.Firing, d model.Due) store.Firing {
	f.Waits, f.Chains, f.Concurrency, f.RateLimited = d.Waits, d.Chains, d.Policy.Concurrency, d.Policy.RateLimit != nil
	if f.Runs == nil && !f.Plain() {
		f.Runs = []model.Run{{At: f.ScheduledFor}}
	}
	return f
}

// missed applies policy p to the job's runs from d.NextRunAt missed
// before cutoff: which fire, which are skipped, and the next run.
func missed(d model.Due, sch *schedule.Schedule, cutoff time.Time, p domain.MissedPolicy) ([]time.Time, []model.Skip, *time.Time) {
	keep := kept(p)
	times, after := collect(sch, d.NextRunAt, cutoff, skipChunk+keep)
	if after != nil && after.Before(cutoff) {
		// More missed runs than one chunk: skip this chunk but the last
		// keep, which the next firing looks at again with the rest.
		if keep == 0 {
			return nil, skipsOf(times, domain.SkipMissed), after
		}
		n := len(times) - keep
		return nil, skipsOf(times[:n], domain.SkipMissed), &times[n]
	}
	fire := min(keep, len(times))
	return times[len(times)-fire:], skipsOf(times[:len(times)-fire], domain.SkipMissed), after
}

// kept is how many of the missed runs policy p fires: none, the latest,
// or up to its Max.
func kept(p domain.MissedPolicy) int {
	switch p.Policy {
	case domain.MissedLatest:
		return 1
	case domain.MissedAll:
		return max(p.Max, 1)
	}
	return 0
}

// collect lists sch's runs from first (a run itself) that come before
// bound, at most limit of them, and the run after the last listed (nil
// if the schedule has none).
func collect(sch *schedule.Schedule, first, bound time.Time, limit int) ([]time.Time, *time.Time) {
	var times []time.Time
	t := first
	for t.Before(bound) && len(times) < limit {
		times = append(times, t)
		next, ok := sch.Next(t)
		if !ok {
			return times, nil
		}
		t = next
	}
	return times, &t
}

// skipsOf is the skipped range of times (none when empty).
func skipsOf(times []time.Time, reason string) []model.Skip {
	if len(times) == 0 {
		return nil
	}
	return []model.Skip{{First: times[0], Last: times[len(times)-1], Count: int64(len(times)), Reason: reason}}
}

// jittered makes runs of times, each published at its jitter offset
// (schedule.Schedule.Offset). It is nil for the plain case (one run at
// the job's next run, without jitter), and never nil otherwise, even
// when times is empty.
func jittered(sch *schedule.Schedule, d model.Due, times []time.Time) []model.Run {
	if sch == nil || sch.Jitter() == 0 {
		if len(times) == 1 && times[0].Equal(d.NextRunAt) {
			return nil
		}
		runs := make([]model.Run, len(times))
		for i, t := range times {
			runs[i] = model.Run{At: t}
		}
		return runs
	}
	runs := make([]model.Run, len(times))
	for i, t := range times {
		due := t.Add(sch.Offset(d.ID, t))
		runs[i] = model.Run{At: t, Due: &due}
	}
	return runs
}

// allowed reports whether every calendar of cals allows t.
func allowed(cals []*calendar.Calendar, t time.Time) bool {
	for _, c := range cals {
		if !c.Allowed(t) {
			return false
		}
	}
	return true
}

// why names the first of cals that does not allow t and the rule that
// keeps it from doing so: "holidays: date 2026-12-25".
func why(cals []*calendar.Calendar, t time.Time) string {
	for _, c := range cals {
		if name, reason := c.Why(t); name != "" {
			return name + ": " + reason
		}
	}
	return ""
}

// nextAllowedNote is what a skip's detail adds when the job runs once at
// b instead (on_excluded next_allowed).
func nextAllowedNote(b time.Time) string {
	return "; runs once at " + b.UTC().Format(time.RFC3339) + " (next_allowed)"
}

// firstInstant is the first instant after t (a whole second, as run
// times are) that every calendar of cals allows, within calendarYears.
func firstInstant(cals []*calendar.Calendar, t time.Time) (time.Time, bool) {
	seconds := func(after time.Time) (time.Time, bool) {
		return after.Truncate(time.Second).Add(time.Second), true
	}
	b, _, ok := calendar.FirstAllowed(cals, seconds, t, t.AddDate(calendarYears, 0, 0))
	return b.UTC(), ok
}

// excluded decides a recurring job's run t that its calendars do not
// allow: the runs from t up to its next run are skipped, as one range
// named by the calendar and rule that exclude t, and its next run is the
// first scheduled time the calendars allow (calendar.FirstAllowed, which
// jumps over an excluded stretch rather than stepping through its runs)
// or, with on_excluded next_allowed, the first instant they allow after
// t when that comes sooner: there one run fires, for all those excluded.
// An excluded stretch of more than calendarChunk runs is skipped a chunk
// at a time, and one with no allowed time within calendarYears too, a
// chunk per firing.
func excluded(d model.Due, sch *schedule.Schedule, cals []*calendar.Calendar, t time.Time) ([]model.Skip, *time.Time) {
	limit := t.AddDate(calendarYears, 0, 0)
	var next *time.Time
	if a, _, ok := calendar.FirstAllowed(cals, sch.Next, t, limit); ok {
		next = &a
	}
	deferred := false
	if d.Policy.OnExcluded == domain.OnExcludedNextAllowed {
		if b, ok := firstInstant(cals, t); ok && (next == nil || b.Before(*next)) {
			next, deferred = &b, true
		}
	}
	bound := limit
	if next != nil {
		bound = *next
	}
	times, after := collect(sch, t, bound, calendarChunk)
	if next == nil || after != nil && after.Before(bound) {
		// The chunk is full, or nothing is allowed within the limit: the
		// job's next firing goes on from the run after the chunk.
		next, deferred = after, false
	}
	skip := model.Skip{First: times[0], Last: times[len(times)-1], Count: int64(len(times)),
		Reason: domain.SkipCalendar, Detail: why(cals, t)}
	if deferred {
		skip.Detail += nextAllowedNote(*next)
	}
	return []model.Skip{skip}, next
}

// missedAllowed is missed for a job with calendars: of its runs from
// d.NextRunAt missed before cutoff, those the calendars exclude are
// skipped (reason calendar), and the policy chooses which of the others
// fire (the rest are skipped as missed). Consecutive runs skipped for
// the same reason make one range, at most maxSkipRanges of them: the
// runs after are left to the next firing, as the runs after a chunk are.
func missedAllowed(d model.Due, sch *schedule.Schedule, cals []*calendar.Calendar, cutoff time.Time, p domain.MissedPolicy) ([]time.Time, []model.Skip, *time.Time) {
	keep := kept(p)
	times, after := collect(sch, d.NextRunAt, cutoff, skipChunk+keep)
	full := after != nil && after.Before(cutoff)
	if full && keep > 0 {
		// More missed runs than one chunk: this chunk but the last keep
		// fires nothing, and the next firing looks at those again.
		after = &times[len(times)-keep]
		times = times[:len(times)-keep]
	}
	ok := make([]bool, len(times))
	fire := make([]bool, len(times))
	left := keep
	if full {
		left = 0
	}
	for i := len(times) - 1; i >= 0; i-- {
		ok[i] = allowed(cals, times[i])
		if ok[i] && left > 0 {
			fire[i], left = true, left-1
		}
	}
	var (
		runs  []time.Time
		skips []model.Skip
	)
	for i, t := range times {
		if fire[i] {
			runs = append(runs, t)
			continue
		}
		reason := domain.SkipMissed
		if !ok[i] {
			reason = domain.SkipCalendar
		}
		if n := len(skips); n > 0 && skips[n-1].Reason == reason && !fire[i-1] && ok[i-1] == ok[i] {
			skips[n-1].Last = t
			skips[n-1].Count++
			continue
		}
		if len(skips) == maxSkipRanges {
			return runs, skips, &times[i]
		}
		k := model.Skip{First: t, Last: t, Count: 1, Reason: reason}
		if reason == domain.SkipCalendar {
			k.Detail = why(cals, t)
		}
		skips = append(skips, k)
	}
	return runs, skips, after
}
