package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Each executor event is recorded by one SQL statement, so that a batch of
// events goes to Postgres in one round trip (pipelined, in one
// transaction) instead of a transaction of several round trips each. The
// statements lock the execution's row first (FOR UPDATE), so events about
// one execution apply one after the other even across recorders.

// startedSQL: $1 id, $2 scheduled_for, $3 attempt, $4 executor, $5 at.
// It returns the number of executions found (0 or 1).
const startedSQL = `
WITH e AS (
	SELECT state, attempts FROM executions WHERE id = $1 AND scheduled_for = $2 FOR UPDATE
), a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at)
	SELECT $1, $2, $3, $4, $5 FROM e
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		started_at = LEAST(a.started_at, excluded.started_at),
		executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END
	RETURNING a.finished_at IS NOT NULL AS finished
), u AS (
	UPDATE executions x SET
		state = CASE WHEN $3 >= e.attempts AND NOT a.finished AND e.state NOT IN ('succeeded', 'dead', 'cancelled')
			THEN 'running' ELSE x.state END,
		attempts = GREATEST(x.attempts, $3),
		started_at = LEAST(x.started_at, $5),
		dispatched_at = COALESCE(x.dispatched_at, ` + nowMS + `),
		executor_id = CASE WHEN $3 >= e.attempts AND e.state NOT IN ('succeeded', 'dead', 'cancelled')
			THEN $4 ELSE x.executor_id END
	FROM e, a
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING 1
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM u)`

// finishedSQL: $1 id, $2 scheduled_for, $3 attempt, $4 executor, $5 at,
// $6 outcome, $7 final, $8 error, $9 output, $10 started_at (NULL if a
// started event reported it). The first report of an
// attempt's end wins; a repeat changes nothing. It returns the number of
// executions found (0 or 1).
const finishedSQL = `
WITH e AS (
	SELECT state, attempts FROM executions WHERE id = $1 AND scheduled_for = $2 FOR UPDATE
), r AS (
	SELECT EXISTS (SELECT 1 FROM attempts
		WHERE execution_id = $1 AND scheduled_for = $2 AND number = $3 AND outcome <> '') AS repeat
), a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, finished_at, outcome, error, output, started_at)
	SELECT $1, $2, $3, $4, $5, $6, $8, $9, $10::timestamptz FROM e, r WHERE NOT r.repeat
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END,
		started_at = LEAST(a.started_at, excluded.started_at),
		finished_at = excluded.finished_at, outcome = excluded.outcome,
		error = excluded.error, output = excluded.output
	RETURNING 1
), c AS (
	-- The execution's new state; NULL: only the attempt count changes
	-- (it is over already, or this is a late failure of a retried attempt).
	SELECT e.attempts, CASE
		WHEN e.state IN ('succeeded', 'dead', 'cancelled') THEN NULL
		WHEN $6 = 'succeeded' THEN 'succeeded'
		WHEN $3 < e.attempts THEN NULL
		WHEN $7 THEN 'dead'
		ELSE 'failed' END AS next
	FROM e, r WHERE NOT r.repeat
), u AS (
	UPDATE executions x SET
		attempts = GREATEST(x.attempts, $3),
		dispatched_at = COALESCE(x.dispatched_at, ` + nowMS + `),
		started_at = LEAST(x.started_at, $10::timestamptz),
		state = COALESCE(c.next, x.state),
		finished_at = CASE WHEN c.next IN ('succeeded', 'dead') THEN $5
			WHEN c.next = 'failed' THEN NULL ELSE x.finished_at END,
		error = CASE WHEN c.next = 'succeeded' THEN '' WHEN c.next IS NOT NULL THEN $8 ELSE x.error END,
		output = CASE WHEN c.next IS NOT NULL THEN $9 ELSE x.output END,
		executor_id = CASE WHEN c.next IS NOT NULL AND $3 >= c.attempts THEN $4 ELSE x.executor_id END
	FROM c
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING 1
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM a)`

// AttemptEvent is one executor report about an attempt, for RecordEvents.
type AttemptEvent struct {
	ID       uuid.UUID
	Attempt  int // from 1
	Executor string
	At       time.Time
	// Outcome is "" for a start, or "succeeded" or "failed" for an end.
	Outcome string
	// Final says a failure will not be retried (the execution is dead).
	Final         bool
	Error, Output string
	// StartedAt is the attempt's start, on an end event whose start was
	// not reported on its own (see executor.Config.StartReportDelay).
	StartedAt *time.Time
}

