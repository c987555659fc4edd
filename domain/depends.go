package domain

import (
	"time"

	"github.com/google/uuid"
)

// ExecWaiting is the state of an execution whose time has come but whose
// job's upstreams (Depends) have not yet let it run: it is not in the
// outbox. The dependency resolver moves it to queued (it runs) or
// removes it into the skip ledger (SkipDependency,
// SkipDependencyTimeout), or a person cancels it.
const ExecWaiting ExecState = "waiting"

// Reasons a scheduled time of a dependent job was skipped.
const (
	// SkipDependency: an upstream ended in an outcome the edge does not
	// accept, or its run for that time was skipped; the ledger's detail
	// names the upstream execution (or the upstream's skip).
	SkipDependency = "dependency"
	// SkipDependencyTimeout: the upstreams had not resolved the wait
	// within the job's wait_timeout (on_timeout skip).
	SkipDependencyTimeout = "dependency_timeout"
)

// NotifyExecutionDependencyTimeout: a dependent job's execution waited
// out its wait_timeout for its upstreams (skipped, or run when
// on_timeout says run).
const NotifyExecutionDependencyTimeout = "execution.dependency_timeout"

// What an upstream's execution must end in for an edge to be satisfied
// (Upstream.On).
const (
	DependOnSuccess = "success" // succeeded
	DependOnFailure = "failure" // dead: every attempt failed
	DependOnAny     = "any"     // succeeded, dead or cancelled
)

// How a dependent job's upstreams combine (Depends.Mode).
const (
	DependAll = "all" // every upstream satisfied
	DependAny = "any" // one upstream satisfied
)

// How an upstream run is matched to a downstream scheduled time
// (Depends.Match).
const (
	// MatchSameTime: the upstream's execution scheduled for the same
	// instant.
	MatchSameTime = "same_time"
	// MatchLatestWithin: the newest upstream execution that ended within
	// Depends.Within before the downstream's scheduled time; when none
	// did, the first that ends after it.
	MatchLatestWithin = "latest_within"
)

// What a wait that outlived its timeout does, and what an upstream whose
// run was skipped counts as (Depends.OnTimeout, OnUpstreamSkipped).
const (
	DependSkip = "skip"
	DependRun  = "run"
)

// Limits of a job's dependencies.
const (
	MaxUpstreams       = 16
	DefaultWaitTimeout = time.Hour
	MaxWaitTimeout     = 7 * 24 * time.Hour
	// MaxWithin bounds latest_within's window.
	MaxWithin = 7 * 24 * time.Hour
)

// Upstream is one edge of a dependent job: the upstream job (by id, so a
// rename keeps it) and what its run must end in.
type Upstream struct {
	Job uuid.UUID `json:"job"`
	On  string    `json:"on"`
}

// Depends is what a dependent job waits for, as stored on the job
// (jobs.depends). Every field is filled in (defaults applied) when
// stored.
type Depends struct {
	On   []Upstream `json:"on"`
	Mode string     `json:"mode"`
	// Match is MatchSameTime or MatchLatestWithin (then WithinMS is the
	// window).
	Match    string `json:"match"`
	WithinMS int64  `json:"within_ms,omitempty"`
	// WaitTimeoutMS bounds the wait after the scheduled time.
	WaitTimeoutMS     int64  `json:"wait_timeout_ms"`
	OnTimeout         string `json:"on_timeout"`
	OnUpstreamSkipped string `json:"on_upstream_skipped"`
	// Chain: the job has no schedule of its own; each of its upstreams'
	// scheduled runs makes one waiting execution of it, at the same
	// scheduled time (matched same_time).
	Chain bool `json:"chain,omitempty"`
}

// Within is latest_within's window.
func (d *Depends) Within() time.Duration { return time.Duration(d.WithinMS) * time.Millisecond }

// WaitTimeout is how long an execution waits after its scheduled time.
func (d *Depends) WaitTimeout() time.Duration {
	return time.Duration(d.WaitTimeoutMS) * time.Millisecond
}

// Accepts says whether an upstream execution that ended in state s
// satisfies an edge asking for on.
func Accepts(on string, s ExecState) bool {
	switch on {
	case DependOnSuccess:
		return s == ExecSucceeded
	case DependOnFailure:
		return s == ExecDead
	case DependOnAny:
		return s.Final()
	}
	return false
}
