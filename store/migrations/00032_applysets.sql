-- +goose Up
-- Apply sets (issue 42): a named set of jobs kept in files (tockctl apply)
-- owns its members, and nothing else. Ownership is a column of the job,
-- indexed, rather than a label, so that "the members of set S" is a query
-- and prune deletes exactly them. applied_hash is the digest of the job's
-- definition as the last apply left it: a member whose definition no
-- longer hashes to it was changed outside the set (drift). A set's row
-- counts its applies (revision) and says whether changes outside it are
-- refused (lock).
CREATE TABLE applysets (
	namespace  text NOT NULL,
	name       text NOT NULL,
	revision   bigint NOT NULL,
	lock       boolean NOT NULL DEFAULT false,
	commit_id  text,
	applied_at timestamptz NOT NULL,
	applied_by text NOT NULL,
	PRIMARY KEY (namespace, name)
);

ALTER TABLE jobs ADD COLUMN applyset text;
ALTER TABLE jobs ADD COLUMN applied_hash text;
-- Partial: jobs outside any set (most) are not in it.
CREATE INDEX jobs_applyset_idx ON jobs (namespace, applyset) WHERE applyset IS NOT NULL;

-- What an audit entry was part of: the set, its revision and the commit
-- an apply names.
ALTER TABLE audit_log ADD COLUMN detail jsonb;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN detail;
DROP INDEX jobs_applyset_idx;
ALTER TABLE jobs DROP COLUMN applied_hash;
ALTER TABLE jobs DROP COLUMN applyset;
DROP TABLE applysets;
