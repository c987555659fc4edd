package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// Kinds of execution notes (execution_notes.kind).
const (
	// NoteRescued: the execution waited, published, and neither started
	// nor was in JetStream any more; it was published again.
	NoteRescued = "rescued"
	// NoteLost: its attempt gave no sign of life and was taken for lost;
	// the execution was published again as its next attempt.
	NoteLost = "lost"
)

// stuckSQL reads the executions of buckets $1 that may be stuck: $2 the
// time before which a publish makes a waiting execution a candidate, $3
// the time before which a running attempt's last sign of life makes it
// one, $4 the limit. Waiting: queued or failed (its retry published), no
// attempt of its current dispatch started, published before $2 —
// re-dispatches and manual runs by their dispatched_at, fired executions'
// first dispatches by their bucket's publish position and the time the
// dispatcher holds them until (their due time, or their creation if
// fired late). Running: as requeueLostSQL. The (state, scheduled_for)
// index finds them: a publish comes at or after the scheduled time, and
// these states hold only the work in flight.
var stuckSQL = `SELECT ` + execColumns + `, CASE WHEN state = 'running' THEN
		COALESCE(GREATEST(x.attempt_heartbeat_at, x.attempt_started_at), x.started_at, x.created_at)
	ELSE COALESCE(dispatched_at, GREATEST(created_at, COALESCE(due_at, scheduled_for))) END
FROM executions x
WHERE bucket = ANY($1) AND scheduled_for < GREATEST($2, $3::timestamptz) AND (
	(state IN ('queued', 'failed') AND scheduled_for < $2 AND (dispatched_at < $2
		OR (dispatched_at IS NULL AND next_attempt_at IS NULL AND dispatches = 0 AND state = 'queued'
			AND NOT manual AND NOT buffered AND GREATEST(created_at, COALESCE(due_at, scheduled_for)) < $2
			AND created_at <= (SELECT p.published_through FROM publish_positions p WHERE p.bucket = x.bucket))))
	OR (state = 'running' AND attempts <= 1 AND scheduled_for < $3
		AND COALESCE(GREATEST(x.attempt_heartbeat_at, x.attempt_started_at, x.attempt_finished_at),
			x.started_at, x.created_at) < $3)
	OR (state = 'running' AND attempts >= 2 AND scheduled_for < $3 AND COALESCE((SELECT
			GREATEST(a.heartbeat_at, a.started_at, a.finished_at) FROM attempts a
			WHERE a.execution_id = x.id AND a.scheduled_for = x.scheduled_for AND a.number = x.attempts),
			x.started_at, x.created_at) < $3))
ORDER BY scheduled_for LIMIT $4`

// ListStuckExecutions lists, for the rescue of executions left waiting
// (maintenance.StuckRescuer), up to limit executions of buckets that are
// either waiting — queued, or failed with their retry published — and
// were published before publishedBefore without an attempt of that
// publish starting, or running with no sign of life (start, heartbeat)
// from their newest attempt since silentBefore. Each comes with when it
// was published (waiting) or last seen alive (running). Nothing here says
// they are stuck: a message may wait in JetStream for an executor for
// hours. The rescuer asks JetStream.
func (s *Store) ListStuckExecutions(ctx context.Context, buckets []int, publishedBefore, silentBefore time.Time, limit int) ([]model.StuckExecution, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, stuckSQL, buckets, publishedBefore.UTC(), silentBefore.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: stuck executions in %d buckets: %w", len(buckets), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.StuckExecution, error) {
		var (
			st   model.StuckExecution
			last time.Time
		)
		e, err := scanExecutionWith(r, &last)
		st.Execution, st.Since = e, last.UTC()
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: stuck executions in %d buckets: %w", len(buckets), err)
	}
	return out, nil
}

