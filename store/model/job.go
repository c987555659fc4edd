package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
)

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
	// Version changes on every write of the job; store.UpdateJob writes only if
	// it is still the one read (optimistic concurrency).
	Version int64
	// Revision counts the changes made to the job by its users (not its
	// firings): the API's ETag.
	Revision int64
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
	// FiredCount counts the runs fired so far (Schedule.MaxRuns completes the
	// job); firing maintains it.
	FiredCount int64
	// PausedNextRunAt is, while the job is paused, the next run it had
	// when it was paused (nil if it had none); resuming reads it.
	PausedNextRunAt *time.Time
	// SkipBefore: runs before it are skipped as paused (a resume without
	// catch-up sets it); nil for none.
	SkipBefore *time.Time
	// Depends is what the job's runs wait for (nil: nothing); a job with
	// Depends.Chain has no schedule of its own and no next run while
	// active: its upstreams' firings make its executions. Chains marks a
	// job that chains depend on (the store maintains it).
	Depends *domain.Depends
	Chains  bool
	// LastSuccessAt is when the job's latest succeeded execution (by its
	// end) finished; nil if none has succeeded since the job was created
	// or since tock began tracking successes. The recorder maintains it;
	// the store ignores it on writes.
	LastSuccessAt *time.Time
	// ApplySet is the apply set that owns the job ("" for none: made
	// through the API); AppliedHash is the digest of its definition as
	// the set's last apply left it, and SetLocked says the set refuses
	// changes made outside it. The store writes them only in an apply
	// (ApplySetTx).
	ApplySet    string
	AppliedHash string
	SetLocked   bool
}

// Due is a job due to fire, as the scanner needs it: only what firing
// and computing the next run take (store.Fire copies the rest in SQL).
type Due struct {
	ID        uuid.UUID
	Bucket    int
	NextRunAt time.Time
	// Schedule is the job's schedule, without At and In: Cron is "" for
	// one-shot jobs (at, in, now).
	Schedule schedule.Spec
	// FiredCount is how many runs the job has fired (Schedule.MaxRuns bounds
	// it).
	FiredCount int64
	// Policy is the job's policies as stored (empty fields: the
	// scanner's defaults).
	Policy domain.JobPolicy
	// SkipBefore: runs before it are skipped as paused; nil for none.
	SkipBefore *time.Time
	// Waits: the job's runs wait for its upstreams (it has Depends);
	// Chains: its runs make its chain dependents' waiting executions.
	Waits, Chains bool
	// Namespace is the job's namespace when its policy names calendars
	// (where the scanner finds them), else "": jobs without calendars
	// read nothing more.
	Namespace string
}

// DueOf is job j as the scanner needs it.
func DueOf(j *Job) Due {
	d := Due{ID: j.ID, Bucket: j.Bucket, Schedule: j.Schedule, FiredCount: j.FiredCount, SkipBefore: j.SkipBefore,
		Waits: j.Depends != nil, Chains: j.Chains}
	d.Schedule.At, d.Schedule.In = nil, ""
	if j.NextRunAt != nil {
		d.NextRunAt = *j.NextRunAt
	}
	if j.Policy != nil {
		d.Policy = *j.Policy
		if len(j.Policy.Calendars) > 0 {
			d.Namespace = j.Namespace
		}
	}
	return d
}

// Run is one scheduled time a Firing fires.
type Run struct {
	At time.Time
	// Due, when set, is when the run is to be published (a jittered run:
	// At plus the job's offset); nil publishes it at At.
	Due *time.Time
	// Buffered: the run waits until the job's earlier executions end
	// (overlap policy buffer_one; set by the store).
	Buffered bool
}

// Skip is a range of a job's scheduled times that a Firing skips: Count
// times from First through Last, for Reason (domain.SkipMissed,
// SkipOverlap, SkipPaused or SkipCalendar), with Detail saying more (the
// calendar and its rule) or "".
type Skip struct {
	First, Last time.Time
	Count       int64
	Reason      string
	Detail      string
}

// SkippedRange is a range of a job's scheduled times that was not fired
// (see Skip), as recorded.
type SkippedRange struct {
	JobID     uuid.UUID
	Namespace string
	JobName   string
	First     time.Time
	Last      time.Time
	Count     int64
	Reason    string
	// Detail says what decided a dependency skip (the upstream execution
	// and how it ended, or what the wait waited for); "" for the others.
	Detail     string
	RecordedAt time.Time
}

// JobLastSuccess is when a job last succeeded, as
// tock_job_last_success_timestamp_seconds exports it.
type JobLastSuccess struct {
	Namespace, Name string
	// At is when the job's latest succeeded execution finished; for a job
	// with none recorded, when it was created, or when tock began
	// tracking successes if that is later.
	At time.Time
	// ConsecutiveFailures is the job's current run of dead executions
	// (0 since its last success).
	ConsecutiveFailures int
}

// FireResult is what one store.Fire call did.
type FireResult struct {
	// Executions are the executions inserted, to be dispatched.
	Executions []*Execution
	// Fenced are the buckets whose epoch check failed (ascending): the
	// caller no longer owns them, and nothing fired there.
	Fenced []int
	// Skipped counts firings in unfenced buckets that did nothing because
	// the compare-and-set lost: the job was changed, deleted, paused or
	// already fired for that time (by a retry or another node).
	Skipped int
	// Moved lists the jobs of firings that are not plain (Firing.Runs or
	// Skips set, or an overlap policy) whose compare-and-set won, whether
	// or not they fired a run.
	Moved []uuid.UUID
	// SkippedRuns counts the scheduled times the moved jobs skipped, by
	// reason (domain.SkipMissed, SkipOverlap, SkipPaused).
	SkippedRuns map[string]int64
	// FiredCounts are the moved jobs' run counts after the firing.
	FiredCounts map[uuid.UUID]int64
	// Cancelled lists the executions an overlap policy (cancel_running)
	// cancelled: the caller tells their executors.
	Cancelled []uuid.UUID
}
