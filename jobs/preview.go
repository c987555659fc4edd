package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// Limits of a schedule preview.
const (
	// DefaultPreviewCount is how many runs a preview lists when the
	// caller names no count.
	DefaultPreviewCount = 10
	// MaxPreviewCount is the most runs one preview lists.
	MaxPreviewCount = 1000
)

// Preview is what a schedule will fire: its next runs, computed by the
// code that fires them (schedule.Schedule.Preview), each with its wall
// clock and daylight saving mark.
type Preview struct {
	// Job is the job previewed; nil for PreviewSpec.
	Job *model.Job
	// Schedule is the schedule previewed.
	Schedule schedule.Spec
	// Location is its time zone: UTC unless the schedule names one.
	Location *time.Location
	// From is the time the runs follow.
	From time.Time
	// Fires are the runs, earliest first.
	Fires []schedule.Fire
	// Waits is, for a job with dependencies, what each of Fires waits
	// for: one UpstreamFire per upstream (nil otherwise).
	Waits [][]UpstreamFire
}

// Preview lists the next n runs of job id after from (the database's
// clock when from is zero), 1 ≤ n ≤ MaxPreviewCount.
//
// A cron job lists its schedule's runs whatever its state: a paused job's
// are those it would fire if resumed, a completed one's (a cron job
// completes only when its schedule ran out) may be none; the window
// (start_at, end_at) bounds them, and a job with max_runs lists at most
// the runs it has left. A one-shot job
// lists its single run whatever from says: when it will run (active),
// when it ran (completed), or when it would run if resumed at from
// (paused).
//
// It fails with an *InvalidError on "count", before reading the job, and
// with store.ErrNotFound.
func (s *Service) Preview(ctx context.Context, id uuid.UUID, from time.Time, n int) (*Preview, error) {
	var f faults
	checkCount(n, &f)
	if err := f.err(); err != nil {
		return nil, err
	}
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	sched, err := schedule.Compile(j.Schedule)
	if err != nil {
		return nil, fmt.Errorf("preview job %s: compile stored schedule: %w", id, err)
	}
	if from.IsZero() {
		if from, err = s.Now(ctx); err != nil {
			return nil, err
		}
	}
	p := &Preview{Job: j, Schedule: j.Schedule, Location: sched.Location(), From: from}
	if j.Depends != nil && j.Depends.Chain {
		return p, s.previewDepends(ctx, p, j, n)
	}
	if sched.Recurring() {
		// A job with max_runs has only the runs it has left.
		if m := j.Schedule.MaxRuns; m > 0 {
			n = int(min(int64(n), max(m-j.FiredCount, 0)))
		}
		// The only failure of a cron schedule's preview is having no run
		// within the search horizon: nothing to list.
		p.Fires, _ = sched.Preview(from, n)
	} else {
		at, err := oneShotRun(j, from)
		if err != nil {
			return nil, fmt.Errorf("preview job %s: %w", id, err)
		}
		p.Fires = []schedule.Fire{sched.Classify(at)}
	}
	if j.Depends != nil {
		return p, s.previewDepends(ctx, p, j, n)
	}
	return p, nil
}

// oneShotRun is the single run of one-shot job j: its next run while it
// is active, its last once it completed, and while it is paused the run
// Resume at from would give it.
func oneShotRun(j *model.Job, from time.Time) (time.Time, error) {
	switch {
	case j.NextRunAt != nil:
		return *j.NextRunAt, nil
	case j.State == domain.JobCompleted && j.LastRunAt != nil:
		return *j.LastRunAt, nil
	}
	return resumeAt(j.Schedule, from)
}

// PreviewSpec lists the first n runs a job with schedule sp would fire if
// it were created at from (the database's clock when from is zero),
// 1 ≤ n ≤ MaxPreviewCount: for a cron schedule its next n runs after
// from, for a one-shot its single run. sp is checked as Create checks a
// job's schedule, against from instead of now; what is wrong comes back
// as an *InvalidError naming "schedule.cron", "schedule.timezone", …,
// and "count".
func (s *Service) PreviewSpec(ctx context.Context, sp schedule.Spec, from time.Time, n int) (*Preview, error) {
	var f faults
	sched := s.compile(sp, &f)
	checkCount(n, &f)
	if sched == nil || len(f) > 0 {
		return nil, f.err()
	}
	if from.IsZero() {
		var err error
		if from, err = s.Now(ctx); err != nil {
			return nil, err
		}
	}
	fires, err := sched.Preview(from, n)
	if err != nil {
		addScheduleError(err, &f)
		return nil, f.err()
	}
	return &Preview{Schedule: sp, Location: sched.Location(), From: from, Fires: fires}, nil
}

// checkCount checks how many runs a preview is asked for.
func checkCount(n int, f *faults) {
	if n < 1 || n > MaxPreviewCount {
		f.add("count", "must be between 1 and %d, got %d", MaxPreviewCount, n)
	}
}