// rescueWaitingSQL publishes again the waiting executions $1 (scheduled
// $2, at dispatch $3, in state $4) that are still as the rescuer found
// them, as their next dispatch, due now ($5 the note), and tells their
// buckets' scanners. A row that moved on meanwhile (an event recorded,
// a retry, a wipe's re-queue) is left alone, and so is one the recorder
// holds (an event about it is being written): rows are locked in id order
// first, skipping locked ones (the lock order of doc.go).
const rescueWaitingSQL = `
WITH r AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[]) AS r(id, sched, dispatches, state)
), c AS (
	SELECT x.id, x.scheduled_for FROM executions x JOIN r ON x.id = r.id AND x.scheduled_for = r.sched
	WHERE x.id = ANY($1) AND x.dispatches = r.dispatches AND x.state = r.state AND x.state IN ('queued', 'failed')
		AND NOT (x.dispatched_at IS NULL AND x.next_attempt_at IS NOT NULL)
	ORDER BY x.id
	FOR UPDATE OF x SKIP LOCKED
), u AS (
	UPDATE executions x SET next_attempt_at = ` + nowMS + `, dispatched_at = NULL, dispatches = x.dispatches + 1
	FROM c
	WHERE x.id = c.id AND x.scheduled_for = c.scheduled_for
	RETURNING x.id, x.scheduled_for, x.bucket, x.dispatches
), n AS (
	INSERT INTO execution_notes (execution_id, scheduled_for, at, kind, note)
	SELECT id, scheduled_for, ` + nowMS + `, '` + NoteRescued + `', replace($5, '{dispatch}', dispatches::text) FROM u
	ON CONFLICT DO NOTHING
	RETURNING 1
), b AS (
	SELECT pg_notify('` + ExecChannel + `', bucket::text) FROM (SELECT DISTINCT bucket FROM u) d
)
SELECT (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM n) + 0 * (SELECT count(*) FROM b)`

// RequeueWaitingExecutions publishes again, each as its next dispatch
// due now, the waiting executions of rescues that are still as they were
// read (ListStuckExecutions: same state and dispatch), with a note on
// each (note, where "{dispatch}" becomes the new dispatch's number). It
// returns how many it rescued. The attempt is the same (a queued execution's
// first is still its first): the caller has made sure that no executor
// holds the previous publish and that no event of it is on its way.
func (s *Store) RequeueWaitingExecutions(ctx context.Context, rescues []*model.Execution, note string) (int, error) {
	if len(rescues) == 0 {
		return 0, nil
	}
	ids := make([]uuid.UUID, len(rescues))
	scheds := make([]time.Time, len(rescues))
	disps := make([]int, len(rescues))
	states := make([]string, len(rescues))
	for i, e := range rescues {
		ids[i], scheds[i], disps[i], states[i] = e.ID, e.ScheduledFor, e.Dispatches, string(e.State)
	}
	var n int
	if err := s.pool.QueryRow(ctx, rescueWaitingSQL, ids, scheds, disps, states, note).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: rescue %d waiting executions: %w", len(rescues), err)
	}
	return n, nil
}

// RequeueSilentExecutions takes the running executions ids for lost if
// their newest attempt has given no sign of life since olderThan, as
// RequeueLostExecutions does for whole buckets: the rescuer has made sure
// their messages are no longer in JetStream, so it need not wait
// RequeueLostExecutions' minutes.
func (s *Store) RequeueSilentExecutions(ctx context.Context, ids []uuid.UUID, olderThan time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, requeueLostSQL, nil, olderThan.UTC(), ids).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: re-queue %d lost executions: %w", len(ids), err)
	}
	return n, nil
}

// ListExecutionNotes lists what tock did to execution id by itself
// (rescues, lost attempts), oldest first.
func (s *Store) ListExecutionNotes(ctx context.Context, id uuid.UUID, sched time.Time) ([]model.ExecutionNote, error) {
	rows, err := s.pool.Query(ctx, `SELECT at, kind, note FROM execution_notes
		WHERE execution_id = $1 AND scheduled_for = $2 ORDER BY at, kind`, id, sched)
	if err != nil {
		return nil, fmt.Errorf("store: notes of execution %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.ExecutionNote, error) {
		var n model.ExecutionNote
		err := r.Scan(&n.At, &n.Kind, &n.Note)
		n.At = n.At.UTC()
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: notes of execution %s: %w", id, err)
	}
	return out, nil
}

// expireNotes deletes the notes of executions retention has deleted (a
// day after their scheduled time, so that a note never goes before its
// execution is written), and dead events older than def.
func (s *Store) expireNotes(ctx context.Context, now time.Time, def time.Duration) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM execution_notes n WHERE n.scheduled_for < $1::timestamptz - interval '1 day'
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = n.execution_id AND x.scheduled_for = n.scheduled_for)`,
		now); err != nil {
		return fmt.Errorf("store: expire execution notes: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM dead_events WHERE recorded_at < $1`, now.Add(-def)); err != nil {
		return fmt.Errorf("store: expire dead events: %w", err)
	}
	return nil
}
