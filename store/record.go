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
// statements lock the execution's row first (FOR UPDATE: the final SELECT
// reads e before anything else), so events about one execution apply one
// after the other even across recorders.
//
// Lost attempts. An event of attempt a proves that the earlier attempts
// are over (at most one attempt runs at a time): one still unfinished
// was lost, and so was each attempt number between the newest known and
// a that left no row (a delivery whose executor died before reporting
// anything). Every statement writes those rows with the event's own, in
// one INSERT over the attempt numbers from the newest known (the only
// earlier one that can still be unfinished, since each event closes the
// ones before it) up to a: a conflict updates the row, an unfinished one
// to lost. One INSERT plans and runs much faster than a separate UPDATE
// and INSERT on the partitioned attempts table.

// finalStates are the execution states that never change again (but by a
// re-drive of a dead execution).
const finalStates = "('succeeded', 'dead', 'cancelled')"

// lockSQL begins every event statement: $1 id, $2 scheduled_for.
const lockSQL = `
WITH e AS (
	SELECT state, attempts, dispatches, bucket FROM executions WHERE id = $1 AND scheduled_for = $2 FOR UPDATE
)`

// numbersSQL are the attempt numbers an event of attempt $3 writes: the
// newest known (if older), those between, and $3.
const numbersSQL = "generate_series(GREATEST(LEAST(e.attempts, $3), 1), $3) AS n"

// lostMark is the SQL text of lostError.
const lostMark = "'" + lostError + "'"

// startedSQL records a start or a heartbeat: $4 executor, $5 at, $6 true
// for a heartbeat. The execution becomes running unless the attempt is
// older than the newest known or has finished already (the events came
// out of order), or the execution is in a final state.
const startedSQL = lockSQL + `, a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at, heartbeat_at,
		finished_at, outcome, error)
	SELECT $1, $2, n, CASE WHEN n = $3 THEN $4 ELSE '' END,
		CASE WHEN n = $3 AND NOT $6 THEN $5::timestamptz END, CASE WHEN n = $3 AND $6 THEN $5::timestamptz END,
		CASE WHEN n < $3 THEN $5::timestamptz END, CASE WHEN n < $3 THEN 'lost' ELSE '' END,
		CASE WHEN n < $3 THEN ` + lostMark + ` ELSE '' END
	FROM e, ` + numbersSQL + `
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		started_at = LEAST(a.started_at, excluded.started_at),
		heartbeat_at = GREATEST(a.heartbeat_at, excluded.heartbeat_at),
		executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END,
		finished_at = CASE WHEN a.outcome = '' THEN excluded.finished_at ELSE a.finished_at END,
		outcome = CASE WHEN a.outcome = '' THEN excluded.outcome ELSE a.outcome END,
		error = CASE WHEN a.outcome = '' THEN excluded.error ELSE a.error END
	WHERE excluded.number = $3 OR a.outcome = ''
	RETURNING a.number, a.finished_at IS NOT NULL AS finished
), c AS (
	SELECT $3 >= e.attempts AND NOT a.finished AND e.state NOT IN ` + finalStates + ` AS runs
	FROM e, a WHERE a.number = $3
), u AS (
	UPDATE executions x SET
		state = CASE WHEN c.runs THEN 'running' ELSE x.state END,
		next_attempt_at = CASE WHEN c.runs THEN NULL ELSE x.next_attempt_at END,
		attempts = GREATEST(x.attempts, $3),
		started_at = LEAST(x.started_at, CASE WHEN NOT $6 THEN $5::timestamptz END),
		dispatched_at = CASE WHEN $3 > e.attempts THEN COALESCE(x.dispatched_at, ` + nowMS + `) ELSE x.dispatched_at END,
		executor_id = CASE WHEN $3 >= e.attempts AND e.state NOT IN ` + finalStates + `
			THEN $4 ELSE x.executor_id END
	FROM e, c
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING 1
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM u)`

