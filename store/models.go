package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/executor/wire"
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
)

// Job states.
const (
	JobActive    = "active"
	JobPaused    = "paused"
	JobCompleted = "completed"
)

// Execution states.
const (
	ExecQueued    = "queued"
	ExecRunning   = "running"
	ExecSucceeded = "succeeded"
	ExecFailed    = "failed"
	ExecCancelled = "cancelled"
	ExecDead      = "dead"
)

// Job is a stored job.
type Job struct {
	ID        uuid.UUID
	Bucket    int
	Namespace string
	Name      string
	Schedule  schedule.Spec
	Handler   wire.Handler
	Payload   json.RawMessage // nil when the job has none
	State     string
	// NextRunAt is the next scheduled time (UTC, millisecond precision);
	// nil when the job is paused or completed.
	NextRunAt *time.Time
	LastRunAt *time.Time
	Retry     wire.RetryPolicy
	Timeout   time.Duration // 0: no timeout
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version changes on every write of the job; UpdateJob writes only if
	// it is still the one read (optimistic concurrency).
	Version int64
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
	State        string
	Attempts     int
	Handler      wire.Handler
	Payload      json.RawMessage
	Retry        wire.RetryPolicy
	Timeout      time.Duration
	DispatchedAt *time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	ExecutorID   string
	Error        string
	Output       string
	CreatedAt    time.Time
	// AttemptList is filled by GetExecution only.
	AttemptList []Attempt
}

// Attempt is one try of an execution by an executor.
type Attempt struct {
	Number     int
	ExecutorID string
	StartedAt  time.Time
	FinishedAt *time.Time
	Outcome    string // "" while running, then succeeded or failed
	Error      string
	Output     string
}

// Firing asks Fire to record that JobID fired at ScheduledFor.
type Firing struct {
	JobID  uuid.UUID
	Bucket int
	// ScheduledFor is the job's next_run_at as the scanner read it; the
	// firing only happens if the row still has this value (compare and set).
	ScheduledFor time.Time
	// Next is the following run; nil completes the job (one-shot jobs).
	Next *time.Time
}

// WireExecution is the message body the dispatcher publishes for e.
func (e *Execution) WireExecution() wire.Execution {
	return wire.Execution{
		ExecutionID:  e.ID.String(),
		JobID:        e.JobID.String(),
		Namespace:    e.Namespace,
		JobName:      e.JobName,
		ScheduledFor: e.ScheduledFor,
		Handler:      e.Handler,
		Payload:      e.Payload,
		TimeoutMS:    e.Timeout.Milliseconds(),
		Retry:        e.Retry,
	}
}
