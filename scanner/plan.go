package scanner

import (
	"time"

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

// plan decides what firing job d's due run does at time now (the
// database's clock), given its compiled schedule (nil if it cannot be
// compiled: the run fires and the job completes) and the cluster's
// default missed-run policy:
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
//   - the job's overlap policy goes along, for the store to apply.
//
// Every scheduled time from d.NextRunAt up to the returned Next is
// either fired or skipped, in one decision that depends only on d, the
// schedule and now, so any node makes the same one.
func plan(d model.Due, sch *schedule.Schedule, now time.Time, def domain.MissedPolicy) store.Firing {
	f := store.Firing{JobID: d.ID, Bucket: d.Bucket, ScheduledFor: d.NextRunAt}
	t := d.NextRunAt
	if sch == nil || !sch.Recurring() {
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
	keep := 0
	switch p.Policy {
	case domain.MissedLatest:
		keep = 1
	case domain.MissedAll:
		keep = max(p.Max, 1)
	}
	times, after := collect(sch, d.NextRunAt, cutoff, skipChunk+keep)
	if after != nil && after.Before(cutoff) {
		// More missed runs than one chunk: skip this chunk but the last
		// keep, which the next firing looks at again with the rest.
		n := len(times) - keep
		return nil, skipsOf(times[:n], domain.SkipMissed), &times[n]
	}
	fire := min(keep, len(times))
	return times[len(times)-fire:], skipsOf(times[:len(times)-fire], domain.SkipMissed), after
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
