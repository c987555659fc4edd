package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
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

// Job is a stored job.
type Job struct {
	ID        uuid.UUID
	Bucket    int
	Namespace string
	Name      string
	Schedule  schedule.Spec
	Handler   domain.Handler
	Payload   json.RawMessage // nil when the job has none
	State     domain.JobState
	// NextRunAt is the next scheduled time (UTC, millisecond precision);
	// nil when the job is paused or completed.
	NextRunAt *time.Time
	LastRunAt *time.Time
	Retry     domain.RetryPolicy
	Timeout   time.Duration // 0: no timeout
	// Priority is the class its executions are published in:
	// domain.PriorityHigh, PriorityNormal or PriorityLow ("" means normal
	// when creating, and the stored one when updating).
	Priority  domain.Priority
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version changes on every write of the job; UpdateJob writes only if
	// it is still the one read (optimistic concurrency).
	Version int64
	// SpecID names the job spec its executions run (handler, payload,
	// retry policy, timeout): set by the store from that content.
	SpecID *uuid.UUID
	// Labels and Description are the job's own, for people and
	// selectors; nil and "" when it has none.
	Labels      domain.Labels
	Description string
	// Policy is the job's missed-run and overlap policies; nil on jobs
	// stored before policies existed (the scanner's defaults apply).
	Policy *domain.JobPolicy
	// Runs counts the runs fired so far (Schedule.MaxRuns completes the
	// job); firing maintains it.
	Runs int64
	// PausedNextRunAt is, while the job is paused, the next run it had
	// when it was paused (nil if it had none); resuming reads it.
	PausedNextRunAt *time.Time
	// SkipBefore: runs before it are skipped as paused (a resume without
	// catch-up sets it); nil for none.
	SkipBefore *time.Time
	// LastSuccessAt is when the job's latest succeeded execution (by its
	// end) finished; nil if none has succeeded since the job was created
	// or since tock began tracking successes. The recorder maintains it;
	// the store ignores it on writes.
	LastSuccessAt *time.Time
}

// Execution is one run of a job for one scheduled time (or one manual
// run). It carries a snapshot of the job's handler and payload taken when
// it fired, so it can be dispatched even if the job changes or is deleted.
type Execution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	Bucket       int
	Namespace    string
	JobName      string
	ScheduledFor time.Time
	Manual       bool   // fired by POST /v1/jobs/{id}/run
	FiredBy      string // the scheduler node that fired it; "" for manual runs
	State        domain.ExecState
	Attempts     int
	Handler      domain.Handler
	Payload      json.RawMessage
	Retry        domain.RetryPolicy
	Timeout      time.Duration
	// Priority is the job's priority class when it fired.
	Priority domain.Priority
	// NextAttemptAt is when the outbox publishes the execution next, while
	// a retry, a deferred delivery or a re-drive waits; nil means at
	// ScheduledFor. It is cleared when an attempt runs or the execution
	// ends.
	NextAttemptAt *time.Time
	// SeriesBase is the number of attempts made before the current series
	// of attempts (0 until the execution is re-driven after it died).
	SeriesBase int
	// Dispatches numbers the execution's current publish, from 0: one more
	// for each retry, deferral or re-drive.
	Dispatches   int
	DispatchedAt *time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	ExecutorID   string
	Error        string
	Output       string
	CreatedAt    time.Time
	// JitteredDue is, for a run of a job with jitter, when it was due to
	// be published (ScheduledFor plus the job's offset); nil otherwise.
	JitteredDue *time.Time
	// Backfill marks an execution made by a backfill.
	Backfill bool
	// Buffered marks the run an overlap policy of buffer_one keeps
	// waiting until the job's earlier executions end.
	Buffered bool
	// AttemptList is filled by GetExecution only.
	AttemptList []Attempt
}

// Attempt is one try of an execution by an executor.
type Attempt struct {
	Number     int
	ExecutorID string
	// StartedAt is zero when the start is unknown (a lost attempt that
	// never reported, or one known only from its heartbeats).
	StartedAt   time.Time
	FinishedAt  *time.Time
	HeartbeatAt *time.Time // the last heartbeat of a long attempt
	// Outcome is "" while the attempt runs.
	Outcome domain.Outcome
	Error   string
	Output  string
}

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
	Runs  []Run
	Skips []Skip
	// Overlap is the job's overlap policy (domain.OverlapSkip, ...; ""
	// or allow for none): the store applies it against the job's
	// executions that have not ended, within the firing's transaction.
	Overlap string
	// cancel: the overlap decision cancels the job's unended executions.
	cancel bool
}

// DueAt is when the execution is to be published: NextAttemptAt while a
// retry or deferral waits, else ScheduledFor.
func (e *Execution) DueAt() time.Time {
	if e.NextAttemptAt != nil {
		return *e.NextAttemptAt
	}
	return e.ScheduledFor
}