// finishedSQL records an attempt's end: $4 executor, $5 at, $6 outcome
// (succeeded, failed or timed_out), $7 final, $8 error, $9 output, $10
// started_at (NULL if a started event reported it), $11 the retry's
// delay in ms, $12 the dispatch the event is about.
//
// The first report of an attempt's end wins (one that only the lost rule
// inferred gives way to it); a repeat changes nothing. A success of any
// attempt makes the execution succeeded. A final failure of its newest
// attempt makes it dead. Another failure of its newest attempt, about its
// current dispatch, puts it back in the outbox, due after the delay, as
// its next dispatch, and tells the bucket's scanner (ExecChannel); a
// failure about an older dispatch (a stale duplicate) records only the
// attempt. A final state never changes.
const finishedSQL = lockSQL + `, a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at, finished_at,
		outcome, error, output)
	SELECT $1, $2, n, CASE WHEN n = $3 THEN $4 ELSE '' END, CASE WHEN n = $3 THEN $10::timestamptz END, $5,
		CASE WHEN n = $3 THEN $6 ELSE 'lost' END, CASE WHEN n = $3 THEN $8 ELSE ` + lostMark + ` END,
		CASE WHEN n = $3 THEN $9 ELSE '' END
	FROM e, ` + numbersSQL + `
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END,
		started_at = LEAST(a.started_at, excluded.started_at),
		finished_at = excluded.finished_at, outcome = excluded.outcome,
		error = excluded.error, output = excluded.output
	WHERE a.outcome = '' OR (excluded.number = $3 AND a.outcome = 'lost')
	RETURNING a.number
), c AS (
	-- The execution's new state; NULL: it keeps its state (it is over
	-- already, or this is a late or stale failure).
	SELECT CASE
		WHEN e.state IN ` + finalStates + ` THEN NULL
		WHEN $6 = 'succeeded' THEN 'succeeded'
		WHEN $3 < e.attempts THEN NULL
		WHEN $7 THEN 'dead'
		WHEN $12 <> e.dispatches THEN NULL
		ELSE 'failed' END AS next
	FROM e, a WHERE a.number = $3
), u AS (
	UPDATE executions x SET
		attempts = GREATEST(x.attempts, $3),
		dispatched_at = CASE
			WHEN c.next = 'failed' THEN NULL
			WHEN c.next IS NOT NULL OR $3 > e.attempts THEN COALESCE(x.dispatched_at, ` + nowMS + `)
			ELSE x.dispatched_at END,
		dispatches = CASE WHEN c.next = 'failed' THEN x.dispatches + 1 ELSE x.dispatches END,
		next_attempt_at = CASE WHEN c.next = 'failed' THEN ` + nowMS + ` + $11 * interval '1 millisecond'
			WHEN c.next IS NOT NULL THEN NULL ELSE x.next_attempt_at END,
		started_at = LEAST(x.started_at, $10::timestamptz),
		state = COALESCE(c.next, x.state),
		finished_at = CASE WHEN c.next IN ('succeeded', 'dead') THEN $5
			WHEN c.next = 'failed' THEN NULL ELSE x.finished_at END,
		error = CASE WHEN c.next = 'succeeded' THEN '' WHEN c.next IS NOT NULL THEN $8 ELSE x.error END,
		output = CASE WHEN c.next IS NOT NULL THEN $9 ELSE x.output END,
		executor_id = CASE WHEN c.next IS NOT NULL AND $3 >= e.attempts THEN $4 ELSE x.executor_id END
	FROM e, c
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING c.next = 'failed' AS requeued, x.bucket
), n AS (
	SELECT pg_notify('` + ExecChannel + `', bucket::text) FROM u WHERE requeued
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM n)`

// cancelledSQL records that an attempt was cancelled: $4 executor, $5 at,
// $6 error, $7 started_at. The attempt is recorded only if it began (a
// start time is given, or its row exists). The execution becomes
// cancelled unless it is in a final state already.
const cancelledSQL = lockSQL + `, s AS (
	SELECT $7::timestamptz IS NOT NULL OR EXISTS (SELECT 1 FROM attempts
		WHERE execution_id = $1 AND scheduled_for = $2 AND number = $3) AS began
), a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at, finished_at,
		outcome, error)
	SELECT $1, $2, n, CASE WHEN n = $3 THEN $4 ELSE '' END, CASE WHEN n = $3 THEN $7::timestamptz END, $5,
		CASE WHEN n = $3 THEN 'cancelled' ELSE 'lost' END, CASE WHEN n = $3 THEN $6 ELSE ` + lostMark + ` END
	FROM e, s, ` + numbersSQL + `
	WHERE n < $3 OR s.began
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END,
		started_at = LEAST(a.started_at, excluded.started_at),
		finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
	WHERE a.outcome = '' OR (excluded.number = $3 AND a.outcome = 'lost')
	RETURNING 1
), u AS (
	UPDATE executions x SET
		attempts = GREATEST(x.attempts, CASE WHEN s.began THEN $3 ELSE $3 - 1 END),
		dispatched_at = COALESCE(x.dispatched_at, ` + nowMS + `),
		started_at = LEAST(x.started_at, $7::timestamptz),
		state = CASE WHEN e.state IN ` + finalStates + ` THEN x.state ELSE 'cancelled' END,
		finished_at = CASE WHEN e.state IN ` + finalStates + ` THEN x.finished_at ELSE $5 END,
		next_attempt_at = CASE WHEN e.state IN ` + finalStates + ` THEN x.next_attempt_at END,
		error = CASE WHEN e.state IN ` + finalStates + ` THEN x.error ELSE $6 END
	FROM e, s
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING 1
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM a)`

