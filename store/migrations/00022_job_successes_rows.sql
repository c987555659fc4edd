-- +goose Up
-- Every job has its job_successes row from its creation (issue 20): the
-- store inserts it with the job, with no success yet (NULLs), so that
-- recording a success updates a row that exists, a HOT update of a
-- narrow row, instead of an upsert that first probed job_names for each
-- job (so that a deleted job got no row) and, for a job's first success,
-- inserted the row and its index entry. A deleted job's row goes with it
-- (DeleteJob, retention), and an update finds nothing to move then.
ALTER TABLE job_successes ALTER COLUMN last_success_at DROP NOT NULL,
    ALTER COLUMN execution_id DROP NOT NULL;

INSERT INTO job_successes (job_id)
SELECT id FROM jobs
ON CONFLICT DO NOTHING;

-- +goose Down
DELETE FROM job_successes WHERE last_success_at IS NULL;
ALTER TABLE job_successes ALTER COLUMN last_success_at SET NOT NULL,
    ALTER COLUMN execution_id SET NOT NULL;
