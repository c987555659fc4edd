package domain

// JobState is where a job is in its life.
type JobState string

// Job states.
const (
	JobActive    JobState = "active"
	JobPaused    JobState = "paused"
	JobCompleted JobState = "completed"
)

// JobStates lists the job states.
var JobStates = []JobState{JobActive, JobPaused, JobCompleted}

// ExecState is where an execution is in its life:
//
//	queued ──► running ──► succeeded
//	  │  ▲        │
//	  │  └─ failed ◄┘ (a retry follows)   running/failed ──► dead (no retry left; re-drive ──► queued)
//	  └──────────► cancelled (from queued, running or failed)
//
//	waiting ──► queued (its upstreams let it run: see Depends)
//	   └──────► cancelled, or removed into the skip ledger
//
// succeeded, cancelled and dead are final, except that a dead execution
// can be re-driven. store applies these rules (store/rules.go).
type ExecState string

// Execution states.
const (
	ExecQueued    ExecState = "queued"
	ExecRunning   ExecState = "running"
	ExecSucceeded ExecState = "succeeded"
	ExecFailed    ExecState = "failed"
	ExecCancelled ExecState = "cancelled"
	ExecDead      ExecState = "dead"
)

// ExecStates lists the execution states.
var ExecStates = []ExecState{ExecQueued, ExecRunning, ExecSucceeded, ExecFailed, ExecCancelled, ExecDead, ExecWaiting}

// Final reports whether s ends an execution: succeeded, dead or
// cancelled.
func (s ExecState) Final() bool {
	return s == ExecSucceeded || s == ExecDead || s == ExecCancelled
}

// Outcome is how an attempt ended; "" while it runs.
type Outcome string

// Attempt outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	// OutcomeTimedOut: the attempt was cut at the job's timeout.
	OutcomeTimedOut Outcome = "timed_out"
	// OutcomeCancelled: the attempt was stopped because its execution was
	// cancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeLost: the attempt's executor vanished without a result; a
	// later delivery (or the lost-work backstop) took the execution over.
	OutcomeLost Outcome = "lost"
)

// EventType is what an executor reports about a delivery of an
// execution. The wire protocol carries it; the recorder turns it into
// attempt and execution states.
type EventType string

// Event types.
const (
	// EventStarted: the attempt began (quick attempts report their start
	// with their end instead).
	EventStarted EventType = "started"
	// EventHeartbeat: the attempt is still running.
	EventHeartbeat EventType = "heartbeat"
	// EventSucceeded: the attempt succeeded.
	EventSucceeded EventType = "succeeded"
	// EventFailed: the attempt failed or timed out; a retry follows unless
	// it was final.
	EventFailed EventType = "failed"
	// EventCancelled: the execution was cancelled; the attempt was
	// stopped, or never began.
	EventCancelled EventType = "cancelled"
	// EventDeferred: the executor handed the delivery back unrun (its
	// handler's circuit breaker is open or its concurrency limit reached);
	// it is no attempt, and is published again later.
	EventDeferred EventType = "deferred"
)

// EventTypes lists the event types.
var EventTypes = []EventType{EventStarted, EventHeartbeat, EventSucceeded, EventFailed, EventCancelled, EventDeferred}

// Ends reports whether an event of type t ends its attempt.
func (t EventType) Ends() bool {
	return t == EventSucceeded || t == EventFailed || t == EventCancelled
}
