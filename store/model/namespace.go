package model

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Namespace is a namespace as GET /v1/namespaces shows it: its jobs and
// its settings.
type Namespace struct {
	Name string
	// Jobs counts its jobs, whatever their state.
	Jobs int64
	// Retention is its own retention; nil when the cluster's applies.
	Retention *time.Duration
	// OldestExecution is the scheduled time of its oldest execution that
	// has ended (succeeded, dead or cancelled); nil when it has none.
	OldestExecution *time.Time
}

// HistoryExpiresAt is when n's oldest ended execution is past n's
// retention (its own, or def, the cluster's), so that the next
// maintenance pass deletes it, as store.ApplyRetention applies
// retention: a namespace whose retention is shorter than def loses its
// executions to the row, one retention after each was scheduled; any
// other loses them with their day, one retention after the day ended.
// It is nil when n has no ended execution or def is 0 (retention off).
func (n Namespace) HistoryExpiresAt(def time.Duration) *time.Time {
	if n.OldestExecution == nil || def <= 0 {
		return nil
	}
	r := def
	if n.Retention != nil {
		r = *n.Retention
	}
	at := n.OldestExecution.UTC().Add(r)
	if !ToTheRow(r, def) {
		at = n.OldestExecution.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Add(r)
	}
	return &at
}

// ToTheRow reports whether a namespace with retention r, in a cluster
// whose retention is def, has its history deleted to the row (r shorter
// than def) rather than with whole days. See store.ApplyRetention.
func ToTheRow(r, def time.Duration) bool { return r < def }

// RetentionPolicy is what store.ApplyRetention keeps, and what it does with a
// day before it drops it.
type RetentionPolicy struct {
	// Default is the cluster's retention of execution history, for
	// namespaces without their own.
	Default time.Duration
	// CompletedJobs is how long a completed one-shot job is kept after it
	// completed; 0 keeps them.
	CompletedJobs time.Duration
	// Archive, if set, is called with a day (UTC midnight) before its
	// partitions are dropped; the day is dropped only once it returned
	// nil, so it must return only when the day is safely written
	// elsewhere (package archive's Parquet files, synced). The partitions
	// are still there, and still written to in the rare case of a late
	// event, while it runs.
	Archive func(ctx context.Context, day time.Time) error
	// ArchiveRows, if set, is called before a namespace's executions are
	// deleted from a day that is kept (store.ApplyRetention): it writes
	// out the rows sel selects, with their attempts, and returns the keys
	// of the executions it wrote, oldest first. Only those are deleted,
	// and only once it returned nil, so it must return only when they are
	// safely written elsewhere. It writes nothing, and returns no key,
	// when sel selects no row. Archive and ArchiveRows are set together:
	// with Archive alone, no row is deleted from a kept day (and
	// ApplyRetention says so in its error).
	ArchiveRows func(ctx context.Context, sel RowSelection) ([]ExecutionKey, error)
	// DeleteBatch is how many executions one transaction deletes (with
	// their attempts) when retention deletes a namespace's rows from a
	// kept day; 0 means 5,000.
	DeleteBatch int
	// DeletePause is the pause between two such transactions; 0 means as
	// long as the transaction took, so that deleting keeps its
	// connection busy at most half the time; below 0, none.
	DeletePause time.Duration
}

// RowSelection selects a namespace's ended executions (succeeded, dead
// or cancelled) of a day, for RetentionPolicy.ArchiveRows: those of
// Namespace in Day's partition scheduled before Before and after After
// in (scheduled time, id) order, the first Limit of them.
type RowSelection struct {
	// Day is the day (UTC midnight).
	Day time.Time
	// Namespace is the namespace whose executions are selected.
	Namespace string
	// Before is the end of the selection (exclusive), at most the day's
	// end.
	Before time.Time
	// After is where the selection starts (exclusive); the zero key
	// starts at the day's beginning.
	After ExecutionKey
	// Limit is the most executions selected.
	Limit int
}

// ExecutionKey is an execution's primary key.
type ExecutionKey struct {
	ID           uuid.UUID
	ScheduledFor time.Time
}

// RetentionResult is what store.ApplyRetention did.
type RetentionResult struct {
	// Dropped are the days (UTC midnight) whose executions and attempts
	// partitions were dropped.
	Dropped []time.Time
	// Archived are the days the policy's Archive wrote out: each dropped
	// day when it is set.
	Archived []time.Time
	// Kept are the days past the cluster's retention kept because a
	// namespace with rows in them keeps its history longer.
	Kept []time.Time
	// Deleted counts the executions deleted from days that were kept
	// (the rows of namespaces past their retention), DeletedAttempts
	// their attempts rows.
	Deleted, DeletedAttempts int64
	// DeletedLogChunks counts the log chunks (execution_logs) deleted
	// with those executions.
	DeletedLogChunks int64
	// ArchivedRows counts the executions the policy's ArchiveRows wrote
	// out before they were deleted.
	ArchivedRows int64
	// CompletedJobs counts the completed one-shot jobs deleted.
	CompletedJobs int64
	// SkippedRanges counts the skipped-run records deleted.
	SkippedRanges int64
	// Notifications counts the notifications deleted.
	Notifications int64
}
