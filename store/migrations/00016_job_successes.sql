-- +goose Up
-- Each job's last success (issue 11): when its newest succeeded execution
-- finished, and which one it was. The recorder writes it in the
-- transaction that records the success, one upsert per batch. It is a
-- table of its own, not a column of jobs, so that recording never locks
-- or rewrites a jobs row: the scanners' fenced firing transactions update
-- those rows, and they are wide. A job without a row has not succeeded
-- since tracking began.
CREATE TABLE job_successes (
    job_id          uuid        PRIMARY KEY,
    last_success_at timestamptz NOT NULL,
    execution_id    uuid        NOT NULL
);

-- When tracking began: this migration on an existing cluster (the
-- default is evaluated once, for the existing row), the cluster's
-- creation on a new one. tock_job_last_success_timestamp_seconds exports
-- the later of it and the job's creation for a job that has not
-- succeeded since, so that an old job is not reported silent the moment
-- tracking begins.
ALTER TABLE cluster ADD COLUMN successes_since timestamptz NOT NULL DEFAULT now();

-- The jobs that tock_job_last_success_timestamp_seconds exports: those
-- labelled tock.io/alert=true, few among many. The query must repeat
-- this predicate literally for the planner to use the index.
CREATE INDEX jobs_alert ON jobs (namespace, name) WHERE labels @> '{"tock.io/alert": "true"}';

-- +goose Down
DROP INDEX jobs_alert;
ALTER TABLE cluster DROP COLUMN successes_since;
DROP TABLE job_successes;
