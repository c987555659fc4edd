-- +goose Up
-- Labels (a JSON object of strings, Kubernetes label syntax) and a
-- description per job. Both are NULL when empty, so a job without them
-- costs nothing more. No index: a listing by selector walks the names in
-- order and filters the jobs it reads, as a listing by state does.
ALTER TABLE jobs ADD COLUMN labels jsonb, ADD COLUMN description text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN labels, DROP COLUMN description;
