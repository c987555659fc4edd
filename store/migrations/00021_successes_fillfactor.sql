-- +goose Up
-- A job's last success is rewritten on every success (issue 20): with room
-- left on each page, the update is HOT (no column of job_successes' only
-- index changes), so it adds no index entry and rewrites no index page.
-- Pages written before this migration keep their old fill until the
-- table is rewritten (VACUUM FULL job_successes, docs/postgres.md).
ALTER TABLE job_successes SET (fillfactor = 50);

-- +goose Down
ALTER TABLE job_successes RESET (fillfactor);
