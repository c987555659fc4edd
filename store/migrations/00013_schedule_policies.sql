-- +goose Up
-- Schedule policies (issue 10).
--
-- jobs.policy: what happens to missed and overlapping runs, as the job
-- was created with (cluster defaults filled in): {"missed": {"policy":
-- "latest", "grace": "60s", "max": 100}, "overlap": "allow"}. NULL on jobs
-- created before this migration: the scanner's defaults apply to them.
-- jobs.runs: the runs fired so far (schedule.max_runs completes the job).
-- jobs.paused_next_run_at: the next run a job had when it was paused, so
-- that resuming can account for (or catch up) the runs of the pause.
-- jobs.skip_before: runs before it are skipped as "paused" (set by a
-- resume without catch-up; the scanner records them as skipped runs).
ALTER TABLE jobs
    ADD COLUMN policy jsonb,
    ADD COLUMN runs bigint NOT NULL DEFAULT 0,
    ADD COLUMN paused_next_run_at timestamptz,
    ADD COLUMN skip_before timestamptz;

-- Executions: due_at is when a jittered run was due to be published
-- (scheduled_for plus the job's deterministic jitter offset; NULL
-- without jitter); backfill marks executions made by a backfill;
-- buffered marks the one run an overlap policy of buffer_one keeps
-- waiting until the job's earlier executions end (its next_attempt_at is
-- far in the future meanwhile, out of the outbox's reach). The partial
-- index finds the waiting ones, which are few.
ALTER TABLE executions
    ADD COLUMN due_at timestamptz,
    ADD COLUMN backfill boolean NOT NULL DEFAULT false,
    ADD COLUMN buffered boolean NOT NULL DEFAULT false;
CREATE INDEX executions_buffered ON executions (bucket) WHERE buffered;

-- Skipped runs: scheduled times that were not fired, one row per
-- contiguous range skipped by one decision (a missed-run policy, an
-- overlap policy, a pause). "runs" counts the scheduled times in
-- [first_at, last_at]. Every scheduled time of a job either has an
-- execution or lies in one of these (or was fired by a backfill later).
CREATE TABLE skipped_runs (
    job_id      uuid        NOT NULL,
    first_at    timestamptz NOT NULL,
    last_at     timestamptz NOT NULL,
    runs        bigint      NOT NULL CHECK (runs > 0),
    reason      text        NOT NULL CHECK (reason IN ('missed', 'overlap', 'paused')),
    namespace   text        NOT NULL,
    job_name    text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, first_at),
    CHECK (last_at >= first_at)
);

-- +goose Down
DROP TABLE skipped_runs;
DROP INDEX executions_buffered;
ALTER TABLE executions DROP COLUMN due_at, DROP COLUMN backfill, DROP COLUMN buffered;
ALTER TABLE jobs DROP COLUMN policy, DROP COLUMN runs, DROP COLUMN paused_next_run_at, DROP COLUMN skip_before;
