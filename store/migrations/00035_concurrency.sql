-- +goose Up
-- Concurrency and rate limits by key (issue 43). A job with either has
-- its key rendered when it is written (in its policy: "ns:<namespace>:
-- <key>" or "cluster:<key>"; "rate:ns:..." for a rate limit); each of its
-- executions carries the key and the job's figures. An execution holds
-- one of its concurrency key's slots from the moment it is queued until
-- it ends, whatever the end; one over the limit waits (state waiting, a
-- row of concurrency_slots with held = false) and is queued, oldest
-- first, in the transaction that frees a slot. A rate-limited execution
-- is released to the outbox when its key's window has room.
--
-- Both are kept by triggers on executions, so that every path that
-- queues or ends an execution (firing, manual runs, backfills, chains,
-- the dependency resolver, the recorder, cancels, lost-work rescue, a
-- re-drive of a dead execution, deletes) takes and releases slots in its
-- own transaction: none of them can forget to. The triggers' WHEN
-- clauses read only the row, so executions without a key cost two NULL
-- tests.
ALTER TABLE executions
	ADD COLUMN slot_key      text,
	ADD COLUMN slot_limit    integer,
	ADD COLUMN slot_on_limit text,
	ADD COLUMN rate_limit    jsonb;

-- The skip ledger's reasons: a run skipped by its key's on_limit skip.
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check
    CHECK (reason IN ('missed', 'overlap', 'paused', 'dependency', 'dependency_timeout', 'calendar', 'concurrency', 'rate_limit'));

CREATE TABLE concurrency_slots (
	slot_key      text        NOT NULL,
	execution_id  uuid        NOT NULL,
	scheduled_for timestamptz NOT NULL,
	job_id        uuid        NOT NULL,
	namespace     text        NOT NULL,
	held          boolean     NOT NULL,
	since         timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (slot_key, execution_id)
);
-- A key's waiting executions, oldest first.
CREATE INDEX concurrency_slots_waiting ON concurrency_slots (slot_key, scheduled_for, execution_id) WHERE NOT held;

-- Rate limits by key: each release of an execution of a key (to the
-- outbox, at its next_attempt_at), kept while it is within the longest
-- window, and the key's theoretical arrival time for its burst (GCRA).
CREATE TABLE rate_admissions (
	slot_key     text        NOT NULL,
	at           timestamptz NOT NULL,
	execution_id uuid        NOT NULL
);
CREATE INDEX rate_admissions_key ON rate_admissions (slot_key, at);
CREATE TABLE rate_keys (
	slot_key text PRIMARY KEY,
	tat      timestamptz NOT NULL
);

-- +goose StatementBegin
-- tock_slot_take runs before an execution with a key is inserted queued
-- or enters a state that holds a slot (queued, running, failed) from one
-- that does not (waiting, or ended and re-driven). It takes a slot when
-- fewer than the execution's limit are held; otherwise the execution
-- waits (on_limit wait; an event that would have it run without a slot
-- leaves it waiting too), is skipped (skip: an insert becomes a skipped
-- run, reason concurrency, a manual run is refused; a move is cancelled
-- with the reason) or, for cancel_oldest, waits too: the firing
-- cancelled the key's oldest executions first (store.cancelOldest), and
-- the slots they freed went to the oldest waiters.
CREATE FUNCTION tock_slot_take() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	n integer;
	why text;
	reason text;
	k text;
	lim integer;
	per interval;
	gap interval;
	guard interval;
	burst integer;
	nowms timestamptz;
	t timestamptz;
	w timestamptz;
BEGIN
	IF NEW.state NOT IN ('queued', 'running', 'failed') THEN
		RETURN NEW;
	END IF;
	IF TG_OP = 'UPDATE' THEN
		IF OLD.state IN ('queued', 'running', 'failed') THEN
			RETURN NEW; -- it holds its slot already
		END IF;
	ELSIF EXISTS (SELECT 1 FROM executions WHERE job_id = NEW.job_id AND scheduled_for = NEW.scheduled_for) THEN
		RETURN NEW; -- the insert meets its conflict and does nothing
	END IF;
	nowms := date_trunc('milliseconds', now());
	IF NEW.slot_key IS NOT NULL THEN
		PERFORM pg_advisory_xact_lock(1953459051, hashtext(NEW.slot_key));
		SELECT count(*) INTO n FROM concurrency_slots WHERE slot_key = NEW.slot_key AND held;
		IF n >= NEW.slot_limit AND NEW.slot_on_limit = 'skip' THEN
			reason := 'concurrency';
			why := 'concurrency key ' || NEW.slot_key || ' is at its limit of ' || NEW.slot_limit;
		ELSIF n >= NEW.slot_limit THEN
			INSERT INTO concurrency_slots (slot_key, execution_id, scheduled_for, job_id, namespace, held)
			VALUES (NEW.slot_key, NEW.id, NEW.scheduled_for, NEW.job_id, NEW.namespace, false)
			ON CONFLICT (slot_key, execution_id) DO NOTHING;
			NEW.state := 'waiting';
			NEW.next_attempt_at := '9999-12-31 00:00:00+00';
			RETURN NEW;
		ELSE
			INSERT INTO concurrency_slots (slot_key, execution_id, scheduled_for, job_id, namespace, held)
			VALUES (NEW.slot_key, NEW.id, NEW.scheduled_for, NEW.job_id, NEW.namespace, true)
			ON CONFLICT (slot_key, execution_id) DO UPDATE SET held = true, since = now();
		END IF;
	END IF;
	-- The rate limit: when, at the earliest, the key's window has room
	-- for one more: not before the execution is due, not before the key's
	-- last release (in order), not within per (and a guard band) of the
	-- limit-th last release, and not before its burst allows (GCRA: one
	-- every per / limit, burst of them back to back). Then it is
	-- released at that time (next_attempt_at: the outbox publishes it
	-- when it comes). The guard band, a twentieth of per up to 500 ms,
	-- keeps the publishing's and the executors' few milliseconds of
	-- delay from putting more than limit starts in a window.
	IF why IS NULL AND NEW.rate_limit IS NOT NULL AND NEW.state = 'queued' THEN
		k := NEW.rate_limit->>'slot_key';
		lim := (NEW.rate_limit->>'limit')::integer;
		per := ((NEW.rate_limit->>'per_ms')::bigint) * interval '1 millisecond';
		burst := COALESCE(NULLIF((NEW.rate_limit->>'burst')::integer, 0), lim);
		gap := per / lim;
		guard := LEAST(per / 20, interval '500 milliseconds');
		PERFORM pg_advisory_xact_lock(1953459051, hashtext(k));
		t := GREATEST(nowms, COALESCE(NEW.next_attempt_at, NEW.scheduled_for));
		t := GREATEST(t, (SELECT max(at) FROM rate_admissions WHERE slot_key = k));
		SELECT at INTO w FROM rate_admissions WHERE slot_key = k ORDER BY at DESC OFFSET lim - 1 LIMIT 1;
		IF FOUND THEN
			t := GREATEST(t, w + per + guard);
		END IF;
		t := GREATEST(t, (SELECT tat - (burst - 1) * gap FROM rate_keys WHERE slot_key = k));
		IF t > GREATEST(nowms, COALESCE(NEW.next_attempt_at, NEW.scheduled_for)) AND NEW.rate_limit->>'on_limit' = 'skip' THEN
			reason := 'rate_limit';
			why := 'rate limit key ' || k || ' has no room before ' || to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
		ELSE
			INSERT INTO rate_admissions (slot_key, at, execution_id) VALUES (k, t, NEW.id);
			INSERT INTO rate_keys (slot_key, tat) VALUES (k, t + gap)
			ON CONFLICT (slot_key) DO UPDATE SET tat = GREATEST(rate_keys.tat, t) + gap;
			DELETE FROM rate_admissions WHERE slot_key = k AND at <= nowms - per - guard;
			IF t > nowms OR NEW.next_attempt_at IS NOT NULL THEN
				NEW.next_attempt_at := t;
			END IF;
			RETURN NEW;
		END IF;
	END IF;
	IF why IS NULL THEN
		RETURN NEW;
	END IF;
	-- on_limit skip.
	IF NEW.slot_key IS NOT NULL THEN
		DELETE FROM concurrency_slots WHERE slot_key = NEW.slot_key AND execution_id = NEW.id;
	END IF;
	IF TG_OP = 'INSERT' AND NEW.manual THEN
		-- A run asked for now is refused, not skipped (store.ErrAtLimit).
		RAISE EXCEPTION USING ERRCODE = 'TK001', MESSAGE = why || ' (on_limit skip)';
	END IF;
	IF TG_OP = 'INSERT' THEN
		INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, detail, namespace, job_name)
		VALUES (NEW.job_id, NEW.scheduled_for, NEW.scheduled_for, 1, reason, why, NEW.namespace, NEW.job_name)
		ON CONFLICT DO NOTHING;
		RETURN NULL;
	END IF;
	NEW.state := 'cancelled';
	NEW.finished_at := nowms;
	NEW.dispatched_at := COALESCE(NEW.dispatched_at, nowms);
	NEW.next_attempt_at := NULL;
	NEW.error := 'skipped: ' || why || ' (on_limit skip)';
	RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- tock_slot_release runs after an execution with a key ends or is
