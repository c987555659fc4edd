-- +goose Up
-- Succeeded executions leave the state index. Recording a success rewrote
-- the row without HOT (its state changed), so every index got an entry for
-- the new row version; (state, scheduled_for) was one of four. Now the
-- common end of an execution adds no entry there, and the index holds only
-- what operators look for by state (queued, running, failed, dead,
-- cancelled) and what the lost-execution sweep reads (running). A listing
-- of succeeded executions walks the primary key backwards instead (ids
-- begin with the scheduled time), where nearly every row matches.
DROP INDEX executions_state;
CREATE INDEX executions_state ON executions (state, scheduled_for) WHERE state <> 'succeeded';

-- +goose Down
DROP INDEX executions_state;
CREATE INDEX executions_state ON executions (state, scheduled_for);
