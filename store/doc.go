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
// # Queries by table
//
// Files are named after the table their queries are about; a file
// with a suffix (jobs_batch.go) holds one more way to the same table.
//
//   - jobs, job_names (jobs*.go): CreateJob, CreateJobBatch, CopyJobs,
//     GetJob, GetJobNamespace, ListJobs, CountJobs, UpdateJob, DeleteJob,
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
//   - job_successes (executions_successes.go): ListAlertedJobSuccesses.
//   - skipped_runs (skipped_runs.go): ListSkippedRuns.
//   - backfills (backfills*.go): CreateBackfill, ListBackfills,
//     ListRunningBackfills, StepBackfill, StopBackfill.
//   - api_keys (api_keys.go): CreateAPIKey, GetAPIKey, UseAPIKey,
//     ListAPIKeys, CountUsableAPIKeys, DeleteAPIKey.
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
//   - the day partitions of executions and attempts (partitions.go,
//     retention.go, retention_rows.go): MaintainHistoryPartitions,
//     EnsureHistoryPartitions, ListHistoryDays, ApplyRetention.
package store
