package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/executor/wire"
	"github.com/tock-sched/tock/partition"
)

// execColumns are the columns scanExecution reads, in its order.
const execColumns = "id, job_id, bucket, namespace, job_name, scheduled_for, manual, state, attempts, " +
	"handler, payload, retry, timeout_ms, dispatched_at, started_at, finished_at, executor_id, error, output, created_at, fired_by"

// runNowTries bounds RunNow's search for a free millisecond.
const runNowTries = 1000

// ExecFilter selects executions for ListExecutions. The zero value lists
// every execution.
type ExecFilter struct {
	// JobID limits the list to one job's executions.
	JobID *uuid.UUID
	// State limits the list to executions in this state; "" lists all.
	State string
	// Limit is the page size: 50 when 0, at most 500.
	Limit int
	// Cursor continues a listing where the page that returned it ended;
	// "" starts with the newest.
	Cursor string
}

// RunNow queues a manual execution of the job for at (truncated to the
// millisecond), or fails with ErrNotFound. The job may be in any state.
// It is not dispatched here: it waits in the outbox (Undispatched), and
// ExecChannel tells its bucket's dispatcher.
//
// Executions are unique per (job, scheduled time), so when at is taken
// (by another execution, or by the job's next scheduled run, which would
// otherwise be lost) the execution moves 1 ms later until a time is
// free. Its id is ExecutionID(job, that time).
func (s *Store) RunNow(ctx context.Context, jobID uuid.UUID, at time.Time) (*Execution, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: run job %s: %w", jobID, err)
	}
	bucket := partition.BucketOf(jobID, s.buckets)
	var e *Execution
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR SHARE: the job's next_run_at cannot move while we avoid it.
		j, err := scanJob(tx.QueryRow(ctx, "SELECT "+jobColumns+
			" FROM jobs WHERE bucket = $1 AND id = $2 FOR SHARE", bucket, jobID))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		t := ms(at)
		for range runNowTries {
			if j.NextRunAt != nil && t.Equal(*j.NextRunAt) {
				t = t.Add(time.Millisecond)
				continue
			}
			row := tx.QueryRow(ctx, `
				INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
					handler, payload, retry, timeout_ms, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, true, 'queued', $7, $8, $9, $10, `+nowMS+`)
				ON CONFLICT DO NOTHING
				RETURNING `+execColumns,
				ExecutionID(jobID, t), jobID, bucket, j.Namespace, j.Name, t,
				j.Handler, nullJSON(j.Payload), j.Retry, j.Timeout.Milliseconds())
			e, err = scanExecution(row)
			if errors.Is(err, pgx.ErrNoRows) {
				t = t.Add(time.Millisecond)
				continue
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", ExecChannel, strconv.Itoa(bucket))
			return err
		}
		return fmt.Errorf("no free time within %d ms of %s", runNowTries, ms(at).Format(time.RFC3339Nano))
	})
	if err != nil {
		return nil, fmt.Errorf("store: run job %s: %w", jobID, err)
	}
	return e, nil
}

// Undispatched reads the outbox of some buckets: up to limit queued
// executions not yet marked dispatched, earliest first.
func (s *Store) Undispatched(ctx context.Context, buckets []int, limit int) ([]*Execution, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+execColumns+` FROM executions
		WHERE bucket = ANY($1) AND dispatched_at IS NULL AND state = 'queued'
		ORDER BY scheduled_for LIMIT $2`, buckets, limit)
	if err != nil {
		return nil, fmt.Errorf("store: undispatched in %d buckets: %w", len(buckets), err)
	}
	execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Execution, error) { return scanExecution(r) })
	if err != nil {
		return nil, fmt.Errorf("store: undispatched in %d buckets: %w", len(buckets), err)
	}
	return execs, nil
}

