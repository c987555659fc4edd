-- +goose Up
-- Jobs that wait for jobs (issue 39).
--
-- jobs.depends: what a dependent job waits for (domain.Depends: upstream
-- job ids and outcomes, mode, match, wait timeout, what a timeout and a
-- skipped upstream do, chain); NULL for the jobs that wait for nothing,
-- which fire as before. jobs.chains: the job is the upstream of a chain
-- (a dependent job without a schedule), so its firings also make the
-- chain's waiting executions.
ALTER TABLE jobs
    ADD COLUMN depends jsonb,
    ADD COLUMN chains boolean NOT NULL DEFAULT false;

-- The edges, by job id (a rename keeps them), for what the jobs' own
-- column cannot answer quickly: who depends on a job (deleting it, its
-- chains, the graph) and whether a new edge closes a cycle. Written in
-- the transaction that writes the downstream's depends, under the
-- dependency lock (store.lockDepends).
CREATE TABLE job_dependencies (
    downstream_id     uuid    NOT NULL,
    downstream_bucket integer NOT NULL,
    upstream_id       uuid    NOT NULL,
    upstream_bucket   integer NOT NULL,
    upstream_on       text    NOT NULL CHECK (upstream_on IN ('success', 'failure', 'any')),
    chain             boolean NOT NULL,
    PRIMARY KEY (downstream_id, upstream_id)
);
CREATE INDEX job_dependencies_upstream ON job_dependencies (upstream_id);

-- Executions: a new state, waiting (its time has come, its upstreams
-- have not let it run; next_attempt_at is far ahead meanwhile, out of
-- the outbox's reach, as a buffered run's). The partial index finds the
-- waiting ones of a bucket, which are few.
ALTER TABLE executions DROP CONSTRAINT executions_state_check;
ALTER TABLE executions ADD CONSTRAINT executions_state_check
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead', 'waiting'));
CREATE INDEX executions_waiting ON executions (bucket, scheduled_for) WHERE state = 'waiting';

-- Which upstream executions let a dependent execution run: one row per
-- (downstream execution, upstream execution), written in the transaction
-- that moves the downstream from waiting to queued. Read both ways (an
-- execution's upstreams; what an upstream execution released). Deleted
-- by retention with the downstream's day.
CREATE TABLE execution_upstreams (
    execution_id           uuid        NOT NULL,
    scheduled_for          timestamptz NOT NULL,
    job_id                 uuid        NOT NULL,
    upstream_execution_id  uuid        NOT NULL,
    upstream_scheduled_for timestamptz NOT NULL,
    upstream_job_id        uuid        NOT NULL,
    upstream_state         text        NOT NULL,
    PRIMARY KEY (execution_id, upstream_execution_id)
);
CREATE INDEX execution_upstreams_upstream ON execution_upstreams (upstream_execution_id);
CREATE INDEX execution_upstreams_day ON execution_upstreams (scheduled_for);

-- The skip ledger learns the two dependency reasons, and a detail naming
-- what decided (the upstream execution and how it ended, or what the
-- wait waited for).
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check
    CHECK (reason IN ('missed', 'overlap', 'paused', 'dependency', 'dependency_timeout'));
ALTER TABLE skipped_runs ADD COLUMN detail text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE skipped_runs DROP COLUMN detail;
DELETE FROM skipped_runs WHERE reason IN ('dependency', 'dependency_timeout');
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check CHECK (reason IN ('missed', 'overlap', 'paused'));
DROP TABLE execution_upstreams;
DROP INDEX executions_waiting;
DELETE FROM executions WHERE state = 'waiting';
ALTER TABLE executions DROP CONSTRAINT executions_state_check;
ALTER TABLE executions ADD CONSTRAINT executions_state_check
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead'));
DROP TABLE job_dependencies;
ALTER TABLE jobs DROP COLUMN chains, DROP COLUMN depends;
