-- +goose Up
-- Last successes off the hot path (issue 20). Upserting every success
-- into job_successes was a sixth of Postgres's statement time per
-- execution at 10,000 executions a second. Now the table holds a row only
-- for the jobs labelled tock.io/alert=true (the few whose last success
-- tock_job_last_success_timestamp_seconds exports and an alert watches),
-- and the recorder only moves existing rows forward. Every other job's
-- last success is read from its executions when the job is read
-- (store.jobRead), so it is known for as long as the history keeps it.
--
-- The rows follow the label: these triggers add a job's row when it gets
-- the label (created with it, or patched to have it), seeded from the
-- job's latest succeeded execution still in the history, and delete it
-- when the label goes. A job that has not succeeded since it was tracked
-- has a row with NULLs.
ALTER TABLE job_successes ALTER COLUMN last_success_at DROP NOT NULL,
    ALTER COLUMN execution_id DROP NOT NULL;

DELETE FROM job_successes
WHERE job_id NOT IN (SELECT id FROM jobs WHERE labels @> '{"tock.io/alert": "true"}');

INSERT INTO job_successes (job_id)
SELECT id FROM jobs WHERE labels @> '{"tock.io/alert": "true"}'
ON CONFLICT DO NOTHING;

-- +goose StatementBegin
CREATE FUNCTION tock_track_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(NEW.labels @> '{"tock.io/alert": "true"}', false) THEN
        INSERT INTO job_successes (job_id, last_success_at, execution_id)
        SELECT NEW.id, x.finished_at, x.id
        FROM (SELECT 1) one LEFT JOIN LATERAL (
            SELECT e.finished_at, e.id FROM executions e
            WHERE e.job_id = NEW.id AND e.state = 'succeeded'
            ORDER BY e.scheduled_for DESC LIMIT 1) x ON true
        ON CONFLICT (job_id) DO NOTHING;
    ELSE
        DELETE FROM job_successes WHERE job_id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_track_success_insert AFTER INSERT ON jobs FOR EACH ROW
    WHEN (coalesce(NEW.labels @> '{"tock.io/alert": "true"}', false))
    EXECUTE FUNCTION tock_track_success();

CREATE TRIGGER jobs_track_success_update AFTER UPDATE OF labels ON jobs FOR EACH ROW
    WHEN (coalesce(OLD.labels @> '{"tock.io/alert": "true"}', false)
        IS DISTINCT FROM coalesce(NEW.labels @> '{"tock.io/alert": "true"}', false))
    EXECUTE FUNCTION tock_track_success();

-- +goose Down
DROP TRIGGER jobs_track_success_update ON jobs;
DROP TRIGGER jobs_track_success_insert ON jobs;
DROP FUNCTION tock_track_success();
DELETE FROM job_successes WHERE last_success_at IS NULL;
ALTER TABLE job_successes ALTER COLUMN last_success_at SET NOT NULL,
    ALTER COLUMN execution_id SET NOT NULL;
