-- +goose Up
-- A fired execution is no longer marked dispatched one by one. Instead
-- each bucket keeps a publish position: every first dispatch of a fired
-- execution in the bucket created (created_at) at or before
-- published_through has been acknowledged by JetStream. It has a table of
-- its own, not a column of bucket_owners, whose rows every firing
-- transaction holds FOR SHARE: advancing a position must not wait for the
-- firings in flight. The bucket's
-- owner advances it once per published batch; a new owner re-publishes
-- what was fired after it (JetStream drops the duplicates inside its
-- two-minute window). Re-dispatches (retries, deferrals, re-drives, lost
-- re-queues) and manual runs carry next_attempt_at and are still marked
-- dispatched one by one: they are few.
CREATE TABLE publish_positions (
    bucket            integer PRIMARY KEY,
    published_through timestamptz NOT NULL
);
INSERT INTO publish_positions (bucket, published_through)
SELECT bucket, date_trunc('milliseconds', now()) - interval '1 ms' FROM bucket_owners;

-- Executions fired and not yet published under the old scheme join the
-- re-dispatch outbox, so that none is lost by the upgrade.
UPDATE executions SET next_attempt_at = scheduled_for
WHERE dispatched_at IS NULL AND next_attempt_at IS NULL AND state IN ('queued', 'failed');

DROP INDEX executions_outbox;
-- Re-dispatches and manual runs waiting to be published, by due time.
CREATE INDEX executions_redispatch ON executions (bucket, next_attempt_at)
    WHERE next_attempt_at IS NOT NULL AND dispatched_at IS NULL;
-- First dispatches after a publish position: executions are inserted in
-- creation order, so a BRIN index finds the newest pages for nearly
-- nothing per insert.
CREATE INDEX executions_created ON executions USING brin (created_at);

-- +goose Down
DROP INDEX executions_created;
DROP INDEX executions_redispatch;
CREATE INDEX executions_outbox ON executions (bucket, (COALESCE(next_attempt_at, scheduled_for)))
    WHERE dispatched_at IS NULL;
DROP TABLE publish_positions;
