-- +goose Up
-- Idempotency-Key (issue 12): the first response to a write sent with a
-- key, replayed to a retry of the same request for 24 hours. Keys are
-- scoped by namespace (the one the request writes to). A row without a
-- status is a request still in progress.
CREATE TABLE idempotency_keys (
    namespace    text        NOT NULL,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    status       integer,
    content_type text,
    response     bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
