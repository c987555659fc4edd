-- +goose Up
-- What tock did to an execution by itself, beside its attempts (issue 37):
-- each rescue of an execution left waiting (published, and neither
-- started nor in JetStream any more: a lost message, or a recording that a
-- Postgres failover lost), each lost attempt re-queued. Rare rows, read with
-- the execution (GET /v1/executions/{id}); retention deletes them with
-- their day.
CREATE TABLE execution_notes (
    execution_id  uuid        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    at            timestamptz NOT NULL,
    kind          text        NOT NULL,
    note          text        NOT NULL,
    PRIMARY KEY (execution_id, scheduled_for, at, kind)
);
CREATE INDEX execution_notes_day ON execution_notes (scheduled_for);

-- Events the recorder could not place (issue 37), instead of dropping
-- them: an event for an execution Postgres does not hold, kept and
-- delivered again for recorder.UnknownGrace first (a re-fired row receives
-- it meanwhile), and an event that does not decode or is invalid. An
-- operator sees them (GET /v1/dead-events, tock_dead_events_total) and can
-- trace the execution they name. The execution columns are NULL where the
-- event did not say (or not validly); event is the message's data as it
-- came, cut to 64 KiB. Retention deletes rows older than the history's
-- default retention.
CREATE TABLE dead_events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    namespace     text        NOT NULL DEFAULT '',
    execution_id  uuid,
    scheduled_for timestamptz,
    attempt       integer,
    type          text        NOT NULL DEFAULT '',
    reason        text        NOT NULL,
    event         text        NOT NULL
);
CREATE INDEX dead_events_namespace ON dead_events (namespace, id);

-- +goose Down
DROP TABLE dead_events;
DROP TABLE execution_notes;