-- deleted: it frees what the execution held (or its place in the queue)
-- and queues the key's oldest waiting executions while slots are free
-- (each takes its slot through tock_slot_take), telling the dispatchers
-- of their buckets.
CREATE FUNCTION tock_slot_release() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	k text;
	w record;
	n integer;
	st text;
	lim integer;
	b integer;
BEGIN
	IF TG_OP = 'DELETE' THEN
		k := OLD.slot_key;
	ELSE
		k := NEW.slot_key;
	END IF;
	PERFORM pg_advisory_xact_lock(1953459051, hashtext(k));
	DELETE FROM concurrency_slots WHERE slot_key = k AND execution_id = OLD.id;
	LOOP
		SELECT s.execution_id, s.scheduled_for INTO w FROM concurrency_slots s
		WHERE s.slot_key = k AND NOT s.held ORDER BY s.scheduled_for, s.execution_id LIMIT 1;
		EXIT WHEN NOT FOUND;
		SELECT x.state, x.slot_limit, x.bucket INTO st, lim, b FROM executions x
		WHERE x.id = w.execution_id AND x.scheduled_for = w.scheduled_for;
		IF NOT FOUND OR st <> 'waiting' THEN
			-- Not waiting any more: its place in the queue is stale.
			DELETE FROM concurrency_slots WHERE slot_key = k AND execution_id = w.execution_id AND NOT held;
			CONTINUE;
		END IF;
		SELECT count(*) INTO n FROM concurrency_slots WHERE slot_key = k AND held;
		EXIT WHEN n >= lim;
		UPDATE executions x SET state = 'queued',
			next_attempt_at = GREATEST(date_trunc('milliseconds', now()), COALESCE(x.due_at, x.scheduled_for))
		WHERE x.id = w.execution_id AND x.scheduled_for = w.scheduled_for AND x.state = 'waiting';
		-- tock_slot_take gave it the slot; it waits still if it did not.
		EXIT WHEN NOT EXISTS (SELECT 1 FROM concurrency_slots
			WHERE slot_key = k AND execution_id = w.execution_id AND held);
		PERFORM pg_notify('tock_exec', b::text);
	END LOOP;
	RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER executions_slot_take BEFORE INSERT OR UPDATE OF state ON executions
	FOR EACH ROW WHEN (NEW.slot_key IS NOT NULL OR NEW.rate_limit IS NOT NULL) EXECUTE FUNCTION tock_slot_take();
CREATE TRIGGER executions_slot_end AFTER UPDATE OF state ON executions
	FOR EACH ROW WHEN (NEW.slot_key IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
		AND NEW.state IN ('succeeded', 'dead', 'cancelled'))
	EXECUTE FUNCTION tock_slot_release();
CREATE TRIGGER executions_slot_gone AFTER DELETE ON executions
	FOR EACH ROW WHEN (OLD.slot_key IS NOT NULL) EXECUTE FUNCTION tock_slot_release();

-- +goose Down
DELETE FROM skipped_runs WHERE reason IN ('concurrency', 'rate_limit');
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check
    CHECK (reason IN ('missed', 'overlap', 'paused', 'dependency', 'dependency_timeout', 'calendar'));
DROP TRIGGER executions_slot_gone ON executions;
DROP TRIGGER executions_slot_end ON executions;
DROP TRIGGER executions_slot_take ON executions;
DROP FUNCTION tock_slot_release();
DROP FUNCTION tock_slot_take();
DROP TABLE concurrency_slots;
DROP TABLE rate_keys;
DROP TABLE rate_admissions;
ALTER TABLE executions DROP COLUMN slot_key, DROP COLUMN slot_limit, DROP COLUMN slot_on_limit, DROP COLUMN rate_limit;
