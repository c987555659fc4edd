-- +goose Up
-- Several executions per JetStream message (docs/wire-protocol.md, "Several
-- executions in one message"): the firing statement writes the same batch
-- id on the executions of one bucket fired for the same instant (up to
-- store.FireBatchMembers of them), and every publish of them, the first or
-- an outbox re-publish after a crash, carries a message id made of it, so
-- that JetStream drops a copy and no member is delivered twice as its
-- first attempt. NULL for an execution fired alone, and for every retry,
-- deferral, re-drive and manual run. A nullable column without a default:
-- adding it rewrites nothing, and a NULL costs a bit in the row's null
-- bitmap. No index: the outbox reads it with the rows it finds anyway.
ALTER TABLE executions ADD COLUMN batch uuid;

-- +goose Down
ALTER TABLE executions DROP COLUMN batch;