func (ev *AttemptEvent) check() error {
	if ev.Attempt < 1 {
		return fmt.Errorf("attempt %d: attempts count from 1", ev.Attempt)
	}
	switch ev.Outcome {
	case "", ExecSucceeded, ExecFailed:
		return nil
	}
	return fmt.Errorf("outcome %q is neither succeeded nor failed", ev.Outcome)
}

// queue adds ev's statement to b.
func (ev *AttemptEvent) queue(b *pgx.Batch) {
	sched, at := ExecutionTime(ev.ID), ms(ev.At)
	if ev.Outcome == "" {
		b.Queue(startedSQL, ev.ID, sched, ev.Attempt, ev.Executor, at)
		return
	}
	var started *time.Time
	if ev.StartedAt != nil {
		t := ms(*ev.StartedAt)
		started = &t
	}
	b.Queue(finishedSQL, ev.ID, sched, ev.Attempt, ev.Executor, at, ev.Outcome, ev.Final,
		cleanText(ev.Error), cleanText(ev.Output), started)
}

// RecordEvents records events in order, in one transaction and one round
// trip. The result has one entry per event: nil, ErrNotFound (no such
// execution: the event changed nothing), or the event's validation
// error. The returned error is about the whole batch (nothing was
// recorded); then the caller retries.
//
// The rules are those of AttemptStarted and AttemptFinished.
func (s *Store) RecordEvents(ctx context.Context, evs []AttemptEvent) ([]error, error) {
	results := make([]error, len(evs))
	var queued []int
	for i := range evs {
		if err := evs[i].check(); err != nil {
			results[i] = fmt.Errorf("store: execution %s: %w", evs[i].ID, err)
			continue
		}
		queued = append(queued, i)
	}
	if len(queued) == 0 {
		return results, nil
	}
	// Lock executions in id order, as MarkDispatched does, so that the two
	// never deadlock; events about one execution keep their order.
	slices.SortStableFunc(queued, func(a, b int) int { return bytes.Compare(evs[a].ID[:], evs[b].ID[:]) })
	b := &pgx.Batch{}
	for _, set := range keyedPlanSettings {
		b.Queue(set)
	}
	for _, i := range queued {
		evs[i].queue(b)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range keyedPlanSettings {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for _, i := range queued {
			var found int
			if err := br.QueryRow().Scan(&found); err != nil {
				return fmt.Errorf("execution %s attempt %d: %w", evs[i].ID, evs[i].Attempt, err)
			}
			if found == 0 {
				results[i] = fmt.Errorf("store: execution %s: %w", evs[i].ID, ErrNotFound)
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("store: record %d events: %w", len(evs), err)
	}
	return results, nil
}

// record records one event.
func (s *Store) record(ctx context.Context, ev AttemptEvent) error {
	res, err := s.RecordEvents(ctx, []AttemptEvent{ev})
	if err != nil {
		return err
	}
	return res[0]
}

// AttemptStarted records that executor started attempt number attempt
// (from 1) of execution id at time at. The execution becomes running
// unless it is in a final state (succeeded, dead, cancelled), the event
// is about an older attempt than the newest known, or this attempt has
// already finished (the events came out of order). It is idempotent.
// An unknown execution fails with ErrNotFound.
//
// Any attempt event also takes the execution out of the outbox (sets
// dispatched_at if unset): an executor has it, even if the publish
// acknowledgement was lost.
func (s *Store) AttemptStarted(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time) error {
	return s.record(ctx, AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at})
}

// AttemptFinished records that attempt number attempt of execution id
// ended at time at with outcome "succeeded" or "failed"; final says a
// failure will not be retried. errMsg and output are cut to
// wire.MaxOutputBytes. The attempt is recorded even if its start never
// was; a repeated event changes nothing. The execution moves to
// succeeded on a success (of any attempt), to dead on a final failure of
// its newest attempt, and to failed (a retry follows) on another failure
// of its newest attempt; a final state (succeeded, dead, cancelled) never
// changes. An unknown execution fails with ErrNotFound.
func (s *Store) AttemptFinished(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time,
	outcome string, final bool, errMsg, output string) error {
	if outcome == "" {
		return fmt.Errorf("store: execution %s: attempt %d finished: outcome is empty", id, attempt)
	}
	return s.record(ctx, AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at,
		Outcome: outcome, Final: final, Error: errMsg, Output: output})
}
