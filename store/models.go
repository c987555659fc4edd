package store

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNotFound: no job or execution with that id (or name).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a job with that name already exists in the namespace.
	ErrConflict = errors.New("conflict")
	// ErrStale: the job changed (it fired, or another update won) since
	// it was read; read it again and redo the change.
	ErrStale = errors.New("job changed since it was read")
	// ErrRevision: the job's revision is not the one the caller names (an
	// If-Match that no longer holds): someone changed it since.
	ErrRevision = errors.New("the job changed since its revision was read")
	// ErrFenced: the bucket's recorded epoch is newer than the caller's;
	// the caller no longer owns the bucket and must stop firing in it.
	ErrFenced = errors.New("fenced: bucket owned at a newer epoch")
	// ErrFinished: the execution has finished (succeeded or dead), so it
	// can no longer be cancelled.
	ErrFinished = errors.New("the execution has finished")
	// ErrNotDead: only a dead execution can be re-driven.
	ErrNotDead = errors.New("the execution is not dead")
	// ErrInvalidJob: a job the store refuses to create, such as an active
	// job without a next run (see CreateJob).
	ErrInvalidJob = errors.New("invalid job")
)

// lostError is the error recorded on a lost attempt.
const lostError = "attempt lost: its executor stopped heartbeating"

// Firing asks Fire to record that JobID fired at ScheduledFor.
type Firing struct {
	JobID  uuid.UUID
	Bucket int
	// ScheduledFor is the job's next_run_at as the scanner read it; the
	// firing only happens if the row still has this value (compare and set).
	ScheduledFor time.Time
	// Next is the following run; nil completes the job (one-shot jobs,
	// the end of a window, the last of max_runs).
	Next *time.Time
	// Runs, when not nil, are the scheduled times to fire instead of
	// ScheduledFor alone (none, one or several: a missed-run policy's
	// choice), each perhaps jittered; Skips are the ranges of scheduled
	// times skipped. Both take effect only if the compare-and-set wins.
	Runs  []model.Run
	Skips []model.Skip
	// Overlap is the job's overlap policy (domain.OverlapSkip, ...; ""
	// or allow for none): the store applies it against the job's
	// executions that have not ended, within the firing's transaction.
	Overlap string
	// Waits: the job has dependencies, so its runs are inserted waiting
	// (the dependency resolver releases them). Chains: chains depend on
	// the job, so its runs also make their waiting executions.
	Waits, Chains bool
	// Concurrency is the job's concurrency policy, nil for none: its
	// executions carry its key (slotColumns), and for on_limit
	// cancel_oldest the firing cancels the key's oldest executions to
	// make room for its runs.
	Concurrency *domain.Concurrency
	// RateLimited: the job has a rate limit, which its executions carry.
	RateLimited bool
	// cancel: the overlap decision cancels the job's unended executions.
	cancel bool
}
