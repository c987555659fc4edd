-- +goose Up
-- Per-namespace settings: a retention that overrides the cluster's
-- (tockd --retention) for the namespace's history. A namespace needs no
-- row here to exist: it exists while it has jobs.
CREATE TABLE namespaces (
    name         text PRIMARY KEY,
    retention_ms bigint CHECK (retention_ms > 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE namespaces;
