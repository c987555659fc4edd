-- +goose Up
-- Finding jobs (issue 44): job_names, one narrow unpartitioned row per
-- job, becomes the table GET /v1/jobs searches. It carries what a listing
-- filters on besides the name (state, handler queue, labels), so that
-- every filter is answered from an index of this table instead of a walk
-- over the namespace's names probing each job's partition.
--
-- The copies are written with the job: the inserts of CreateJob,
-- CreateJobBatch and CopyJobs write them, and a trigger on jobs keeps them
-- in step with every later change (UpdateJob, pause and resume, apply
-- sets, resealed secrets), so that no path that changes a job can forget
-- them. Its WHEN clause reads only the row: a firing that moves
-- next_run_at, and leaves state alone, costs four comparisons and queues
-- nothing. next_run_at is not copied: it
-- changes at every firing.
--
-- The table is rebuilt (in name order, so that a walk of the primary key
-- reads the heap in order) rather than updated in place, which would
-- leave a dead row per job behind. Writers wait for the rebuild.
LOCK TABLE job_names, jobs IN SHARE MODE;

CREATE TABLE job_names_search (
    namespace text COLLATE "C" NOT NULL,
    name      text COLLATE "C" NOT NULL,
    job_id    uuid    NOT NULL,
    bucket    integer NOT NULL,
    -- The job's state, handler queue (http, nats, or a custom handler's
    -- name: what executions' handler filter means) and labels, as jobs has
    -- them.
    state     text    NOT NULL,
    handler   text    NOT NULL,
    labels    jsonb,
    -- What label selectors search: the labels and the namespace (under
    -- "/ns", which no label key can be), so that one GIN lookup finds a
    -- namespace's jobs with a label, and the planner, whose estimate of
    -- @> tests the whole value against a sample of the column, sees how
    -- labels go with namespaces (a team that has no job in a namespace
    -- is estimated as rare there, and read from the index, not walked).
    terms     jsonb   NOT NULL GENERATED ALWAYS AS (coalesce(labels, '{}') || jsonb_object(ARRAY['/ns', namespace])) STORED
);
INSERT INTO job_names_search (namespace, name, job_id, bucket, state, handler, labels)
SELECT n.namespace, n.name, n.job_id, n.bucket, j.state,
    CASE WHEN j.handler->>'type' = 'custom' THEN j.handler->>'name' ELSE j.handler->>'type' END, j.labels
FROM job_names n JOIN jobs j ON j.bucket = n.bucket AND j.id = n.job_id
ORDER BY n.namespace, n.name;

DROP TABLE job_names;
ALTER TABLE job_names_search RENAME TO job_names;
ALTER TABLE job_names ADD CONSTRAINT job_names_pkey PRIMARY KEY (namespace, name);
ALTER TABLE job_names ADD CONSTRAINT job_names_job_id_key UNIQUE (job_id);
-- Name prefix across all namespaces.
CREATE INDEX job_names_name ON job_names (name, namespace);
-- A state or a handler, in (namespace, name) order within it: a rare one
-- reads only its own jobs, in the listing's order, for any namespace or
-- all of them.
CREATE INDEX job_names_state ON job_names (state, namespace, name);
CREATE INDEX job_names_handler ON job_names (handler, namespace, name);
-- Label selectors: @> for key=value and key in (...) (with the
-- namespace), ? for key exists (which jsonb_path_ops cannot answer).
CREATE INDEX job_names_terms ON job_names USING gin (terms);

-- +goose StatementBegin
CREATE FUNCTION tock_job_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE job_names SET state = NEW.state, labels = NEW.labels,
		handler = CASE WHEN NEW.handler->>'type' = 'custom' THEN NEW.handler->>'name' ELSE NEW.handler->>'type' END
	WHERE job_id = NEW.id;
	RETURN NULL;
END
$$;
-- +goose StatementEnd
-- A firing transaction (tock.firing on) marks the one-shot jobs it
-- completes in job_names itself, in one set-based update: this trigger's
-- update per job doubled the cost of firing them (BenchmarkFireCompleting).
CREATE TRIGGER jobs_search AFTER UPDATE OF state, labels, handler ON jobs
	FOR EACH ROW WHEN ((OLD.state IS DISTINCT FROM NEW.state
		OR OLD.labels IS DISTINCT FROM NEW.labels
		OR OLD.handler->>'type' IS DISTINCT FROM NEW.handler->>'type'
		OR OLD.handler->>'name' IS DISTINCT FROM NEW.handler->>'name')
		AND current_setting('tock.firing', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION tock_job_search();
-- What the planner needs to see a state or handler that one namespace
-- has few of, though others have many.
CREATE STATISTICS job_names_namespace_state (mcv) ON namespace, state FROM job_names;
CREATE STATISTICS job_names_namespace_handler (mcv) ON namespace, handler FROM job_names;
-- The rebuilt table has no statistics until it is analyzed, and until
-- then the planner guesses at every filter: a table of jobs is analyzed
-- now (a sample, seconds at 10,000,000 jobs) rather than when autovacuum,
-- which may be off, gets to it. An empty one is left to the planner's
-- defaults, as a new database's is.
-- +goose StatementBegin
DO $$ BEGIN
	IF EXISTS (SELECT 1 FROM job_names) THEN
		ANALYZE job_names;
	END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP STATISTICS job_names_namespace_state, job_names_namespace_handler;
DROP TRIGGER jobs_search ON jobs;
DROP FUNCTION tock_job_search();
DROP INDEX job_names_handler, job_names_state;
ALTER TABLE job_names DROP COLUMN terms, DROP COLUMN state, DROP COLUMN handler, DROP COLUMN labels;
