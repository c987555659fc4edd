package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// MaxBackfillRuns is the most scheduled times one backfill may cover:
// counting them takes about 150 ms, and firing them at the default
// tockd --backfill-rate about an hour and a half.
const MaxBackfillRuns = 1_000_000

// BackfillRequest asks to fire the past scheduled times of a cron job.
type BackfillRequest struct {
	// From and To bound the scheduled times: From included, To excluded.
	From, To time.Time
	// Overlap is how backfill runs treat each other and the job's other
	// executions: "" or "allow" (the only one so far), they run without
	// waiting for one another.
	Overlap string
}

// Backfill records a backfill of job id: every scheduled time of its
// schedule in [From, To) (by schedule.Schedule.Next, so within the job's
// window) that has no execution yet is fired once, oldest first, by the
// node that owns the job's bucket, paced by that node's backfill rate
// (see the backfill package). It returns the backfill, its Total the
// number of scheduled times in the range.
//
// Rules, each fault reported under its field: From must be before To; To
// must not be after now (the database's clock), since future runs are the
// scheduler's; the range may hold at most MaxBackfillRuns scheduled
// times ("to"); Overlap must be "" or "allow". Only a cron job can be
// backfilled (a one-shot job has its single run; reported under "id"). The
// job's state does not matter: a paused or completed cron job can be
// backfilled too.
//
// It fails with store.ErrNotFound when there is no such job, and with an
// *InvalidError for the faults.
func (s *Service) Backfill(ctx context.Context, id uuid.UUID, req BackfillRequest) (*model.Backfill, error) {
	var f faults
	if req.Overlap != "" && req.Overlap != "allow" {
		f.add("overlap", "must be allow (backfill runs do not wait for each other), not %q", req.Overlap)
	}
	if !req.From.Before(req.To) {
		f.add("to", "must be after from")
	}
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	if req.To.After(now) {
		f.add("to", "must not be after now (%s): runs to come are the scheduler's", now.Format(time.RFC3339))
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	sched, err := schedule.Compile(j.Schedule)
	if err != nil {
		return nil, fmt.Errorf("backfill job %s: compile stored schedule: %w", id, err)
	}
	if !sched.Recurring() {
		f.add("id", "job %s is a one-shot job (kind %s): it has a single run, so only cron jobs can be backfilled",
			id, j.Schedule.Kind())
		return nil, f.err()
	}
	total, ok := sched.Count(req.From, req.To, MaxBackfillRuns)
	if !ok {
		f.add("to", "the range holds more than %d scheduled times: backfill it in parts", MaxBackfillRuns)
		return nil, f.err()
	}
	return s.store.CreateBackfill(ctx, id, req.From, req.To, int64(total))
}

// StopBackfill stops job id's backfill backfillID: it creates no further
// execution (those it created run). Stopping a stopped backfill does
// nothing; one that is done or failed fails with store.ErrBackfillEnded,
// an unknown one with store.ErrNotFound.
func (s *Service) StopBackfill(ctx context.Context, id, backfillID uuid.UUID) (*model.Backfill, error) {
	return s.store.StopBackfill(ctx, id, backfillID)
}
