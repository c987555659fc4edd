-- +goose Up
-- Calendars (issue 43): days and windows a namespace's jobs must not run
-- in, or may run in alone, kept as the API takes them (package calendar
-- evaluates them). Named per namespace, as jobs name them.
CREATE TABLE calendars (
	namespace  text NOT NULL,
	name       text NOT NULL,
	spec       jsonb NOT NULL,
	revision   bigint NOT NULL DEFAULT 1,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (namespace, name)
);

-- +goose Down
DROP TABLE calendars;