// deferredSQL records that an executor handed a delivery back without
// running it: $4 at, $5 the delay in ms, $6 the dispatch. A delivery is
// no attempt, so no attempt is recorded (but the attempts before it that
// are lost). If it is about the execution's current dispatch and newer
// than its known attempts, and the execution still waits to run, it goes
// back into the outbox, due after the delay, as its next dispatch, and
// ExecChannel tells the bucket's scanner.
const deferredSQL = lockSQL + `, a AS (
	INSERT INTO attempts AS a (execution_id, scheduled_for, number, finished_at, outcome, error)
	SELECT $1, $2, n, $4, 'lost', ` + lostMark + ` FROM e, ` + numbersSQL + ` WHERE n < $3
	ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
		finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
	WHERE a.outcome = ''
	RETURNING 1
), d AS (
	SELECT $3 > e.attempts AND e.state IN ('queued', 'running', 'failed') AND $6 = e.dispatches AS requeue FROM e
), u AS (
	UPDATE executions x SET
		attempts = GREATEST(x.attempts, $3 - 1),
		state = CASE WHEN NOT d.requeue OR x.state = 'failed' THEN x.state ELSE 'queued' END,
		next_attempt_at = CASE WHEN d.requeue THEN ` + nowMS + ` + $5 * interval '1 millisecond'
			ELSE x.next_attempt_at END,
		dispatched_at = CASE WHEN d.requeue THEN NULL ELSE x.dispatched_at END,
		dispatches = CASE WHEN d.requeue THEN x.dispatches + 1 ELSE x.dispatches END
	FROM d
	WHERE x.id = $1 AND x.scheduled_for = $2
	RETURNING d.requeue, x.bucket
), n AS (
	SELECT pg_notify('` + ExecChannel + `', bucket::text) FROM u WHERE requeue
)
SELECT (SELECT count(*) FROM e) + 0 * (SELECT count(*) FROM n) + 0 * (SELECT count(*) FROM a)`

// Outcomes of an AttemptEvent that are not attempt outcomes.
const (
	// OutcomeHeartbeat: the attempt is still running.
	OutcomeHeartbeat = "heartbeat"
	// OutcomeDeferred: the executor handed the delivery back without
	// running it (its handler's circuit breaker is open, or its
	// concurrency limit reached); it is published again after RetryIn.
	OutcomeDeferred = "deferred"
)

// AttemptEvent is one executor report about an attempt, for RecordEvents.
type AttemptEvent struct {
	ID       uuid.UUID
	Attempt  int // from 1
	Executor string
	At       time.Time
	// Outcome is "" for a start, OutcomeHeartbeat while the attempt runs,
	// ExecSucceeded, ExecFailed or AttemptTimedOut for its end,
	// AttemptCancelled when it was cancelled (or never began because its
	// execution was), and OutcomeDeferred for a delivery handed back
	// unrun.
	Outcome string
	// Final says a failure will not be retried (the execution is dead).
	Final         bool
	Error, Output string
	// StartedAt is the attempt's start, on an end event whose start was
	// not reported on its own (see executor.Config.StartReportDelay).
	StartedAt *time.Time
	// RetryIn is, on a failure that is not final and on a deferral, how
	// long the execution waits before it is published again.
	RetryIn time.Duration
	// Dispatch is the dispatch number (wire.Execution.Dispatch) of the
	// message the event is about.
	Dispatch int
}

func (ev *AttemptEvent) check() error {
	if ev.Attempt < 1 {
		return fmt.Errorf("attempt %d: attempts count from 1", ev.Attempt)
	}
	if ev.Dispatch < 0 {
		return fmt.Errorf("dispatch %d: dispatches count from 0", ev.Dispatch)
	}
	switch ev.Outcome {
	case "", OutcomeHeartbeat, ExecSucceeded, ExecFailed, AttemptTimedOut, AttemptCancelled, OutcomeDeferred:
		return nil
	}
	return fmt.Errorf("outcome %q is none of started (\"\"), %s, %s, %s, %s, %s, %s", ev.Outcome,
		OutcomeHeartbeat, ExecSucceeded, ExecFailed, AttemptTimedOut, AttemptCancelled, OutcomeDeferred)
}

