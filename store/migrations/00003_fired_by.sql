-- +goose Up
-- Which scheduler node fired an execution ('' for manual runs, which the
-- API inserts). Operators and the failover tests use it to see that a
-- deposed owner fired nothing after it lost its bucket.
ALTER TABLE executions ADD COLUMN fired_by text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE executions DROP COLUMN fired_by;
