-- +goose Up
-- Finding jobs by next run (issue 44): a listing with next_run_after or
-- next_run_before comes soonest first, in (next run, namespace, name)
-- order. Across the cluster, jobs_due (next_run_at) walks the range in
-- that order already; within a namespace this index does, so that a page
-- of "billing's jobs due in the next hour" reads the page's entries
-- (merged over the partitions) rather than the hour's jobs of every
-- namespace, or every job of the namespace.
--
-- Its cost is on firing: each run of a recurring job moves next_run_at,
-- which jobs_due already keeps out of HOT updates, so this is one more
-- index entry per firing (measured in docs/bench.md). Building it holds
-- writes to jobs (firing included) while it runs: under 20 s at
-- 10,000,000 jobs; docs/postgres.md shows how to build it beforehand
-- without the lock.
CREATE INDEX jobs_next_run ON jobs (namespace, next_run_at, name COLLATE "C") WHERE state = 'active';

-- +goose Down
DROP INDEX jobs_next_run;
