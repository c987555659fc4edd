-- +goose Up
-- What attempts printed (issue 38): one row per log chunk
-- (wire.LogChunk), partitioned by day of the execution's scheduled time
-- like executions and attempts, so that retention drops a day's logs with
-- the day, and deletes a namespace's rows with its executions. lines is
-- the chunk's lines as sent ([{"at","text","split"}]); offset and bytes
-- place it in the attempt's whole log (a gap before it is what the
-- executor could not send or its cap policy cut); trim_from and
-- trim_before, on chunks of a log past its head (the head-and-tail cap
-- policy), say which earlier chunks the tail window left behind; ends
-- marks the attempt's last chunk.
CREATE TABLE execution_logs (
    execution_id  uuid        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    attempt       integer     NOT NULL,
    seq           integer     NOT NULL,
    stream        text        NOT NULL,
    "offset"      bigint      NOT NULL,
    bytes         integer     NOT NULL,
    at            timestamptz NOT NULL,
    lines         jsonb       NOT NULL,
    trim_from     bigint,
    trim_before   bigint,
    ends          boolean     NOT NULL DEFAULT false,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, scheduled_for, attempt, seq)
) PARTITION BY RANGE (scheduled_for);

CREATE TABLE execution_logs_default PARTITION OF execution_logs DEFAULT;

-- The days that executions have get theirs (later days are created by
-- the partition maintenance, with executions').
-- +goose StatementBegin
DO $$
DECLARE
    p record;
    day text;
BEGIN
    FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'executions'::regclass AND c.relname ~ '^executions_[0-9]{8}$' LOOP
        day := substr(p.relname, 12);
        EXECUTE format('CREATE TABLE IF NOT EXISTS execution_logs_%s PARTITION OF execution_logs FOR VALUES FROM (%L) TO (%L)',
            day, to_date(day, 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC', (to_date(day, 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE execution_logs;
