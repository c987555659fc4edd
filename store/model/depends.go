package model

import (
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// Waiting is an execution in state waiting, with what its job waits for,
// as the dependency resolver reads it.
type Waiting struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	Bucket       int
	Namespace    string
	JobName      string
	ScheduledFor time.Time
	Depends      domain.Depends
}

// UpstreamQuery asks for the upstream run that matches a waiting
// execution: job's execution scheduled At (Within 0: same_time), or the
// newest that ended within Within before At, else the first to end after
// it (latest_within).
type UpstreamQuery struct {
	Job    uuid.UUID
	At     time.Time
	Within time.Duration
}

// UpstreamRun is what the store knows of an UpstreamQuery's answer.
type UpstreamRun struct {
	// Execution is the matching execution (nil when none): its id, time,
	// state and end.
	Execution *UpstreamExecution
	// JobName and JobState are the upstream job's; Missing when the job
	// is gone.
	JobName  string
	JobState domain.JobState
	Missing  bool
	// NextRunAt is the upstream job's next run (nil: none).
	NextRunAt *time.Time
	// Skipped is the reason of the upstream's skipped range that holds
	// At ("" when none: same_time only).
	Skipped string
}

// UpstreamExecution is an upstream's execution as a dependency sees it.
type UpstreamExecution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	ScheduledFor time.Time
	State        domain.ExecState
	FinishedAt   *time.Time
}

// WaitDecision is what the resolver decided for a waiting execution:
// Release (it runs, satisfied by Upstreams), or skip it into the ledger
// with Reason and Detail. Timeout marks a decision taken because the wait
// ran out (for execution.dependency_timeout).
type WaitDecision struct {
	Waiting   Waiting
	Release   bool
	Upstreams []UpstreamExecution
	Reason    string
	Detail    string
	Timeout   bool
}

// WaitResult is what store.ApplyWaitDecisions did: executions released and
// times skipped (those another node or a cancel resolved first are in
// neither).
type WaitResult struct {
	Released, Skipped int
	// TimedOut lists the decisions on timeout that took effect.
	TimedOut []WaitDecision
}

// Edge is one dependency between two jobs, as the graph shows it.
type Edge struct {
	Downstream, Upstream JobRef
	On                   string
	Chain                bool
}

// JobRef names a job.
type JobRef struct {
	ID        uuid.UUID
	Namespace string
	Name      string
}

// ExecutionLink is an execution on the other side of a dependency:
// an upstream that satisfied an execution, or a downstream it released.
type ExecutionLink struct {
	ExecutionID  uuid.UUID
	JobID        uuid.UUID
	JobName      string
	Namespace    string
	ScheduledFor time.Time
	// State is the upstream's state when it satisfied the downstream
	// (for an upstream link), or the downstream's state now.
	State domain.ExecState
}
