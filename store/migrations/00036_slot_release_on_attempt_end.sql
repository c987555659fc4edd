-- +goose Up
-- A cancelled execution keeps its concurrency slot while its attempt may
-- still run (issue 43). Cancelling is recorded first and told to the
-- executors after (wire.CancelExecution), so an attempt under way, or a
-- delivery already published, goes on for a moment after the execution
-- is cancelled; had the slot gone to the key's next waiter at once, the
-- two would run side by side, one more than the limit (seen: 3 at once
-- for a limit of 2). Now the slot is "releasing" (releasing_at, the last
-- sign of life) from the cancel until the executor's report that the
-- attempt ended (or that it never began) is recorded, or, if none comes,
-- until the lost-work rescue finds it silent for its LostAfter
-- (tock_slot_expire, store.ReleaseSilentSlots). A releasing slot counts
-- against the limit like any held one.
ALTER TABLE concurrency_slots ADD COLUMN releasing_at timestamptz;
CREATE INDEX concurrency_slots_releasing ON concurrency_slots (releasing_at) WHERE releasing_at IS NOT NULL;

-- +goose StatementBegin
-- tock_attempt_open: the execution's newest attempt began and has not
-- ended (attempt 1 inline in the row while it is the only one, the
-- others in attempts). The recorder writes attempts before executions,
-- so that a trigger on the executions row sees its batch's attempts.
CREATE FUNCTION tock_attempt_open(x executions) RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN x.attempts < 1 THEN false
		WHEN x.attempt_outcome IS NOT NULL THEN x.attempt_finished_at IS NULL
		ELSE EXISTS (SELECT 1 FROM attempts a WHERE a.execution_id = x.id AND a.scheduled_for = x.scheduled_for
			AND a.number = x.attempts AND a.finished_at IS NULL)
	END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- tock_slot_admit queues key k's oldest waiting executions while slots
-- are free (each takes its slot through tock_slot_take), telling the
-- dispatchers of their buckets. The caller holds k's lock.
CREATE FUNCTION tock_slot_admit(k text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	w record;
	n integer;
	st text;
	lim integer;
	b integer;
BEGIN
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
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- tock_slot_release runs after an execution with a key ends or is
-- deleted: it frees what the execution held (or its place in the queue)
-- and admits the key's waiters. An execution cancelled while an attempt
-- of it may run keeps its slot, releasing: its newest attempt is open,
-- or it was queued or retrying and published (or about to be: no later
-- due time), so that an executor may hold its delivery. A cancel that
-- the recorder applies with the attempt's end (the executor stopped it
-- on its own) frees the slot at once.
CREATE OR REPLACE FUNCTION tock_slot_release() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	k text;
BEGIN
	IF TG_OP = 'DELETE' THEN
		k := OLD.slot_key;
	ELSE
		k := NEW.slot_key;
	END IF;
	PERFORM pg_advisory_xact_lock(1953459051, hashtext(k));
	IF TG_OP = 'UPDATE' AND NEW.state = 'cancelled' AND (tock_attempt_open(NEW)
		OR (OLD.state = 'queued' AND COALESCE(OLD.next_attempt_at <= now(), true))
		OR (OLD.state = 'failed' AND OLD.dispatched_at IS NOT NULL))
	THEN
		UPDATE concurrency_slots SET releasing_at = now()
		WHERE slot_key = k AND execution_id = OLD.id AND held;
		IF FOUND THEN
			RETURN NULL;
		END IF;
	END IF;
	DELETE FROM concurrency_slots WHERE slot_key = k AND execution_id = OLD.id;
	PERFORM tock_slot_admit(k);
	RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- tock_slot_settle runs after the recorder writes a cancelled execution
-- with a key again (an executor's report about it): while its newest
-- attempt is open the releasing slot's sign of life moves on; once it is
-- not (the attempt ended, or the delivery was answered unrun), the slot
-- is freed and the key's waiters admitted.
CREATE FUNCTION tock_slot_settle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM concurrency_slots
		WHERE slot_key = NEW.slot_key AND execution_id = NEW.id AND releasing_at IS NOT NULL) THEN
		RETURN NULL;
	END IF;
	PERFORM pg_advisory_xact_lock(1953459051, hashtext(NEW.slot_key));
	IF tock_attempt_open(NEW) THEN
		UPDATE concurrency_slots SET releasing_at = now()
		WHERE slot_key = NEW.slot_key AND execution_id = NEW.id AND releasing_at IS NOT NULL;
		RETURN NULL;
	END IF;
	DELETE FROM concurrency_slots WHERE slot_key = NEW.slot_key AND execution_id = NEW.id;
	PERFORM tock_slot_admit(NEW.slot_key);
	RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- tock_slot_expire frees the releasing slots of executions in buckets
-- whose last sign of life is before before (their executor is gone and
-- no report will come), key by key in key order, and admits the keys'
-- waiters. It returns how many it freed.
CREATE FUNCTION tock_slot_expire(buckets integer[], before timestamptz) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	r record;
	n integer := 0;
BEGIN
	FOR r IN SELECT s.slot_key, s.execution_id FROM concurrency_slots s
		JOIN executions x ON x.id = s.execution_id AND x.scheduled_for = s.scheduled_for
		WHERE s.releasing_at < before AND x.bucket = ANY (buckets)
		ORDER BY s.slot_key, s.execution_id
	LOOP
		PERFORM pg_advisory_xact_lock(1953459051, hashtext(r.slot_key));
		DELETE FROM concurrency_slots WHERE slot_key = r.slot_key AND execution_id = r.execution_id
			AND releasing_at < before;
		IF FOUND THEN
			n := n + 1;
			PERFORM tock_slot_admit(r.slot_key);
		END IF;
	END LOOP;
	RETURN n;
END $$;
-- +goose StatementEnd

CREATE TRIGGER executions_slot_settle AFTER UPDATE ON executions
	FOR EACH ROW WHEN (NEW.slot_key IS NOT NULL AND OLD.state = 'cancelled' AND NEW.state = 'cancelled')
	EXECUTE FUNCTION tock_slot_settle();

-- +goose Down
DROP TRIGGER executions_slot_settle ON executions;
DROP FUNCTION tock_slot_expire(integer[], timestamptz);
DROP FUNCTION tock_slot_settle();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tock_slot_release() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP FUNCTION tock_slot_admit(text);
DROP FUNCTION tock_attempt_open(executions);
DELETE FROM concurrency_slots WHERE releasing_at IS NOT NULL;
ALTER TABLE concurrency_slots DROP COLUMN releasing_at;
