-- +goose Up
-- History as pictures (issue 41): the executions of each minute, per
-- namespace and handler queue, rolled up by package history in the
-- background (store/history.go), so that a day per minute or a week per
-- hour is read from a few thousand rows rather than from millions of
-- executions. Nothing on the hot path writes here.
--
-- Counts are by state as of the last rollup of the minute; a minute is
-- rolled up again while any of its executions has not ended (the
-- partial index finds those minutes). fire_lag and start_lag are
-- histograms over fixed bounds (store.LagBounds, 28 buckets): counts add
-- up across minutes and groups, so percentiles of any range merge.
CREATE TABLE history_minutes (
    minute    timestamptz NOT NULL,
    namespace text        NOT NULL,
    handler   text        NOT NULL,
    queued    integer     NOT NULL,
    running   integer     NOT NULL,
    succeeded integer     NOT NULL,
    failed    integer     NOT NULL,
    cancelled integer     NOT NULL,
    dead      integer     NOT NULL,
    waiting   integer     NOT NULL,
    fire_lag  integer[]   NOT NULL,
    start_lag integer[]   NOT NULL,
    PRIMARY KEY (minute, namespace, handler)
);
CREATE INDEX history_minutes_open ON history_minutes (minute)
    WHERE queued + running + failed + waiting > 0;

-- The same per hour (summed from history_minutes): a week per hour reads
-- 168 hours of groups rather than 10,080 minutes of them. Kept longer
-- than the minutes (tockd --history-retention).
CREATE TABLE history_hours (
    hour      timestamptz NOT NULL,
    namespace text        NOT NULL,
    handler   text        NOT NULL,
    queued    integer     NOT NULL,
    running   integer     NOT NULL,
    succeeded integer     NOT NULL,
    failed    integer     NOT NULL,
    cancelled integer     NOT NULL,
    dead      integer     NOT NULL,
    waiting   integer     NOT NULL,
    fire_lag  integer[]   NOT NULL,
    start_lag integer[]   NOT NULL,
    PRIMARY KEY (hour, namespace, handler)
);

-- How far the rollup has gone: every minute before rolled_through has
-- been rolled up at least once; the statistics compute the minutes after
-- it live from the executions.
CREATE TABLE history_rollup (
    id             integer     PRIMARY KEY CHECK (id = 1),
    rolled_through timestamptz NOT NULL
);

-- +goose Down
DROP TABLE history_rollup;
DROP TABLE history_hours;
DROP TABLE history_minutes;
