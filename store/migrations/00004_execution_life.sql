-- +goose Up
-- Executions that survive failure. A retry or a deferred delivery waits
-- in Postgres, not in JetStream: the failed (or deferred) execution goes
-- back into the outbox with next_attempt_at set, and the dispatcher
-- publishes it again, as dispatch number dispatches, when that time comes.

-- The priority class executions of the job are published in.
ALTER TABLE jobs ADD COLUMN priority text NOT NULL DEFAULT 'normal'
    CHECK (priority IN ('high', 'normal', 'low'));

-- priority: copied from the job when it fires.
-- next_attempt_at: when the outbox publishes the execution next; NULL
-- means at scheduled_for (its first publish).
-- series_base: attempts made before the current series (a re-drive of a
-- dead execution starts a new one with a fresh retry budget).
-- dispatches: the number of the execution's current publish, from 0; one
-- more for each retry or deferral. Events carry it back, so that a stale
-- event cannot re-queue the execution a second time.
ALTER TABLE executions
    ADD COLUMN priority        text        NOT NULL DEFAULT 'normal',
    ADD COLUMN next_attempt_at timestamptz,
    ADD COLUMN series_base     integer     NOT NULL DEFAULT 0,
    ADD COLUMN dispatches      integer     NOT NULL DEFAULT 0;

-- heartbeat_at: the last heartbeat of a long attempt. An attempt that
-- stopped heartbeating (its executor died) is recorded as lost.
ALTER TABLE attempts ADD COLUMN heartbeat_at timestamptz;
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost'));

-- The outbox in the order it is published: by due time. Executions
-- waiting out a long backoff sit beyond the range an outbox read asks
-- for, so they cost nothing until they are nearly due.
DROP INDEX executions_outbox;
CREATE INDEX executions_outbox ON executions (bucket, (COALESCE(next_attempt_at, scheduled_for)))
    WHERE dispatched_at IS NULL;

-- +goose Down
DROP INDEX executions_outbox;
CREATE INDEX executions_outbox ON executions (bucket, scheduled_for) WHERE dispatched_at IS NULL;

ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
UPDATE attempts SET outcome = 'failed' WHERE outcome IN ('timed_out', 'cancelled', 'lost');
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check CHECK (outcome IN ('', 'succeeded', 'failed'));
ALTER TABLE attempts DROP COLUMN heartbeat_at;

ALTER TABLE executions
    DROP COLUMN dispatches,
    DROP COLUMN series_base,
    DROP COLUMN next_attempt_at,
    DROP COLUMN priority;

ALTER TABLE jobs DROP COLUMN priority;
