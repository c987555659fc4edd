package store

import (
	"bytes"
	"cmp"
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

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// execColumns are the columns scanExecution reads, in its order.
var execColumns = execCols("")

// execCols are the columns scanExecution reads, of the executions row
// named by alias ("" or "x."). What the execution runs comes from its job
// spec (job_specs, one primary-key lookup each), or from the row itself
// for executions fired before specs existed.
func execCols(a string) string {
	spec := func(col string) string {
		return "COALESCE(" + a + col + ", (SELECT sp." + col + " FROM job_specs sp WHERE sp.id = " + a + "spec_id))"
	}
	return prefixed(a, "id, job_id, bucket, namespace, job_name, scheduled_for, manual, state, attempts") + ", " +
		spec("handler") + ", " + spec("payload") + ", " + spec("retry") + ", " + spec("timeout_ms") + ", " +
		prefixed(a, "dispatched_at, started_at, finished_at, executor_id, error, output, created_at, fired_by, "+
			"priority, next_attempt_at, series_base, dispatches, due_at, backfill, buffered, batch") +
		", coalesce(" + a + "slot_key, ''), coalesce(" + a + "rate_limit->>'slot_key', '')"
}

// execRead is execColumns for reads shown to users: a fired execution's
// first dispatch is not marked one by one (see AdvancePublishPositions), so until an
// executor reports on it, its dispatched_at is derived from its bucket's
// publish position: once the position covers it, it went out at its
// scheduled time (or, fired late, at its creation), the time the
// dispatcher publishes it; its first event records the time it was
// recorded instead.
var execRead = strings.Replace(execColumns, "dispatched_at", `COALESCE(dispatched_at,
	CASE WHEN dispatches = 0 AND next_attempt_at IS NULL AND NOT manual AND created_at <= (
		SELECT o.published_through FROM publish_positions o WHERE o.bucket = executions.bucket)
	THEN GREATEST(scheduled_for, created_at) END)`, 1)

// runNowTries bounds CreateManualExecution's search for a free millisecond.
const runNowTries = 1000

// CreateManualExecution queues a manual execution of the job for at (truncated to the
// millisecond), in the job's priority class, or fails with ErrNotFound.
// The job may be in any state.
// It is not dispatched here: it waits in the outbox (ListUndispatchedExecutions), and
// ExecChannel tells its bucket's dispatcher.
//
// Executions are unique per (job, scheduled time), so when at is taken
// (by another execution, or by the job's next scheduled run, which would
// otherwise be lost) the execution moves 1 ms later until a time is
// free. Its id is domain.ExecutionID(job, that time).
func (s *Store) CreateManualExecution(ctx context.Context, jobID uuid.UUID, at time.Time) (*model.Execution, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: run job %s: %w", jobID, err)
	}
	bucket := domain.BucketOf(jobID, s.buckets)
	var e *model.Execution
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR SHARE: the job's next_run_at cannot move while we avoid it.
		j, err := scanJob(tx.QueryRow(ctx, "SELECT "+jobRead("jobs")+
			" FROM jobs WHERE bucket = $1 AND id = $2 FOR SHARE", bucket, jobID))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		t := ms(at)
		slot := slotOf(j)
		for range runNowTries {
			if j.NextRunAt != nil && t.Equal(*j.NextRunAt) {
				t = t.Add(time.Millisecond)
				continue
			}
			row := tx.QueryRow(ctx, `
				INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
					handler, payload, retry, timeout_ms, priority, created_at, next_attempt_at, spec_id, `+slotColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, true, 'queued', $7, $8, $9, $10, $11, `+nowMS+`, $6, $12, $13, $14, $15, $16)
				ON CONFLICT DO NOTHING
				RETURNING `+execColumns,
				domain.ExecutionID(jobID, t), jobID, bucket, j.Namespace, j.Name, t,
				inline(j, j.Handler), inline(j, nullJSON(j.Payload)), inline(j, j.Retry), inline(j, j.Timeout.Milliseconds()),
				j.Priority, j.SpecID, slot.key, slot.limit, slot.onLimit, slot.rate)
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
		if msg, ok := atLimit(err); ok {
			return nil, fmt.Errorf("store: run job %s: %w: %s", jobID, ErrAtLimit, msg)
		}
		return nil, fmt.Errorf("store: run job %s: %w", jobID, err)
	}
	return e, nil
}

// outboxSQL reads the outbox in due order, in two parts. Re-dispatches
// (retries, deferrals, re-drives, lost re-queues) and manual runs carry
// next_attempt_at until they are marked dispatched: the partial index
// executions_redispatch serves them, so executions waiting out a long
// backoff beyond $3 are never read. First dispatches of fired executions
// are not marked: those created after their bucket's publish position
// (publish_positions) may not have reached JetStream, and
// the partial index executions_unreported holds exactly them. The
// bucket's position is looked up per row found (an index probe of
// publish_positions) rather than joined: joined, Postgres compared every
// row found with every owned bucket's position (960,000 comparisons, 180
// ms a read, at 3,750 executions a second on 256 buckets). First dispatches
// come in (scheduled_for, batch) order, a batch's members together, so that
// a read cut by its limit cuts at most its last batch (see wholeBatches).
var outboxSQL = `SELECT * FROM (
(` + redispatchSQL + `)
UNION ALL
(SELECT ` + execCols("x.") + ` FROM executions x
	WHERE x.bucket = ANY($1)
		AND x.created_at > (SELECT min(published_through) FROM publish_positions WHERE bucket = ANY($1))
		AND x.created_at > (SELECT o.published_through FROM publish_positions o WHERE o.bucket = x.bucket)
		AND x.next_attempt_at IS NULL AND x.dispatched_at IS NULL AND x.dispatches = 0 AND x.state = 'queued'
		AND x.scheduled_for <= $3
	ORDER BY x.scheduled_for, x.batch LIMIT $2)
) o ORDER BY COALESCE(next_attempt_at, scheduled_for)`

// redispatchSQL is the outbox's first part alone: re-dispatches and
// manual runs due by $3.
var redispatchSQL = `SELECT ` + execColumns + ` FROM executions
	WHERE bucket = ANY($1) AND next_attempt_at IS NOT NULL AND dispatched_at IS NULL
		AND state IN ('queued', 'failed') AND next_attempt_at <= $3
	ORDER BY next_attempt_at LIMIT $2`

// ListUndispatchedExecutions reads the outbox of some buckets: executions waiting to be
// published that are due (see Execution.DueAt) at or before until —
// re-dispatches and manual runs not yet marked dispatched, and fired
// executions created after their bucket's publish position (see
// AdvancePublishPositions) that no executor has reported on yet — up to limit of each
// kind, earliest first. The caller holds each until its due time.
func (s *Store) ListUndispatchedExecutions(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	// One more than limit, to tell a read the limit cut from one that
	// ended with it (see wholeBatches).
	execs, err := s.readOutbox(ctx, outboxSQL, buckets, limit+1, until)
	if err != nil {
		return nil, fmt.Errorf("store: undispatched in %d buckets: %w", len(buckets), err)
	}
	return wholeBatches(execs, limit), nil
}

// readOutbox runs one of the outbox's reads ($1 buckets, $2 limit, $3
// until).
func (s *Store) readOutbox(ctx context.Context, sql string, buckets []int, limit int, until time.Time) ([]*model.Execution, error) {
	rows, err := s.pool.Query(ctx, sql, buckets, limit, until.UTC())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Execution, error) { return scanExecution(r) })
}

// ListRedispatches reads the first part of the outbox of some buckets
// alone: re-dispatches (retries, deferrals, re-drives, re-queues after
// a wipe or a lost attempt) and manual runs due at or before until, up to
// limit, earliest first. The scanner reads it every outbox pass, and the
// fired executions' first dispatches (ListUndispatchedExecutions) only
// when it takes buckets and, as a safety net, every few passes: its own
// dispatcher publishes what it fires, and keeps trying what JetStream
// did not acknowledge.
func (s *Store) ListRedispatches(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	execs, err := s.readOutbox(ctx, redispatchSQL, buckets, limit, until)
	if err != nil {
		return nil, fmt.Errorf("store: re-dispatches in %d buckets: %w", len(buckets), err)
	}
	return execs, nil
}

// wholeBatches drops from an outbox read (of up to limit+1 first
// dispatches) the members of the batch its limit cut, if it cut one. A batch's first dispatch is one message whose
// id names the batch, not its members: published with some members now
// and the rest later, the second message would be dropped by JetStream as
// a copy of the first, and its members never run. The dropped members
// come in the next read, with the rest of their batch.
func wholeBatches(execs []*model.Execution, limit int) []*model.Execution {
	var (
		n    int
		last *model.Execution
	)
	for _, e := range execs {
		if !e.Positional() {
			continue
		}
		n++
		if last == nil || e.ScheduledFor.After(last.ScheduledFor) ||
			(e.ScheduledFor.Equal(last.ScheduledFor) && batchAfter(e.Batch, last.Batch)) {
			last = e
		}
	}
	if n <= limit || last == nil || last.Batch == uuid.Nil {
		return execs
	}
	cut := last.Batch
	return slices.DeleteFunc(execs, func(e *model.Execution) bool { return e.Batched() && e.Batch == cut })
}

// batchAfter reports whether batch a sorts after b as Postgres orders
// the column: by its bytes, NULL (the zero UUID here) last.
func batchAfter(a, b uuid.UUID) bool {
	switch {
	case b == uuid.Nil:
		return false
	case a == uuid.Nil:
		return true
	}
	return bytes.Compare(a[:], b[:]) > 0
}

// markDispatchedSQL: $1 ids (sorted), $2 and $3 the bounds of their
// scheduled times (so that the planner prunes partitions), $4 the
// dispatch number they were published as, $5 the ack time or NULL.
const markDispatchedSQL = `
UPDATE executions SET dispatched_at = COALESCE($5, ` + nowMS + `)
WHERE (id, scheduled_for) IN (
	SELECT id, scheduled_for FROM executions
	WHERE id = ANY($1) AND scheduled_for BETWEEN $2 AND $3 AND dispatched_at IS NULL AND dispatches = $4
	ORDER BY id
	FOR UPDATE SKIP LOCKED)`

// MarkExecutionsDispatched records that JetStream acknowledged these publishes at
// time at (the dispatcher's cluster clock; zero means the database's
// now), taking the executions out of the outbox. Only a row still at the
// dispatch number that was published is marked: once a retry has
// re-queued the execution as the next dispatch, a late mark of the
// earlier one must not hide the retry from the outbox. Executions already
// marked keep their first dispatch time; unknown ids are ignored, and so
// are rows locked by an event being recorded (which marks them itself).
// It takes one round trip.
func (s *Store) MarkExecutionsDispatched(ctx context.Context, ds []model.Dispatched, at time.Time) error {
	if len(ds) == 0 {
		return nil
	}
	// One statement per dispatch number (nearly always a single one, 0):
	// each finds its rows by id = ANY, the plan that stays fast for
	// thousands of ids; matching (id, dispatch) pairs in SQL would join
	// two unsorted lists. Rows another transaction holds are skipped, not
	// waited for: that is the recorder writing an executor's event, which
	// sets dispatched_at itself. So marking never waits on, or deadlocks
	// with, recording.
	total := len(ds)
	ds = slices.Clone(ds)
	slices.SortFunc(ds, func(a, b model.Dispatched) int {
		return cmp.Or(cmp.Compare(a.Dispatch, b.Dispatch), bytes.Compare(a.ID[:], b.ID[:]))
	})
	b := &pgx.Batch{}
	for len(ds) > 0 {
		n := 1
		for n < len(ds) && ds[n].Dispatch == ds[0].Dispatch {
			n++
		}
		group := ds[:n]
		ds = ds[n:]
		ids := make([]uuid.UUID, len(group))
		lo, hi := domain.ExecutionTime(group[0].ID), domain.ExecutionTime(group[0].ID)
		for i, d := range group {
			ids[i] = d.ID
			t := domain.ExecutionTime(d.ID)
			lo, hi = minTime(lo, t), maxTime(hi, t)
		}
		b.Queue(markDispatchedSQL, ids, lo, hi, group[0].Dispatch, nullTime(at))
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: mark %d executions dispatched: %w", total, err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// CancelExecution records that the execution is cancelled: a queued,
// running, failed or waiting execution becomes cancelled (finished now, out of the
// outbox, error "cancelled"), and a result reported later cannot revive
// it. Cancelling a cancelled execution returns it unchanged. A succeeded
// or dead one fails with ErrFinished, an unknown one with ErrNotFound.
// Stopping a running attempt is the caller's business
// (wire.CancelExecution).
func (s *Store) CancelExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	e, err := s.changeExecution(ctx, id, func(state domain.ExecState) (string, error) {
		switch state {
		case domain.ExecQueued, domain.ExecRunning, domain.ExecFailed, domain.ExecWaiting:
			return `UPDATE executions SET state = 'cancelled', finished_at = ` + nowMS + `,
				dispatched_at = COALESCE(dispatched_at, ` + nowMS + `), next_attempt_at = NULL, error = 'cancelled'
				WHERE id = $1 AND scheduled_for = $2 RETURNING ` + execColumns, nil
		case domain.ExecCancelled:
			return "", nil
		}
		return "", fmt.Errorf("%w: it is %s", ErrFinished, state)
	})
	if err != nil {
		return nil, fmt.Errorf("store: cancel execution %s: %w", id, err)
	}
	return e, nil
}

// RedriveExecution queues a dead execution again, for a fresh series of
// attempts: attempt numbers go on from the attempts made so far
// (SeriesBase becomes Attempts), and the retry policy's budget starts
// again. The execution is published at once (ExecChannel tells its
// bucket's scanner), as its next dispatch. An execution that is not dead
// fails with ErrNotDead, an unknown one with ErrNotFound.
func (s *Store) RedriveExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	e, err := s.changeExecution(ctx, id, func(state domain.ExecState) (string, error) {
		if state != domain.ExecDead {
			return "", fmt.Errorf("%w: it is %s", ErrNotDead, state)
		}
		return `UPDATE executions SET state = 'queued', series_base = attempts, next_attempt_at = ` + nowMS + `,
				dispatched_at = NULL, dispatches = dispatches + 1, finished_at = NULL, error = '', output = ''
			WHERE id = $1 AND scheduled_for = $2 RETURNING ` + execColumns, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: re-drive execution %s: %w", id, err)
	}
	return e, nil
}

// changeExecution locks execution id, asks change for the statement that
// changes it given its state ("" leaves it as it is; an error aborts),
// runs it and returns the execution as it is then. A changed execution
// still waiting for dispatch is announced on ExecChannel, so that its
// bucket's scanner reads the outbox at once.
func (s *Store) changeExecution(ctx context.Context, id uuid.UUID, change func(state domain.ExecState) (string, error)) (*model.Execution, error) {
	sched := domain.ExecutionTime(id)
	var e *model.Execution
	// A change that ends an execution with a concurrency key releases
	// its slot under the key's lock (migration 35), which a recorder
	// ending another of the key's executions may hold while it waits for
	// this row: one of the two is aborted as deadlocked, and this one
	// is simply run again.
	var err error
	for try := 0; try < changeTries; try++ {
		if err = s.changeExecutionOnce(ctx, id, sched, change, &e); !isRetryable(err) {
			break
		}
	}
	return e, err
}

// changeTries bounds the runs of a change that deadlocked.
const changeTries = 3

func (s *Store) changeExecutionOnce(ctx context.Context, id uuid.UUID, sched time.Time, change func(state domain.ExecState) (string, error), out **model.Execution) error {
	var e *model.Execution
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var state domain.ExecState
		err := tx.QueryRow(ctx, "SELECT state FROM executions WHERE id = $1 AND scheduled_for = $2 FOR UPDATE",
			id, sched).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		sql, err := change(state)
		if err != nil {
			return err
		}
		if sql == "" {
			sql = "SELECT " + execColumns + " FROM executions WHERE id = $1 AND scheduled_for = $2"
		}
		e, err = scanExecution(tx.QueryRow(ctx, sql, id, sched))
		if err != nil || e.DispatchedAt != nil || (e.State != domain.ExecQueued && e.State != domain.ExecFailed) {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", ExecChannel, strconv.Itoa(e.Bucket))
		return err
	})
	*out = e
	return err
}

// GetExecution reads an execution with its attempts (AttemptList, by
// number), or fails with ErrNotFound. It reads one day's partitions,
// found from the id.
func (s *Store) GetExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	sched := domain.ExecutionTime(id)
	e, err := scanExecution(s.pool.QueryRow(ctx, "SELECT "+execRead+
		" FROM executions WHERE id = $1 AND scheduled_for = $2", id, sched))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT number, executor_id, started_at, finished_at, heartbeat_at, outcome, error, output
		FROM attempts WHERE execution_id = $1 AND scheduled_for = $2 ORDER BY number`, id, sched)
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: attempts: %w", id, err)
	}
	e.AttemptList, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Attempt, error) {
		var (
			a       model.Attempt
			started *time.Time
		)
		err := r.Scan(&a.Number, &a.ExecutorID, &started, &a.FinishedAt, &a.HeartbeatAt, &a.Outcome, &a.Error, &a.Output)
		if started != nil {
			a.StartedAt = started.UTC()
		}
		a.FinishedAt, a.HeartbeatAt = utcPtr(a.FinishedAt), utcPtr(a.HeartbeatAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: get execution %s: attempts: %w", id, err)
	}
	if e.Notes, err = s.ListExecutionNotes(ctx, id, sched); err != nil {
		return nil, fmt.Errorf("store: get execution %s: %w", id, err)
	}
	if len(e.AttemptList) == 0 {
		// A single attempt lives in the execution's row (attempt_*).
		var (
			a             model.Attempt
			started       *time.Time
			outcome       *string
			errText, outp string
		)
		err := s.pool.QueryRow(ctx, `
			SELECT coalesce(attempt_executor, ''), attempt_started_at, attempt_finished_at, attempt_heartbeat_at,
				attempt_outcome, coalesce(attempt_error, error), coalesce(attempt_output, output)
			FROM executions WHERE id = $1 AND scheduled_for = $2`, id, sched).
			Scan(&a.ExecutorID, &started, &a.FinishedAt, &a.HeartbeatAt, &outcome, &errText, &outp)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("store: get execution %s: attempt: %w", id, err)
		}
		if err == nil && outcome != nil {
			a.Number, a.Outcome, a.Error, a.Output = 1, domain.Outcome(*outcome), errText, outp
			if started != nil {
				a.StartedAt = started.UTC()
			}
			a.FinishedAt, a.HeartbeatAt = utcPtr(a.FinishedAt), utcPtr(a.HeartbeatAt)
			e.AttemptList = []model.Attempt{a}
		}
	}
	return e, nil
}

