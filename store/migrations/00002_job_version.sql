-- +goose Up
-- Every write to a job bumps its version, so a read-modify-write (PATCH,
-- pause, resume) can tell that a firing changed the job in between and
-- start over instead of writing back an old next_run_at.
ALTER TABLE jobs ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN version;
