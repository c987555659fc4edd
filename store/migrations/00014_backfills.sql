-- +goose Up
-- Backfills (issue 10): a user's request to fire every scheduled time of
-- a cron job in [from_at, to_at) that has no execution yet. The node that
-- owns the job's bucket works on it, a chunk at a time: each step inserts
-- the executions of the next scheduled times (ON CONFLICT DO NOTHING on
-- the (job_id, scheduled_for) key, so a time fires at most once whoever
-- asks) and moves next_at past them, in one transaction that checks the
-- bucket's fencing epoch. So a backfill survives restarts and failovers:
-- the bucket's next owner carries on from next_at.
--
-- total: the scheduled times in the range when the backfill was created.
-- fired: the executions this backfill created (times that already had an
-- execution are passed over and not counted).
-- next_at: every scheduled time before it has been handled.
-- state: running until the range is exhausted (done), a user stops it
-- (stopped), or it cannot go on (failed: the job was deleted, or its
-- schedule no longer recurs; error says why).
CREATE TABLE backfills (
    id          uuid        PRIMARY KEY,
    job_id      uuid        NOT NULL,
    bucket      integer     NOT NULL,
    from_at     timestamptz NOT NULL,
    to_at       timestamptz NOT NULL,
    total       bigint      NOT NULL CHECK (total >= 0),
    fired       bigint      NOT NULL DEFAULT 0 CHECK (fired >= 0),
    next_at     timestamptz NOT NULL,
    state       text        NOT NULL CHECK (state IN ('running', 'done', 'stopped', 'failed')),
    error       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    finished_at timestamptz,
    CHECK (from_at < to_at)
);
-- A job's backfills, newest first (ids are UUIDv7: time-ordered).
CREATE INDEX backfills_job ON backfills (job_id, id);
-- The running backfills of a node's buckets: few.
CREATE INDEX backfills_running ON backfills (bucket, created_at) WHERE state = 'running';

-- +goose Down
DROP TABLE backfills;
