package store

import (
	"context"
	"fmt"
	"time"
)

// requeueAfterWipeSQL: $1 buckets, $2 when the current stream came to
// be. An execution is first dispatched no earlier than its scheduled
// time, so scheduled_for < $2 holds for every row it wants, and lets the
// (state, scheduled_for) index and partition pruning find the few rows
// in flight. Rows the recorder holds are skipped: an event about them is
// being written (it may be one an executor re-sent after the wipe), and
// the next call sees how it left them.
const requeueAfterWipeSQL = `
WITH c AS (
	SELECT id, scheduled_for FROM executions
	WHERE state IN ('queued', 'failed') AND bucket = ANY($1) AND scheduled_for < $2
		AND (dispatched_at < $2
			-- a first dispatch, published (its bucket's position covers it)
			-- before the stream came to be
			OR (dispatched_at IS NULL AND next_attempt_at IS NULL AND dispatches = 0 AND NOT manual
				AND created_at < $2 AND created_at <= (
					SELECT p.published_through FROM publish_positions p WHERE p.bucket = executions.bucket)))
	ORDER BY id
	FOR UPDATE SKIP LOCKED
), u AS (
	UPDATE executions x SET dispatched_at = NULL, next_attempt_at = COALESCE(x.next_attempt_at, ` + nowMS + `)
	FROM c
	WHERE x.id = c.id AND x.scheduled_for = c.scheduled_for
	RETURNING x.bucket
), n AS (
	SELECT pg_notify('` + ExecChannel + `', bucket::text) FROM (SELECT DISTINCT bucket FROM u) b
)
SELECT (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM n)`

// RequeueWipedExecutions puts back in the outbox the executions of buckets
// that JetStream lost with a stream: those still waiting to run (queued,
// or failed and waiting for the retry already published: no attempt of
// their current dispatch started) that were published before before, the
// time the current exec stream came to be: marked dispatched before it,
// or fired before it and covered by their bucket's publish position. Each is published
// again, due now (or when its retry was due), as the same dispatch, so
// that inside the stream's duplicate window JetStream drops a copy the
// new stream has already. ExecChannel tells the buckets' scanners. It
// returns how many executions it re-queued.
//
// An execution an executor had already run when the stream was lost,
// whose result was lost with the event stream, looks the same here: it
// is re-queued too, and its executor must recognise the delivery (see
// package executor: executors re-send the events of their recent
// attempts into a new event stream, and answer a delivery of an attempt
// they have already run with its result instead of running it again).
func (s *Store) RequeueWipedExecutions(ctx context.Context, buckets []int, before time.Time) (int, error) {
	if len(buckets) == 0 {
		return 0, nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, requeueAfterWipeSQL, buckets, before.UTC()).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: re-queue executions lost with the stream in %d buckets (dispatched before %s): %w",
			len(buckets), before.UTC().Format(time.RFC3339Nano), err)
	}
	return n, nil
}
