-- +goose Up
-- Searching executions by error text (GET /v1/executions?error=…, the
-- dashboard's "Error contains") reads this trigram index: without it the
-- search scanned every day partition (about 1 s for 5.5 million
-- executions over 30 days, docs/bench.md "The dashboard at scale"); with
-- it, a few milliseconds. It is partial, so the hot path pays nothing: an
-- execution that succeeds never has an error, and no entry is made.
--
-- pg_trgm ships with PostgreSQL (contrib) and is a trusted extension: a
-- database owner may create it without being a superuser. Where it cannot
-- be created, tock starts all the same, warns, and searches by scanning.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'tock: extension pg_trgm unavailable (%): searching executions by error text scans the history', SQLERRM;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS executions_error ON executions USING gin (error gin_trgm_ops) WHERE error <> '';
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS executions_error;