// MarkDispatched records that JetStream acknowledged these executions,
// taking them out of the outbox. Executions already marked keep their
// first dispatch time; unknown ids are ignored.
func (s *Store) MarkDispatched(ctx context.Context, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	scheds := make([]time.Time, len(ids))
	for i, id := range ids {
		scheds[i] = ExecutionTime(id)
	}
	// The bounds on scheduled_for let the planner prune partitions.
	_, err := s.pool.Exec(ctx, `
		UPDATE executions e SET dispatched_at = `+nowMS+`
		FROM unnest($1::uuid[], $2::timestamptz[]) AS d(id, sched)
		WHERE e.id = d.id AND e.scheduled_for = d.sched
			AND e.scheduled_for BETWEEN $3 AND $4 AND e.dispatched_at IS NULL`,
		ids, scheds, slices.MinFunc(scheds, time.Time.Compare), slices.MaxFunc(scheds, time.Time.Compare))
	if err != nil {
		return fmt.Errorf("store: mark %d executions dispatched: %w", len(ids), err)
	}
	return nil
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
	if attempt < 1 {
		return fmt.Errorf("store: execution %s: attempt %d started: attempts count from 1", id, attempt)
	}
	sched, at := ExecutionTime(id), ms(at)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		state, attempts, err := lockExecution(ctx, tx, id, sched)
		if err != nil {
			return err
		}
		var finished bool
		err = tx.QueryRow(ctx, `
			INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
				started_at = LEAST(a.started_at, excluded.started_at),
				executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END
			RETURNING a.finished_at IS NOT NULL`,
			id, sched, attempt, executor, at).Scan(&finished)
		if err != nil {
			return err
		}
		latest := attempt >= attempts
		if latest && !finished && !terminal(state) {
			state = ExecRunning
		}
		_, err = tx.Exec(ctx, `
			UPDATE executions SET state = $3, attempts = GREATEST(attempts, $4),
				started_at = LEAST(started_at, $5), dispatched_at = COALESCE(dispatched_at, `+nowMS+`),
				executor_id = CASE WHEN $6 THEN $7 ELSE executor_id END
			WHERE id = $1 AND scheduled_for = $2`,
			id, sched, state, attempt, at, latest && !terminal(state), executor)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: execution %s: attempt %d started: %w", id, attempt, err)
	}
	return nil
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
	if attempt < 1 {
		return fmt.Errorf("store: execution %s: attempt %d finished: attempts count from 1", id, attempt)
	}
	if outcome != ExecSucceeded && outcome != ExecFailed {
		return fmt.Errorf("store: execution %s: attempt %d finished: outcome %q is neither succeeded nor failed", id, attempt, outcome)
	}
	sched, at := ExecutionTime(id), ms(at)
	errMsg, output = cleanText(errMsg), cleanText(output)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		state, attempts, err := lockExecution(ctx, tx, id, sched)
		if err != nil {
			return err
		}
		// The first report of an attempt's end wins; repeats change
		// nothing. The execution's row lock orders events about it, so
		// this check cannot race.
		var repeat bool
		err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attempts
			WHERE execution_id = $1 AND scheduled_for = $2 AND number = $3 AND outcome <> '')`,
			id, sched, attempt).Scan(&repeat)
		if err != nil || repeat {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, finished_at, outcome, error, output)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
				executor_id = CASE WHEN a.executor_id = '' THEN excluded.executor_id ELSE a.executor_id END,
				finished_at = excluded.finished_at, outcome = excluded.outcome,
				error = excluded.error, output = excluded.output`,
			id, sched, attempt, executor, at, outcome, errMsg, output)
		if err != nil {
			return err
		}
		latest := attempt >= attempts
		var finishedAt *time.Time
		switch {
		case terminal(state):
			_, err = tx.Exec(ctx, countAttemptSQL, id, sched, attempt)
			return err
		case outcome == ExecSucceeded:
			state, finishedAt, errMsg = ExecSucceeded, &at, ""
		case !latest:
			// A late failure of an attempt that was already retried.
			_, err = tx.Exec(ctx, countAttemptSQL, id, sched, attempt)
			return err
		case final:
			state, finishedAt = ExecDead, &at
		default:
			state = ExecFailed
		}
		_, err = tx.Exec(ctx, `
			UPDATE executions SET state = $3, attempts = GREATEST(attempts, $4), finished_at = $5,
				error = $6, output = $7, dispatched_at = COALESCE(dispatched_at, `+nowMS+`), executor_id = CASE WHEN $8 THEN $9 ELSE executor_id END
			WHERE id = $1 AND scheduled_for = $2`,
			id, sched, state, attempt, finishedAt, errMsg, output, latest, executor)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: execution %s: attempt %d %s: %w", id, attempt, outcome, err)
	}
	return nil
}

// countAttemptSQL records an attempt that changes nothing else.
const countAttemptSQL = "UPDATE executions SET attempts = GREATEST(attempts, $3)," +
	" dispatched_at = COALESCE(dispatched_at, " + nowMS + ") WHERE id = $1 AND scheduled_for = $2"

