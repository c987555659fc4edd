package model

import (
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/schedule"
)

// Backfill is a request to fire every scheduled time of a cron job in
// [From, To) that has no execution yet (see the backfill package).
type Backfill struct {
	ID     uuid.UUID
	JobID  uuid.UUID
	Bucket int
	From   time.Time
	To     time.Time
	// Total is how many scheduled times the range held when the backfill
	// was created.
	Total int64
	// Fired counts the executions the backfill created; times that had
	// an execution already are passed over and not counted.
	Fired int64
	// NextAt is the progress: every scheduled time before it is handled.
	NextAt     time.Time
	State      string
	Error      string
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// Backfill states.
const (
	// BackfillRunning: the bucket's owner is firing the range.
	BackfillRunning = "running"
	// BackfillDone: every scheduled time of the range was handled.
	BackfillDone = "done"
	// BackfillStopped: a user stopped it (store.StopBackfill).
	BackfillStopped = "stopped"
	// BackfillFailed: it could not go on (Backfill.Error says why).
	BackfillFailed = "failed"
)

// BackfillWork is a running backfill with the schedule of its job, as
// the backfill runner needs it.
type BackfillWork struct {
	Backfill
	// Schedule is the job's schedule now; nil when the job is gone.
	Schedule *schedule.Spec
}

// BackfillStep is one step of a running backfill, for store.StepBackfill: the
// next scheduled times of its range, oldest first.
type BackfillStep struct {
	ID     uuid.UUID
	Bucket int
	// From is the backfill's NextAt as the caller read it: the step does
	// nothing if it has moved since (compare and set).
	From time.Time
	// Times are the scheduled times to fire, ascending, each at or after
	// From and before the backfill's To.
	Times []time.Time
	// Next is the backfill's progress after Times: the next scheduled
	// time of the range after them, or To when none is left.
	Next time.Time
	// Done: no scheduled time of the range is left after Times.
	Done bool
	// Fail, when not "", ends the backfill as failed with this reason,
	// firing nothing.
	Fail string
}

// BackfillResult is what store.StepBackfill did.
type BackfillResult struct {
	// Executions are the executions created, to be dispatched.
	Executions []*Execution
	// Backfill is the backfill as the step left it.
	Backfill *Backfill
}
