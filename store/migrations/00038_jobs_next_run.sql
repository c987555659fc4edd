-- +goose Up
-- Superseded by migration 39 before any release: this built a second
-- index on jobs' next run, (namespace, next_run_at, name), whose entry
-- each firing paid for (~15 us of Postgres per execution, docs/bench.md).
-- Migration 39 drops it where it was built and widens jobs_due instead.
SELECT 1;

-- +goose Down
SELECT 1;