// lockExecution reads an execution's state and attempt count and locks
// its row until the transaction ends, so that concurrent events about it
// apply one after the other.
func lockExecution(ctx context.Context, tx pgx.Tx, id uuid.UUID, sched time.Time) (state string, attempts int, err error) {
	err = tx.QueryRow(ctx, "SELECT state, attempts FROM executions WHERE id = $1 AND scheduled_for = $2 FOR UPDATE",
		id, sched).Scan(&state, &attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return state, attempts, err
}

// terminal reports whether an execution in state is over for good.
func terminal(state string) bool {
	return state == ExecSucceeded || state == ExecDead || state == ExecCancelled
}

// GetExecution reads an execution with its attempts (AttemptList, by
// number), or fails with ErrNotFound. It reads one day's partitions,
// found from the id.
func (s *Store) GetExecution(ctx context.Context, id uuid.UUID) (*Execution, error) {
	sched := ExecutionTime(id)
	e, err := scanExecution(s.pool.QueryRow(ctx, "SELECT "+execColumns+
		" FROM executions WHERE id = $1 AND scheduled_for = $2", id, sched))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT number, executor_id, started_at, finished_at, outcome, error, output
		FROM attempts WHERE execution_id = $1 AND scheduled_for = $2 ORDER BY number`, id, sched)
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: attempts: %w", id, err)
	}
	e.AttemptList, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var (
			a       Attempt
			started *time.Time
		)
		err := r.Scan(&a.Number, &a.ExecutorID, &started, &a.FinishedAt, &a.Outcome, &a.Error, &a.Output)
		if started != nil {
			a.StartedAt = started.UTC()
		}
		a.FinishedAt = utcPtr(a.FinishedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: attempts: %w", id, err)
	}
	return e, nil
}

// ListExecutions lists executions matching f newest first (by scheduled
// time, then id), one page at a time. It returns the cursor of the next
// page, "" after the last one. An unknown cursor fails with ErrBadCursor.
//
// An execution id begins with its scheduled time in milliseconds (see
// ExecutionID), so id order is (scheduled_for, id) order; without a
// filter the listing walks the primary key backwards, with one it walks
// the (job_id, scheduled_for) or (state, scheduled_for) index.
func (s *Store) ListExecutions(ctx context.Context, f ExecFilter) ([]*Execution, string, error) {
	limit := pageSize(f.Limit)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.JobID != nil {
		where = append(where, "job_id = "+arg(*f.JobID))
	}
	if f.State != "" {
		where = append(where, "state = "+arg(f.State))
	}
	filtered := len(where) > 0
	if f.Cursor != "" {
		var c uuid.UUID
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, "", fmt.Errorf("store: list executions: %w", err)
		}
		t, id := arg(ExecutionTime(c)), arg(c)
		if filtered {
			where = append(where, "scheduled_for <= "+t, "(scheduled_for, id) < ("+t+", "+id+")")
		} else {
			where = append(where, "scheduled_for <= "+t, "id < "+id)
		}
	}
	sql := "SELECT " + execColumns + " FROM executions"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if filtered {
		sql += " ORDER BY scheduled_for DESC, id DESC"
	} else {
		sql += " ORDER BY id DESC"
	}
	sql += " LIMIT " + arg(limit+1)

	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list executions: %w", err)
	}
	execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Execution, error) { return scanExecution(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list executions: %w", err)
	}
	next := ""
	if len(execs) > limit {
		execs = execs[:limit]
		next = encodeCursor(execs[limit-1].ID)
	}
	return execs, next, nil
}

// scanExecution reads a row of execColumns.
func scanExecution(row pgx.Row) (*Execution, error) {
	var (
		e         Execution
		timeoutMS int64
		payload   []byte
	)
	err := row.Scan(&e.ID, &e.JobID, &e.Bucket, &e.Namespace, &e.JobName, &e.ScheduledFor, &e.Manual,
		&e.State, &e.Attempts, &e.Handler, &payload, &e.Retry, &timeoutMS, &e.DispatchedAt,
		&e.StartedAt, &e.FinishedAt, &e.ExecutorID, &e.Error, &e.Output, &e.CreatedAt, &e.FiredBy)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		e.Payload = json.RawMessage(payload)
	}
	e.Timeout = msDuration(timeoutMS)
	e.ScheduledFor, e.CreatedAt = e.ScheduledFor.UTC(), e.CreatedAt.UTC()
	e.DispatchedAt, e.StartedAt, e.FinishedAt = utcPtr(e.DispatchedAt), utcPtr(e.StartedAt), utcPtr(e.FinishedAt)
	return &e, nil
}

// cleanText makes an executor's error or output storable: text columns
// take neither NUL bytes nor invalid UTF-8. It is cut to
// wire.MaxOutputBytes.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	s = strings.ToValidUTF8(s, "\uFFFD")
	return wire.Truncate(s)
}
