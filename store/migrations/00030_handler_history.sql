-- +goose Up
-- What tock saw of its handlers (issue 41), written by every node's
-- breaker watch (package notify) every couple of seconds, read by the
-- handlers page and by the reasons an execution waits.
--
-- handler_breaker_history: each executor's breaker transitions, one row
-- each (the executor's own time of the change is part of the key, so
-- that several nodes seeing the same change write it once).
CREATE TABLE handler_breaker_history (
    handler     text        NOT NULL,
    since       timestamptz NOT NULL,
    executor_id text        NOT NULL,
    state       text        NOT NULL,
    queue       text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    PRIMARY KEY (handler, since, executor_id, state)
);

-- handlers_seen: when some executor last said it served the handler, so
-- that "no executor serves it" can say for how long.
CREATE TABLE handlers_seen (
    handler   text PRIMARY KEY,
    queue     text        NOT NULL,
    last_seen timestamptz NOT NULL
);

-- +goose Down
DROP TABLE handlers_seen;
DROP TABLE handler_breaker_history;
