-- +goose Up
-- The first attempt of an execution lives in the execution's own row
-- (attempt_*), so that the common life of an execution — fired, run once,
-- recorded — writes no attempts row at all. Once a second attempt exists,
-- every attempt (the first included) is a row of attempts and the
-- attempt_* columns are NULL. attempt_outcome IS NULL means "no inline
-- attempt"; attempt_error and attempt_output are NULL when they equal the
-- execution's error and output (the usual case), to keep the row narrow.
ALTER TABLE executions
    ADD COLUMN attempt_executor     text,
    ADD COLUMN attempt_started_at   timestamptz,
    ADD COLUMN attempt_heartbeat_at timestamptz,
    ADD COLUMN attempt_finished_at  timestamptz,
    ADD COLUMN attempt_outcome      text,
    ADD COLUMN attempt_error        text,
    ADD COLUMN attempt_output       text;

UPDATE executions x SET
    attempt_executor = a.executor_id, attempt_started_at = a.started_at,
    attempt_heartbeat_at = a.heartbeat_at, attempt_finished_at = a.finished_at,
    attempt_outcome = a.outcome, attempt_error = a.error, attempt_output = a.output
FROM attempts a
WHERE a.execution_id = x.id AND a.scheduled_for = x.scheduled_for AND a.number = 1 AND x.attempts <= 1;

DELETE FROM attempts a USING executions x
WHERE a.execution_id = x.id AND a.scheduled_for = x.scheduled_for AND x.attempts <= 1;

-- +goose Down
INSERT INTO attempts (execution_id, scheduled_for, number, executor_id, started_at, heartbeat_at,
    finished_at, outcome, error, output)
SELECT id, scheduled_for, 1, coalesce(attempt_executor, ''), attempt_started_at, attempt_heartbeat_at,
    attempt_finished_at, attempt_outcome, coalesce(attempt_error, error), coalesce(attempt_output, output)
FROM executions WHERE attempt_outcome IS NOT NULL
ON CONFLICT DO NOTHING;

ALTER TABLE executions
    DROP COLUMN attempt_executor,
    DROP COLUMN attempt_started_at,
    DROP COLUMN attempt_heartbeat_at,
    DROP COLUMN attempt_finished_at,
    DROP COLUMN attempt_outcome,
    DROP COLUMN attempt_error,
    DROP COLUMN attempt_output;
