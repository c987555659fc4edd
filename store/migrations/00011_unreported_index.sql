-- +goose Up
-- The outbox's first dispatches (fired executions created after their
-- bucket's publish position that no executor has reported on) get a
-- partial index of exactly those rows: an execution enters it when fired
-- and leaves it when its first event is recorded (dispatched_at set,
-- state no longer queued), so it holds a few seconds of executions.
--
-- It replaces a BRIN index on created_at, which had to read every row of
-- the newest page ranges: the rows fired in the last seconds, but also the
-- new versions of every execution recorded in them (recording an
-- execution is not a HOT update), and their visibility checked against
-- transactions still in progress. At 3,750 executions a second each
-- outbox read rechecked about 23,000 rows to find 3,000 (90-280 ms), and
-- the BRIN ranges had to be summarized by hand, autovacuum being too late.
-- On a large existing executions table, build it by hand first with
-- CREATE INDEX CONCURRENTLY on each partition (docs/postgres.md).
CREATE INDEX executions_unreported ON executions (bucket, created_at)
    WHERE dispatches = 0 AND dispatched_at IS NULL AND next_attempt_at IS NULL AND state = 'queued';
DROP INDEX executions_created;

-- +goose Down
CREATE INDEX executions_created ON executions USING brin (created_at);
DROP INDEX executions_unreported;