// scanExecution reads a row of execColumns.
func scanExecution(row pgx.Row) (*model.Execution, error) { return scanExecutionWith(row) }

// scanExecutionWith reads a row of execColumns followed by more columns,
// into more.
func scanExecutionWith(row pgx.Row, more ...any) (*model.Execution, error) {
	var (
		e         model.Execution
		timeoutMS *int64
		payload   []byte
		retry     *domain.RetryPolicy
	)
	err := row.Scan(append([]any{rawUUID(&e.ID), rawUUID(&e.JobID), &e.Bucket, &e.Namespace, &e.JobName,
		&e.ScheduledFor, &e.Manual, &e.State, &e.Attempts, &e.Handler, &payload, &retry, &timeoutMS, &e.DispatchedAt,
		&e.StartedAt, &e.FinishedAt, &e.ExecutorID, &e.Error, &e.Output, &e.CreatedAt, &e.FiredBy,
		&e.Priority, &e.NextAttemptAt, &e.SeriesBase, &e.Dispatches, &e.JitteredDue, &e.Backfill, &e.Buffered,
		nullUUID(&e.Batch), &e.SlotKey, &e.RateKey}, more...)...)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		e.Payload = json.RawMessage(payload)
	}
	if retry != nil {
		e.Retry = *retry
	}
	if timeoutMS != nil {
		e.Timeout = msDuration(*timeoutMS)
	}
	e.ScheduledFor, e.CreatedAt = e.ScheduledFor.UTC(), e.CreatedAt.UTC()
	e.DispatchedAt, e.StartedAt, e.FinishedAt = utcPtr(e.DispatchedAt), utcPtr(e.StartedAt), utcPtr(e.FinishedAt)
	e.NextAttemptAt, e.JitteredDue = utcPtr(e.NextAttemptAt), utcPtr(e.JitteredDue)
	return &e, nil
}

