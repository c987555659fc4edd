-- +goose Up
-- The audit trail (issue 12): every change made through the API, who
-- made it, and the resource before and after (as the API shows it, so
-- with secrets masked). Partitioned by day of at; maintenance makes the
-- days ahead and drops the days past --audit-retention. Rows of a day
-- without a partition land in the default one.
CREATE TABLE audit_log (
    at        timestamptz NOT NULL,
    id        uuid        NOT NULL,
    actor     text        NOT NULL,
    namespace text        NOT NULL,
    action    text        NOT NULL,
    resource  text        NOT NULL,
    before    jsonb,
    after     jsonb,
    PRIMARY KEY (at, id)
) PARTITION BY RANGE (at);
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;
CREATE INDEX audit_log_namespace ON audit_log (namespace, at DESC, id DESC);

-- +goose Down
DROP TABLE audit_log;
