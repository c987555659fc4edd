// Package store is tock's PostgreSQL layer: the schema and its
// migrations, every query, and the maintenance of the tables' partitions.
// Jobs are partitioned by bucket; executions and attempts by day. The
// plain data types it reads and writes are in store/model; the
// execution state rules, as pure functions, in rules.go.
//
// # Naming
//
// A method's name is a verb and the rows it is about, in that order:
//
//   - Get (one row by its key), List (a page or a set), Count, Create,
//     Update, Delete, and Copy (a bulk load with COPY), for plain reads
//     and writes;
//   - a verb of the domain for a change of state that the domain names:
//     Fire, Claim, Release, Expire, Save, Use, Stop, Step, Cancel,
//     Redrive, Requeue, Mark, Advance, Record, Reseal, Apply, Maintain,
//     Ensure, Next and Group.
//
// The methods that are about no table (Open, Pool, Close, Buckets,
// Migrate, Init, Now, Listen, Maintenance, SilenceSweep) are exempt. A test
// (TestMethodNames) holds every exported method to this scheme and to
// the index below.
//
// # Lock order
//
// Every transaction takes its row locks in one global order, so that
// none deadlocks with another (Postgres would abort one of them after
// deadlock_timeout, and the recorder, say, would retry its batch
// seconds later). The order is by table, then by key within a table:
//
//  1. bucket_owners, by bucket (firing reads them FOR SHARE);
//  2. jobs, by (bucket, id);
//  3. job_names, by job_id (written only by a transaction that holds
//     its job's jobs row, the trigger of migration 37 included, so
//     never waited for while another holds it);
//  4. executions, by id (ids sort by scheduled time, so days in day
//     order continue it);
//  5. attempts, written only by a transaction that holds their
//     execution's row lock, which so guards them; then execution_logs,
//     inserted alone (RecordLogChunks reads executions without a lock,
//     and an insert waits only for another insert of the same key,
//     which holds no other lock) and deleted by retention after their
//     executions (retention_rows.go);
//  6. job_successes, by job_id;
//  7. job_failures, by job_id;
//  8. notification_events, inserted about executions and jobs whose
//     rows the transaction holds, so never waited for by another.
//
// The rules that keep it:
//
//   - A statement locks rows in the order its plan meets them, not in
//     the order of its arrays. One that locks several rows either locks
//     them first, ORDER BY key FOR UPDATE in a CTE or sub-select (the
//     lock comes after the sort), or has a plan that can only meet them
//     in order: a nested loop over a sorted array probing the primary
//     key (the row matched with = ANY (ARRAY[u.key]), which no hash or
//     merge join can use), or an insert from a sorted unnest. Such a
//     plan has a test (TestFastRecordPlan, TestJobRowsLockedInOrder).
//   - The statements of a transaction keep the order between them: one
//     waits for a row only while every row the transaction holds comes
//     before it; a row before one it holds is taken with NOWAIT, and on
//     lock_not_available the transaction starts over in one ordered pass
//     (recording after its fast path, executions_fast.go). A wait
//     bounded by lock_timeout is no substitute: the wait closes a cycle
//     whose other members may be near deadlock_timeout already.
//   - A statement that never waits (SKIP LOCKED) cannot close a cycle:
//     the re-queues of lost and wiped work, the rescue of waiting
//     executions (executions_stuck.go), marking executions dispatched.
//     Their execution_notes rows are inserted about executions the
//     statement holds, so never waited for by another.
//   - Tables are locked in the order of dailyTables (partitions.go):
//     executions before attempts, the parent before its partitions.
//     Retention empties a day's partitions taking their locks with
//     NOWAIT (dropDay): the fast statements lock a day's partition only
//     when they reach it, holding rows of earlier days.
//
// Who takes what:
//
//   - RecordAttemptEvents: executions (the fast statements, then the
//     lock read), their attempts, job_successes (updateSuccessesSQL),
//     job_failures (writeStreaks), notification_events.
//   - Fire: bucket_owners, jobs, new executions, and under the overlap
//     policy cancel_running the executions it cancels (cancelSQL). Its
//     jobs rows are the one exception: locked in two passes, the plain
//     firings' in (bucket, id) order, then the others' bucket by bucket,
//     which is not that order. A bucket's active jobs are fired by its
//     owner alone, so none of the writers here meets them, but
//     ResealSecrets (which locks them in order) can; Fire retries a
//     deadlock (fireRetries).
//   - ApplyRetention: a day's ended executions with their attempts, in
//     batches (deleteNamespaceRows), and completed one-shot jobs with
//     their job_names and job_successes rows.
//   - DeleteJob: one job's jobs, job_names and job_successes rows
//     (DeleteJobUnlinking first its dependents' jobs rows, by name;
//     DeleteJobAtRevision the same, its revision checked by the delete).
//   - UpdateJob and CreateJob of a job with dependencies: the job's row,
//     then its upstreams' rows (their chains mark, in (bucket, id)
//     order), under the dependency lock (lockDepends).
//   - ApplySet: the set's advisory lock, then its jobs' rows (members
//     and the jobs named, ORDER BY bucket, id FOR UPDATE), then what
//     UpdateJob, CreateJob and DeleteJob take for each, in that order.
//   - UpdateJobNextRuns: jobs rows, locked first in (bucket, id) order
//     (ORDER BY ... FOR UPDATE), then moved.
//   - ApplyWaitDecisions: waiting executions (which only it,
//     CancelExecution and an overlap's cancel change), then
//     execution_upstreams, skipped_runs and notification_events, which
//     are inserted.
//   - RequeueLostExecutions, RequeueWipedExecutions,
//     RequeueWaitingExecutions, RequeueSilentExecutions: executions, SKIP
//     LOCKED, and the attempts (and execution_notes) of those they took.
//   - ReleaseSilentSlots: concurrency_slots under their keys' locks, in
//     key order, then the waiting executions it queues (tock_slot_admit,
//     as every release does).
//
// TestNoDeadlocks runs them against each other and counts no deadlock.
//
// # Queries by table
//
// Files are named after the table their queries are about; a file
// with a suffix (jobs_batch.go) holds one more way to the same table.
//
//   - jobs, job_names (jobs*.go): CreateJob, CreateJobBatch, CopyJobs,
//     GetJob, GetJobNamespace, ListJobs, CountJobs, CountJobsMatching, UpdateJob, DeleteJob, DeleteJobAtRevision,
//     ResealSecrets.
//   - job_specs (job_specs.go): written with jobs, read when executions
//     are fired.
//   - bucket_owners, cluster (fire.go, buckets*.go): ClaimBucket,
//     ListBucketStats, GetMaxEpoch, NextGeneration.
//   - firing, across jobs, executions and skipped_runs (fire*.go):
//     ListDueJobs, Fire.
//   - executions, attempts, publish_positions (executions*.go):
//     CreateManualExecution, GetExecution, GetExecutionNamespace,
//     ListExecutions, CountExecutions, ListExecutionStats,
//     ListUndispatchedExecutions, ListRedispatches, MarkExecutionsDispatched,
//     AdvancePublishPositions, RecordAttemptEvents, CancelExecution,
//     RedriveExecution, RequeueLostExecutions, RequeueWipedExecutions,
//     ReleaseBufferedExecutions.
//   - executions, execution_notes: the rescue of stuck executions
//     (executions_stuck.go): ListStuckExecutions,
//     RequeueWaitingExecutions, RequeueSilentExecutions,
//     ListExecutionNotes.
//   - dead_events (dead_events.go): RecordDeadEvents, ListDeadEvents.
//   - execution_logs (execution_logs.go): RecordLogChunks (checked
//     against executions), ListLogChunks.
//   - job_successes (executions_successes.go): ListAlertedJobSuccesses.
//   - skipped_runs (skipped_runs.go): ListSkippedRuns.
//   - job_dependencies, execution_upstreams, and the waiting executions
//     (dependencies.go): GetJobRef, ListJobRefs, ListJobEdges,
//     DeleteJobUnlinking, ListWaitingExecutions,
//     ListUpstreamRuns, ApplyWaitDecisions, ListExecutionUpstreams,
//     ListReleasedExecutions.
//   - backfills (backfills*.go): CreateBackfill, ListBackfills,
//     ListRunningBackfills, StepBackfill, StopBackfill.
//   - api_keys (api_keys.go): CreateAPIKey, GetAPIKey, UseAPIKey,
//     ListAPIKeys, CountUsableAPIKeys, DeleteAPIKey.
//   - applysets, and jobs' applyset and applied_hash columns
//     (applysets.go): ApplySet (one transaction over a set: its jobs
//     locked in (bucket, id) order, created, updated, deleted, owned and
//     announced, the set saved, audit entries written), ListApplySets.
//   - calendars (calendars.go): CreateCalendar, GetCalendar,
//     ListCalendars, UpdateCalendar, DeleteCalendar; and the jobs that
//     name calendars: ListCalendarJobs, UpdateJobNextRuns (moves next runs
//     sooner when a calendar allows more, and announces them).
//   - concurrency_slots (concurrency.go; the triggers of migrations 35
//     and 36 take and release the slots): ListConcurrencyKeys, ListSlotHolders,
//     CountSlots, ReleaseSilentSlots.
//   - audit_log (audit_log.go): CreateAuditEntries, ListAuditEntries,
//     MaintainAuditPartitions.
//   - idempotency_keys (idempotency_keys.go): ClaimIdempotencyKey,
//     SaveIdempotencyResponse, ReleaseIdempotencyKey,
//     ExpireIdempotencyKeys.
//   - namespaces (namespaces.go): ListNamespaces,
//     UpdateNamespaceRetention.
//   - notification_channels, notification_rules, notification_events,
//     notifications, job_failures, handler_breakers (notify*.go):
//     CreateChannel, GetChannel, ListChannels, UpdateChannel,
//     DeleteChannel, CreateRule, GetRule, ListRules, UpdateRule,
//     DeleteRule, ListActiveRules, CreateNotifyEvents,
//     GroupNotifications, ClaimNotifications, RecordDelivery,
//     ListNotifications, GetNotification, ListSilenceCandidates,
//     SaveHandlerBreaker, ListHandlerRules; job_failures is written by
//     RecordAttemptEvents.
//   - handler_breaker_history, handlers_seen (handlers.go):
//     SaveHandlerStates, DeleteOldBreakerHistory, ListBreakerHistory,
//     ListHandlersSeen.
//   - history_minutes, history_hours, history_rollup (history.go):
//     MaintainHistoryRollups (under its own session lock), and
//     ListExecutionSeries, which reads them and, past their mark, the
//     executions.
//   - the day partitions of executions and attempts (partitions.go,
//     retention.go, retention_rows.go): MaintainHistoryPartitions,
//     EnsureHistoryPartitions, ListHistoryDays, ApplyRetention.
package store
