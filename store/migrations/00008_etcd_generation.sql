-- +goose Up
-- The etcd generation: every life of etcd (a new cluster, or one that lost
-- its data) gets the next one, and a fencing epoch is generation<<40 |
-- etcd revision, so that epochs keep growing when etcd counts revisions
-- from 1 again (see package partition). Allocated here, in the cluster's
-- one row, so that no two lives of etcd ever share a generation.
ALTER TABLE cluster ADD COLUMN etcd_generation bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE cluster DROP COLUMN etcd_generation;
