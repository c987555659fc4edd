package model

import (
	"context"
	"time"
)

// Namespace is a namespace as GET /v1/namespaces shows it: its jobs and
// its settings.
type Namespace struct {
	Name string
	// Jobs counts its jobs, whatever their state.
	Jobs int64
	// Retention is its own retention; nil when the cluster's applies.
	Retention *time.Duration
}

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
	// CompletedJobs counts the completed one-shot jobs deleted.
	CompletedJobs int64
	// SkippedRanges counts the skipped-run records deleted.
	SkippedRanges int64
	// Notifications counts the notifications deleted.
	Notifications int64
}
