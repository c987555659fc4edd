package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/domain"
)

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
	// Batch names the executions of a bucket fired together for the same
	// instant, which the dispatcher publishes in one message while they
	// wait for their first dispatch (see Batched); the zero UUID for an
	// execution fired alone.
	Batch uuid.UUID
	// SlotKey is the concurrency key (domain.Concurrency.Slot) whose slot
	// the execution holds or waits for; "" without one.
	SlotKey string
	// RateKey is the rate-limit key (domain.RateLimit.Slot) its release
	// counted against; "" without one.
	RateKey string
	// AttemptList is filled by store.GetExecution only.
	AttemptList []Attempt
	// Notes, filled by store.GetExecution only, are what tock did to the
	// execution by itself: rescues, lost attempts.
	Notes []ExecutionNote
	// Fired is the span of the firing that made the execution (its
	// telemetry.SpanFire), in memory only, between the scanner and the
	// dispatcher; not valid when tracing is off or the execution came
	// from Postgres.
	Fired trace.SpanContext
}

// DueAt is when the execution is to be published: NextAttemptAt while a
// retry or deferral waits, else ScheduledFor.
func (e *Execution) DueAt() time.Time {
	if e.NextAttemptAt != nil {
		return *e.NextAttemptAt
	}
	return e.ScheduledFor
}

// Positional reports whether e's current dispatch is covered by its
// bucket's publish position (see store.AdvancePublishPositions) rather than marked one by one
// (store.MarkExecutionsDispatched): the first dispatch of a fired execution.
func (e *Execution) Positional() bool {
	return e.Dispatches == 0 && e.NextAttemptAt == nil && !e.Manual
}

// Batched reports whether the execution is published with the rest of
// its batch, in one message (when its queue takes batch messages): a
// first dispatch of a run fired in a batch. Everything else (retries,
// deferrals, re-drives, manual runs, runs re-queued after a wipe of
// JetStream) is published on its own.
func (e *Execution) Batched() bool {
	return e.Batch != uuid.Nil && e.Positional()
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

// AttemptEvent is one executor report about an attempt, for store.RecordAttemptEvents.
type AttemptEvent struct {
	ID       uuid.UUID
	Attempt  int // from 1
	Executor string
	At       time.Time
	// Type is what the executor reports.
	Type domain.EventType
	// TimedOut marks a failure cut at the job's timeout.
	TimedOut bool
	// Final says a failure will not be retried (the execution is dead).
	Final         bool
	Error, Output string
	// StartedAt is the attempt's start, on an end event whose start was
	// not reported on its own (see executor.Config.StartReportDelay).
	StartedAt *time.Time
	// RetryIn is, on a failure that is not final and on a deferral, how
	// long the execution waits before it is published again.
	RetryIn time.Duration
	// Dispatch is the dispatch number (wire.Execution.Dispatch) of the
	// message the event is about.
	Dispatch int
	// PublishedAt, if known, is when JetStream stored that message: the
	// execution's dispatch time, recorded if none is yet.
	PublishedAt *time.Time
}

// Outcome is the attempt outcome an end event records; "" for the
// other events.
func (ev *AttemptEvent) Outcome() domain.Outcome {
	switch ev.Type {
	case domain.EventSucceeded:
		return domain.OutcomeSucceeded
	case domain.EventCancelled:
		return domain.OutcomeCancelled
	case domain.EventFailed:
		if ev.TimedOut {
			return domain.OutcomeTimedOut
		}
		return domain.OutcomeFailed
	}
	return ""
}

// Dispatched is one publish of an execution that JetStream acknowledged,
// for store.MarkExecutionsDispatched: the execution's id and the Dispatch number the
// message carried (Execution.Dispatches when it was read).
type Dispatched struct {
	ID       uuid.UUID
	Dispatch int
}

// ExecStats is the statistics of one group of executions.
type ExecStats struct {
	// Key names the group: a job id, a handler queue, a namespace, or an
	// hour (RFC 3339, UTC).
	Key string
	// JobName is the job's name when grouped by job.
	JobName string
	// Counts are the executions by state; Total their sum.
	Counts map[domain.ExecState]int64
	Total  int64
	// SuccessRate is succeeded / (succeeded + dead): the share of the
	// executions that ended and were not cancelled that succeeded; nil
	// when none ended so.
	SuccessRate *float64
	// AttemptsPerExecution is the mean attempts of the ended executions;
	// nil when none ended.
	AttemptsPerExecution *float64
	// Duration is the p50, p95 and p99 of the finished executions' last
	// attempt (finished − started), in milliseconds; nil when none.
	Duration []float64
	// Lag is the p50 and p99 of how late executions started: from when
	// they were due (scheduled_for, or due_at for a jittered run) to
	// their (latest) attempt's start, in milliseconds; nil when none.
	Lag []float64
}

// BucketStat is one bucket as the database sees it.
type BucketStat struct {
	Bucket int
	Jobs   int64 // every job in the bucket, whatever its state
	Active int64 // active jobs
	// NextDue is the earliest next run of the bucket's active jobs; nil
	// when it has none.
	NextDue *time.Time
	// Node and Epoch are the ownership recorded in bucket_owners, the one
	// every firing transaction checks: "" and 0 if no node ever claimed
	// the bucket. It can trail etcd's owner key during a hand-over.
	Node  string
	Epoch int64
}

// ExecutionNote is something tock did to an execution by itself, beside
// its attempts: a rescue of an execution left waiting, an attempt taken
// for lost.
type ExecutionNote struct {
	At   time.Time
	Kind string // store.NoteRescued, store.NoteLost
	Note string
}

// StuckExecution is an execution that may be stuck (store.ListStuckExecutions):
// waiting since it was published at Since, or running and last seen alive
// at Since.
type StuckExecution struct {
	*Execution
	Since time.Time
}

// DeadEvent is an event the recorder could not place, kept for an
// operator (store.RecordDeadEvents) instead of dropped: about an execution
// Postgres does not hold (after recorder.UnknownGrace), or invalid.
type DeadEvent struct {
	ID         int64 // set by the store
	RecordedAt time.Time
	// Namespace, ExecutionID, ScheduledFor, Attempt and Type are what the
	// event said, where it said it validly (nil or empty otherwise).
	Namespace    string
	ExecutionID  *uuid.UUID
	ScheduledFor *time.Time
	Attempt      *int
	Type         string
	// Reason says why it could not be placed.
	Reason string
	// Event is the message's data as it came.
	Event []byte
}
