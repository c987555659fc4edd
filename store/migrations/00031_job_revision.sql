-- +goose Up
-- A job's revision (issue 42): one more on every change a person or a
-- client makes to it (PATCH, pause, resume, a dependency taken away),
-- never on a firing, which changes only its runtime state (version counts
-- every write, firings too). The API's ETag is the revision, and PATCH
-- and DELETE honour If-Match against it, so that two editors never
-- overwrite each other silently. A constant default: no table rewrite.
ALTER TABLE jobs ADD COLUMN revision bigint NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE jobs DROP COLUMN revision;