// cleanText makes an executor's error or output storable: text columns
// take neither NUL bytes nor invalid UTF-8. It is cut to
// domain.MaxOutputBytes.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	s = strings.ToValidUTF8(s, "\uFFFD")
	return domain.Truncate(s)
}

// AdvancePublishPositions advances the publish positions of buckets (bucket → time):
// every fired execution of the bucket created (CreatedAt) at or before the
// time has had its first dispatch acknowledged by JetStream. A position
// never moves back. The outbox (ListUndispatchedExecutions) holds the bucket's fired
// executions created after it; so after a crash the bucket's next owner
// publishes those again, and JetStream drops the ones it has inside its
// duplicate window. It takes one statement.
//
// A caller that no longer owns a bucket may still advance its position:
// it only ever reports executions it fired while it owned the bucket,
// which were created before the next owner fired anything.
func (s *Store) AdvancePublishPositions(ctx context.Context, positions map[int]time.Time) error {
	if len(positions) == 0 {
		return nil
	}
	bs := make([]int, 0, len(positions))
	for b := range positions {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	ts := make([]time.Time, len(bs))
	for i, b := range bs {
		ts[i] = ms(positions[b])
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE publish_positions o SET published_through = GREATEST(o.published_through, u.p)
		FROM unnest($1::int[], $2::timestamptz[]) AS u(b, p)
		WHERE o.bucket = u.b AND o.published_through < u.p`, bs, ts)
	if err != nil {
		return fmt.Errorf("store: advance publish positions of %d buckets: %w", len(bs), err)
	}
	return nil
}

// inline is v when j has no spec (a job stored before specs existed, whose
// executions carry their own copy), else SQL NULL.
func inline(j *model.Job, v any) any {
	if j.SpecID != nil {
		return nil
	}
	return v
}

// GetExecutionNamespace is the namespace of the execution with id;
// ErrNotFound if there is none.
func (s *Store) GetExecutionNamespace(ctx context.Context, id uuid.UUID) (string, error) {
	var ns string
	err := s.pool.QueryRow(ctx, `SELECT namespace FROM executions WHERE id = $1 AND scheduled_for = $2`,
		id, domain.ExecutionTime(id)).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: execution %s namespace: %w", id, err)
	}
	return ns, nil
}
