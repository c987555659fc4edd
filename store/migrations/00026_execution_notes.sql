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

-- Events the recorder could not place (issue 37): an event for an
-- execution Postgres does not hold, kept and delivered again for
-- recorder.UnknownGrace, then recorded here instead of dropped, so that an
-- operator sees it (GET /v1/dead-events, tock_dead_events_total) and the
-- execution it names can be traced. Retention deletes rows older than the
-- history's retention.
CREATE TABLE dead_events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    namespace     text        NOT NULL,
    execution_id  uuid        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    attempt       integer     NOT NULL,
    type          text        NOT NULL,
    reason        text        NOT NULL,
    event         jsonb       NOT NULL
);
CREATE INDEX dead_events_namespace ON dead_events (namespace, id);

-- +goose Down
DROP TABLE dead_events;
DROP TABLE execution_notes;
