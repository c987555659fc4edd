-- +goose Up
-- API keys (issue 12): a key is tock_<id>_<secret>; only the SHA-256 of
-- its id and secret is kept (auth.Key.Hash). Each key holds one role in
-- one namespace, or in every namespace ('*').
CREATE TABLE api_keys (
    id           text        PRIMARY KEY,
    secret_hash  bytea       NOT NULL,
    namespace    text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('reader', 'operator', 'editor', 'admin')),
    name         text        NOT NULL DEFAULT '',
    created_by   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX api_keys_namespace ON api_keys (namespace);

-- +goose Down
DROP TABLE api_keys;
