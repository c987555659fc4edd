-- tock's schema. Partitions of jobs (one per bucket) and the daily
-- partitions of executions and attempts are created by the store at run
-- time (Store.Init, Store.MaintainPartitions), not here, because their
-- number depends on the cluster's bucket count and on the date.

-- +goose Up

-- The cluster's fixed facts: one row, written by the first Store.Init.
CREATE TABLE cluster (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    buckets    integer NOT NULL CHECK (buckets > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Jobs, list-partitioned by bucket (jobs_b000, jobs_b001, ...) so that a
-- bucket's owner scans only its own partition.
CREATE TABLE jobs (
    id          uuid        NOT NULL,
    bucket      integer     NOT NULL,
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    schedule    jsonb       NOT NULL,
    handler     jsonb       NOT NULL,
    payload     jsonb,
    state       text        NOT NULL CHECK (state IN ('active', 'paused', 'completed')),
    next_run_at timestamptz,
    last_run_at timestamptz,
    retry       jsonb       NOT NULL DEFAULT '{}',
    timeout_ms  bigint      NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (bucket, id)
) PARTITION BY LIST (bucket);

-- The scanner's query: active jobs of a bucket due before a time.
CREATE INDEX jobs_due ON jobs (bucket, next_run_at) WHERE state = 'active';

-- A unique index on a partitioned table must contain the partition key,
-- so (namespace, name) uniqueness lives in this small unpartitioned table,
-- written in the same transaction as jobs. It also serves ListJobs, which
-- pages in (namespace, name) order; the "C" collation makes the name
-- prefix filter (LIKE 'prefix%') an index range scan.
CREATE TABLE job_names (
    namespace text COLLATE "C" NOT NULL,
    name      text COLLATE "C" NOT NULL,
    job_id    uuid    NOT NULL UNIQUE,
    bucket    integer NOT NULL,
    PRIMARY KEY (namespace, name)
);
-- Name prefix across all namespaces.
CREATE INDEX job_names_name ON job_names (name, namespace);

-- Executions, range-partitioned by scheduled time into daily partitions
-- (executions_YYYYMMDD) so that retention drops whole days and "failed
-- yesterday" reads one. The DEFAULT partition catches rows outside every
-- daily partition so an insert never fails; Store.MaintainPartitions
-- moves such rows when it creates their day.
CREATE TABLE executions (
    id            uuid        NOT NULL,
    job_id        uuid        NOT NULL,
    bucket        integer     NOT NULL,
    namespace     text        NOT NULL,
    job_name      text        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    manual        boolean     NOT NULL DEFAULT false,
    state         text        NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead')),
    attempts      integer     NOT NULL DEFAULT 0,
    handler       jsonb       NOT NULL,
    payload       jsonb,
    retry         jsonb       NOT NULL DEFAULT '{}',
    timeout_ms    bigint      NOT NULL DEFAULT 0,
    dispatched_at timestamptz,
    started_at    timestamptz,
    finished_at   timestamptz,
    executor_id   text        NOT NULL DEFAULT '',
    error         text        NOT NULL DEFAULT '',
    output        text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, scheduled_for),
    -- Exactly once: one execution per job and scheduled time. Being
    -- (job_id, scheduled_for), it also serves listing a job's executions
    -- newest first (read backwards).
    UNIQUE (job_id, scheduled_for)
) PARTITION BY RANGE (scheduled_for);

CREATE TABLE executions_default PARTITION OF executions DEFAULT;

-- The outbox: fired executions not yet acknowledged by JetStream.
CREATE INDEX executions_outbox ON executions (bucket, scheduled_for) WHERE dispatched_at IS NULL;
-- Listing by state.
CREATE INDEX executions_state ON executions (state, scheduled_for);

-- Attempts of executions, partitioned like executions.
CREATE TABLE attempts (
    execution_id  uuid        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    number        integer     NOT NULL CHECK (number > 0),
    executor_id   text        NOT NULL DEFAULT '',
    started_at    timestamptz,
    finished_at   timestamptz,
    outcome       text        NOT NULL DEFAULT '' CHECK (outcome IN ('', 'succeeded', 'failed')),
    error         text        NOT NULL DEFAULT '',
    output        text        NOT NULL DEFAULT '',
    PRIMARY KEY (execution_id, scheduled_for, number)
) PARTITION BY RANGE (scheduled_for);

CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;

-- Fencing: the epoch at which each bucket's current owner took it.
-- Every firing transaction reads its buckets' rows FOR SHARE and fires
-- nothing in a bucket whose epoch is not the caller's.
CREATE TABLE bucket_owners (
    bucket     integer PRIMARY KEY,
    node       text        NOT NULL,
    epoch      bigint      NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE bucket_owners;
DROP TABLE attempts;
DROP TABLE executions;
DROP TABLE job_names;
DROP TABLE jobs;
DROP TABLE cluster;