// queue adds ev's statement to b.
func (ev *AttemptEvent) queue(b *pgx.Batch) {
	sched, at := ExecutionTime(ev.ID), ms(ev.At)
	var started *time.Time
	if ev.StartedAt != nil {
		t := ms(*ev.StartedAt)
		started = &t
	}
	retryMS := max(ev.RetryIn.Milliseconds(), 0)
	switch ev.Outcome {
	case "", OutcomeHeartbeat:
		b.Queue(startedSQL, ev.ID, sched, ev.Attempt, ev.Executor, at, ev.Outcome == OutcomeHeartbeat)
	case AttemptCancelled:
		errMsg := cleanText(ev.Error)
		if errMsg == "" {
			errMsg = "cancelled"
		}
		b.Queue(cancelledSQL, ev.ID, sched, ev.Attempt, ev.Executor, at, errMsg, started)
	case OutcomeDeferred:
		b.Queue(deferredSQL, ev.ID, sched, ev.Attempt, at, retryMS, ev.Dispatch)
	default:
		b.Queue(finishedSQL, ev.ID, sched, ev.Attempt, ev.Executor, at, ev.Outcome, ev.Final,
			cleanText(ev.Error), cleanText(ev.Output), started, retryMS, ev.Dispatch)
	}
}

// RecordEvents records events in order, in one transaction and one round
// trip. The result has one entry per event: nil, ErrNotFound (no such
// execution: the event changed nothing), or the event's validation
// error. The returned error is about the whole batch (nothing was
// recorded); then the caller retries.
//
// The rules are those of AttemptStarted and AttemptFinished, and:
//
//   - An event of attempt a marks the execution's earlier attempts that
//     have not finished, and the attempt numbers between its newest
//     known attempt and a that left no trace, as lost (AttemptLost).
//   - A heartbeat records the attempt's last sign of life (HeartbeatAt)
//     and otherwise counts as its start.
//   - A failure (ExecFailed or AttemptTimedOut) that is not final, of the
//     newest attempt, about the execution's current dispatch, leaves the
//     execution failed and puts it back in the outbox: it is published
//     again, as its next dispatch, RetryIn after now (the database's
//     clock). A failure about an older dispatch records only the attempt.
//   - A cancellation records the attempt as cancelled if it began, and
//     makes the execution cancelled unless it is in a final state.
//   - A deferral records no attempt; it puts the execution, if it still
//     waits to run and the deferral is about its current dispatch, back in
//     the outbox RetryIn after now.
//   - An event of an attempt newer than the execution's known attempts
//     takes it out of the outbox (sets dispatched_at): an executor has it,
//     even if the publish acknowledgement was lost. Events of older
//     attempts leave dispatched_at alone, since a retry may be waiting in
//     the outbox.
//
// A retry or a deferral tells the execution's bucket on ExecChannel.
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
// An event of an attempt newer than the known ones also takes the
// execution out of the outbox (sets dispatched_at if unset): an executor
// has it, even if the publish acknowledgement was lost.
func (s *Store) AttemptStarted(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time) error {
	return s.record(ctx, AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at})
}

// AttemptFinished records that attempt number attempt of execution id
// ended at time at with outcome ExecSucceeded, ExecFailed or
// AttemptTimedOut, as an event about the execution's first dispatch;
// final says a failure will not be retried. errMsg and output are cut to
// wire.MaxOutputBytes. The attempt is recorded even if its start never
// was; a repeated event changes nothing. The execution moves to
// succeeded on a success (of any attempt), to dead on a final failure of
// its newest attempt, and on another failure of its newest attempt to
// failed, back in the outbox for a retry due at once (if it is still at
// its first dispatch); a final state (succeeded, dead, cancelled) never
// changes. An unknown execution fails with ErrNotFound. RecordEvents
// records any event, in batches.
func (s *Store) AttemptFinished(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time,
	outcome string, final bool, errMsg, output string) error {
	if outcome == "" {
		return fmt.Errorf("store: execution %s: attempt %d finished: outcome is empty", id, attempt)
	}
	return s.record(ctx, AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at,
		Outcome: outcome, Final: final, Error: errMsg, Output: output})
}
