package store

import (
	"context"
	"fmt"
	"time"
)

// requeueLostSQL: $1 buckets (NULL: all), $2 the time before which the newest
// attempt's last sign of life makes it lost. Running executions are few
// (the work in flight), and the (state, scheduled_for) index finds them.
// Rows locked by the recorder are skipped: an event about them is being
// written, so they are not silent. $3, if not NULL, limits it to those
// executions (RequeueLost). Each execution re-queued gets a note.
const requeueLostSQL = `
WITH c AS (
	SELECT x.id, x.scheduled_for, x.attempts FROM executions x
	LEFT JOIN attempts a ON x.attempts >= 2 AND a.execution_id = x.id AND a.scheduled_for = x.scheduled_for
		AND a.number = x.attempts
	WHERE x.state = 'running' AND ($1::int[] IS NULL OR x.bucket = ANY($1)) AND ($3::uuid[] IS NULL OR x.id = ANY($3))
		AND COALESCE(GREATEST(a.heartbeat_at, a.started_at, a.finished_at),
			GREATEST(x.attempt_heartbeat_at, x.attempt_started_at, x.attempt_finished_at),
			x.started_at, x.created_at) < $2
	ORDER BY x.id
	FOR UPDATE OF x SKIP LOCKED
), lost AS (
	UPDATE attempts a SET outcome = 'lost', finished_at = ` + nowMS + `, error = '` + lostError + `'
	FROM c
	WHERE c.attempts >= 2 AND a.execution_id = c.id AND a.scheduled_for = c.scheduled_for
		AND a.number <= c.attempts AND a.outcome = ''
	RETURNING 1
), u AS (
	UPDATE executions x SET state = 'failed', next_attempt_at = ` + nowMS + `, dispatched_at = NULL,
		dispatches = x.dispatches + 1, finished_at = NULL, error = '` + lostError + `',
		-- an unfinished inline attempt is lost too (its error is the execution's)
		attempt_finished_at = CASE WHEN x.attempt_outcome = '' THEN ` + nowMS + ` ELSE x.attempt_finished_at END,
		attempt_error = CASE WHEN x.attempt_outcome = '' THEN NULL
			ELSE COALESCE(x.attempt_error, x.error) END,
		attempt_output = CASE WHEN x.attempt_outcome = '' THEN NULL
			ELSE COALESCE(x.attempt_output, x.output) END,
		attempt_outcome = CASE WHEN x.attempt_outcome = '' THEN 'lost' ELSE x.attempt_outcome END
	FROM c
	WHERE x.id = c.id AND x.scheduled_for = c.scheduled_for
	RETURNING x.id, x.scheduled_for, x.bucket, x.attempts
), notes AS (
	INSERT INTO execution_notes (execution_id, scheduled_for, at, kind, note)
	SELECT id, scheduled_for, ` + nowMS + `, '` + NoteLost + `',
		'attempt ' || attempts || ' gave no sign of life: taken for lost, published again as the next attempt'
	FROM u
	ON CONFLICT DO NOTHING
	RETURNING 1
), n AS (
	SELECT pg_notify('` + ExecChannel + `', bucket::text) FROM (SELECT DISTINCT bucket FROM u) b
)
SELECT (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM n) + 0 * (SELECT count(*) FROM lost)
	+ 0 * (SELECT count(*) FROM notes)`

// RequeueLostExecutions is the backstop for work that NATS itself lost: in buckets,
// every running execution whose newest attempt gave its last sign of
// life (heartbeat, start, or end) before olderThan has its unfinished
// attempts marked lost and is put back in the outbox, failed, due now,
// as its next dispatch (ExecChannel tells its bucket). It returns how
// many executions it re-queued.
//
// An executor that dies is noticed much sooner by JetStream, which hands
// its message to another executor after the ack wait; olderThan should
// be well beyond that (minutes), so that only a message JetStream no
// longer has is re-queued here.
func (s *Store) RequeueLostExecutions(ctx context.Context, buckets []int, olderThan time.Time) (int, error) {
	if len(buckets) == 0 {
		return 0, nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, requeueLostSQL, buckets, olderThan.UTC(), nil).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: re-queue lost executions in %d buckets: %w", len(buckets), err)
	}
	return n, nil
}
