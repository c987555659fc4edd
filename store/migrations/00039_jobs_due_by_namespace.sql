-- +goose Up
-- Finding jobs by next run (issue 44): a listing with next_run_after or
-- next_run_before comes soonest first, in (next run, namespace, name)
-- order. jobs_due, the scanner's index of what is due, now holds the
-- namespace and name after the time, so that it gives that order across
-- the cluster with no sort, and within a namespace tests the namespace on
-- the index entries rather than on each row's heap tuple: a page of
-- "audit's jobs due in the next day", audit being 1% of the jobs, reads
-- ~100 index entries per match instead of ~100 rows.
--
-- Firing moves next_run_at, so it writes one jobs_due entry per run
-- either way; the entry is wider, not another one (a second index,
-- migration 38's, cost ~15 us of Postgres per execution; this one
-- measures within run-to-run spread, docs/bench.md). The scanner's due
-- query reads it by next_run_at as before.
--
-- Building it holds writes to jobs (firing included) while it runs: under
-- 30 s at 10,000,000 jobs; docs/postgres.md shows how to build it
-- beforehand without the lock.
DROP INDEX IF EXISTS jobs_next_run;
CREATE INDEX jobs_due_by_namespace ON jobs (next_run_at, namespace COLLATE "C", name COLLATE "C") WHERE state = 'active';
DROP INDEX jobs_due;
ALTER INDEX jobs_due_by_namespace RENAME TO jobs_due;

-- +goose Down
CREATE INDEX jobs_due_by_time ON jobs (next_run_at) WHERE state = 'active';
DROP INDEX jobs_due;
ALTER INDEX jobs_due_by_time RENAME TO jobs_due;
