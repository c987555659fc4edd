-- +goose Up
-- Notifications (issue 24): channels say where messages go, rules which
-- jobs' events are worth one; what happened is decided once, in the
-- transaction that changes the execution (or, for silence and circuit
-- breakers, by a conditional write), as a notification_events row; a
-- deliverer groups a rule's pending events into one message per channel
-- (notifications) and delivers it, at least once, under its stable id.

CREATE TABLE notification_channels (
    id          uuid        PRIMARY KEY,
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    type        text        NOT NULL CHECK (type IN ('webhook', 'slack')),
    -- url is shown by the API for a webhook; a Slack incoming-webhook URL
    -- is its own secret, so it is sealed in secret and url holds only its
    -- scheme and host.
    url         text        NOT NULL,
    -- secret, sealed with the cluster's secret keys (like secret headers)
    -- under secret_key_id: a webhook's signing secret, a Slack URL.
    secret_key_id text,
    secret      bytea,
    paused      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    version     bigint      NOT NULL DEFAULT 1,
    UNIQUE (namespace, name)
);

CREATE TABLE notification_rules (
    id             uuid        PRIMARY KEY,
    namespace      text        NOT NULL,
    name           text        NOT NULL,
    -- selector chooses the namespace's jobs by label ('' = all of them).
    selector       text        NOT NULL DEFAULT '',
    events         text[]      NOT NULL,
    channels       uuid[]      NOT NULL,
    failing_after  integer     NOT NULL DEFAULT 3 CHECK (failing_after >= 1),
    silent_grace_ms bigint     NOT NULL DEFAULT 60000 CHECK (silent_grace_ms >= 0),
    late_after_ms  bigint      NOT NULL DEFAULT 60000 CHECK (late_after_ms >= 0),
    slow_after_ms  bigint      NOT NULL DEFAULT 600000 CHECK (slow_after_ms >= 0),
    -- At most one message per rule (and channel) per group_interval: the
    -- events of the interval go out together.
    group_interval_ms bigint   NOT NULL DEFAULT 60000 CHECK (group_interval_ms >= 0),
    paused         boolean     NOT NULL DEFAULT false,
    -- last_sent_at: when the rule's latest message was made.
    last_sent_at   timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    version        bigint      NOT NULL DEFAULT 1,
    UNIQUE (namespace, name)
);

-- What happened, once: dedup_key makes a decision taken twice (two nodes
-- sweeping, an event recorded again) one row.
CREATE TABLE notification_events (
    id              uuid        PRIMARY KEY,
    rule_id         uuid        NOT NULL REFERENCES notification_rules (id) ON DELETE CASCADE,
    namespace       text        NOT NULL,
    kind            text        NOT NULL,
    job_id          uuid,
    job_name        text,
    execution_id    uuid,
    handler         text,
    at              timestamptz NOT NULL,
    detail          jsonb       NOT NULL DEFAULT '{}',
    dedup_key       text        NOT NULL UNIQUE,
    -- grouped_at: when it went into its rule's messages (NULL: pending).
    grouped_at      timestamptz
);
CREATE INDEX notification_events_pending ON notification_events (rule_id, at) WHERE grouped_at IS NULL;

-- The messages: one per rule, channel and group interval, with the body
-- delivered (the same on every attempt) and every attempt's outcome.
CREATE TABLE notifications (
    id              uuid        PRIMARY KEY,
    namespace       text        NOT NULL,
    rule_id         uuid        NOT NULL,
    channel_id      uuid        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),
    kinds           text[]      NOT NULL,
    job_ids         uuid[]      NOT NULL DEFAULT '{}',
    body            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz,
    locked_until    timestamptz,
    attempts        integer     NOT NULL DEFAULT 0,
    attempt_log     jsonb       NOT NULL DEFAULT '[]',
    sent_at         timestamptz,
    last_error      text        NOT NULL DEFAULT ''
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_namespace ON notifications (namespace, created_at DESC, id DESC);
CREATE INDEX notifications_rule ON notifications (rule_id, created_at DESC, id DESC);
CREATE INDEX notifications_jobs ON notifications USING gin (job_ids);

-- A job's current run of dead executions: a row only while it has one
-- (a success deletes it), with the rules that said job.failing about it.
CREATE TABLE job_failures (
    job_id        uuid        PRIMARY KEY,
    consecutive   integer     NOT NULL,
    last_dead_at  timestamptz NOT NULL,
    failing_rules uuid[]      NOT NULL DEFAULT '{}'
);

-- Whether a handler's circuit breaker is open, as the cluster last
-- decided it (the first node to see a change writes it).
CREATE TABLE handler_breakers (
    handler   text        PRIMARY KEY,
    open      boolean     NOT NULL,
    since     timestamptz NOT NULL
);

-- +goose Down
DROP TABLE handler_breakers;
DROP TABLE job_failures;
DROP TABLE notifications;
DROP TABLE notification_events;
DROP TABLE notification_rules;
DROP TABLE notification_channels;
