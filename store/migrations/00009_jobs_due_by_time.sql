-- +goose Up
-- Each jobs partition holds one bucket, so the bucket column adds nothing
-- to the due-jobs index inside a partition, and it cost a lot: a scan of
-- the owned buckets (bucket = ANY of up to N buckets) descended each
-- partition's index once per listed bucket, N² descents a scan (65,000
-- with 256 buckets, every second). Partitions are pruned by bucket; the
-- index walks one time range in each.
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE state = 'active';

-- +goose Down
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (bucket, next_run_at) WHERE state = 'active';
