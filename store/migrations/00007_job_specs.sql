-- +goose Up
-- What an execution runs (handler, payload, retry policy, timeout) is no
-- longer copied into every execution. It is a job spec: an immutable row
-- named by a hash of its content, written once when a job is created or
-- changed (jobs that share a handler and payload share one row), and
-- referenced by spec_id from the job and from each execution. Executions
-- fired before this migration keep their own copy (spec_id NULL).
CREATE TABLE job_specs (
    id         uuid        PRIMARY KEY,
    handler    jsonb       NOT NULL,
    payload    jsonb,
    retry      jsonb       NOT NULL,
    timeout_ms bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN spec_id uuid;
UPDATE jobs SET spec_id = md5(handler::text || '|' || coalesce(payload::text, '') || '|' || retry::text || '|' || timeout_ms)::uuid;
INSERT INTO job_specs (id, handler, payload, retry, timeout_ms)
SELECT DISTINCT ON (spec_id) spec_id, handler, payload, retry, timeout_ms FROM jobs
ON CONFLICT DO NOTHING;

ALTER TABLE executions
    ADD COLUMN spec_id uuid,
    ALTER COLUMN handler DROP NOT NULL,
    ALTER COLUMN retry DROP NOT NULL,
    ALTER COLUMN retry DROP DEFAULT,
    ALTER COLUMN timeout_ms DROP NOT NULL,
    ALTER COLUMN timeout_ms DROP DEFAULT;

-- +goose Down
UPDATE executions x SET handler = s.handler, payload = s.payload, retry = s.retry, timeout_ms = s.timeout_ms
FROM job_specs s WHERE s.id = x.spec_id AND x.handler IS NULL;
ALTER TABLE executions
    DROP COLUMN spec_id,
    ALTER COLUMN handler SET NOT NULL,
    ALTER COLUMN retry SET DEFAULT '{}',
    ALTER COLUMN retry SET NOT NULL,
    ALTER COLUMN timeout_ms SET DEFAULT 0,
    ALTER COLUMN timeout_ms SET NOT NULL;
ALTER TABLE jobs DROP COLUMN spec_id;
DROP TABLE job_specs;
