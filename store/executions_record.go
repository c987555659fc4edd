package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// checkEvent refuses an event RecordAttemptEvents cannot record: attempt and
// dispatch numbers out of range, an unknown type, a timeout on a
// non-failure.
func checkEvent(ev *model.AttemptEvent) error {
	if ev.Attempt < 1 {
		return fmt.Errorf("attempt %d: attempts count from 1", ev.Attempt)
	}
	if ev.Dispatch < 0 {
		return fmt.Errorf("dispatch %d: dispatches count from 0", ev.Dispatch)
	}
	if !slices.Contains(domain.EventTypes, ev.Type) {
		return fmt.Errorf("event type %q is none of %v", ev.Type, domain.EventTypes)
	}
	if ev.TimedOut && ev.Type != domain.EventFailed {
		return fmt.Errorf("a %s event cannot have timed out", ev.Type)
	}
	return nil
}

// RecordAttemptEvents records events in order, in one transaction and one round
// trip. The result has one entry per event: nil, ErrNotFound (no such
// execution: the event changed nothing), or the event's validation
// error. The returned error is about the whole batch (nothing was
// recorded); then the caller retries.
//
// How each event changes its execution and attempts is written once, in
// rules.go. The common case, a queued execution whose first attempt
// succeeded, is written without reading the execution first, to the
// rules' effect (the fast path, executions_fast.go). A retry or a
// deferral tells the execution's bucket on ExecChannel.
func (s *Store) RecordAttemptEvents(ctx context.Context, evs []model.AttemptEvent) ([]error, error) {
	results := make([]error, len(evs))
	var queued []int
	for i := range evs {
		if err := checkEvent(&evs[i]); err != nil {
			results[i] = fmt.Errorf("store: execution %s: %w", evs[i].ID, err)
			continue
		}
		queued = append(queued, i)
	}
	if len(queued) == 0 {
		return results, nil
	}
	var byID map[uuid.UUID]*recExec
	fast := !s.recordStats.slowOnly
	for {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			byID, err = s.recordTx(ctx, tx, evs, queued, fast)
			return err
		})
		if fast && errors.Is(err, errFastRedo) {
			// Recorded again, from the start, with one sorted lock read
			// (executions_fast.go, Lock order).
			s.recordStats.redone.Add(1)
			fast = false
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store: record %d events: %w", len(evs), err)
		}
		break
	}
	nFast := 0
	for _, e := range byID {
		if e.recorded {
			nFast++
		}
	}
	s.recordStats.fast.Add(int64(nFast))
	for _, i := range queued {
		if byID[evs[i].ID] == nil {
			results[i] = fmt.Errorf("store: execution %s: %w", evs[i].ID, ErrNotFound)
		}
	}
	return results, nil
}

// lockExecsSQL reads and locks the executions a batch of events is about,
// in id order (so that concurrent batches never deadlock), with their
// attempts: attempt 1 inline, or all of them from attempts once there
// are two or more. $1 ids, $2 and $3 the bounds of their scheduled times
// (so that the planner prunes partitions).
const lockExecsSQL = `
SELECT x.id, x.job_id, x.namespace, x.scheduled_for, x.bucket, x.state, x.attempts, x.dispatches, x.dispatched_at,
	x.next_attempt_at, x.started_at, x.finished_at, x.executor_id, x.error, x.output,
	x.attempt_executor, x.attempt_started_at, x.attempt_heartbeat_at, x.attempt_finished_at,
	x.attempt_outcome, x.attempt_error, x.attempt_output,
	CASE WHEN x.attempts >= 2 OR (x.attempts = 1 AND x.attempt_outcome IS NULL) THEN (
		SELECT json_agg(json_build_array(a.number, a.executor_id, a.started_at, a.heartbeat_at,
			a.finished_at, a.outcome, a.error, a.output))
		FROM attempts a WHERE a.execution_id = x.id AND a.scheduled_for = x.scheduled_for) END,
	` + nowMS + `
FROM executions x
WHERE x.id = ANY($1) AND x.scheduled_for BETWEEN $2 AND $3
ORDER BY x.id
FOR UPDATE OF x`

// recordSettings plan recording's statements afresh on every call and
// keep the planner from joining the executions to the arrays of
// updateExecsSQL with a nested loop. After five executions of a prepared
// statement Postgres may switch to a generic plan, which cannot see the
// size of the id array nor prune day partitions by the time bounds; and
// with a fresh day partition's statistics the planner believed one row
// would match and rescanned the 2,000-element arrays once per row (14 s
// for one batch, seen with auto_explain in tockbench). A hash join over
// the rows found by id costs a few milliseconds.
var recordSettings = []string{"SET LOCAL plan_cache_mode = force_custom_plan", "SET LOCAL enable_nestloop = off"}

// updateExecsSQL writes back the executions a batch changed, one array
// per column.
const updateExecsSQL = `
UPDATE executions x SET
	state = u.state, attempts = u.attempts, dispatches = u.dispatches, dispatched_at = u.dispatched_at,
	next_attempt_at = u.next_attempt_at, started_at = u.started_at, finished_at = u.finished_at,
	executor_id = u.executor_id, error = u.error, output = u.output,
	attempt_executor = u.a_executor, attempt_started_at = u.a_started, attempt_heartbeat_at = u.a_heartbeat,
	attempt_finished_at = u.a_finished, attempt_outcome = u.a_outcome, attempt_error = u.a_error,
	attempt_output = u.a_output
FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::int[], $5::int[], $6::timestamptz[],
	$7::timestamptz[], $8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $12::text[],
	$13::text[], $14::timestamptz[], $15::timestamptz[], $16::timestamptz[], $17::text[], $18::text[], $19::text[])
	AS u(id, sched, state, attempts, dispatches, dispatched_at, next_attempt_at, started_at, finished_at,
		executor_id, error, output, a_executor, a_started, a_heartbeat, a_finished, a_outcome, a_error, a_output)
WHERE x.id = ANY($1) AND x.scheduled_for BETWEEN $20 AND $21 AND x.id = u.id AND x.scheduled_for = u.sched`

// upsertAttemptsSQL writes the attempts rows a batch changed.
const upsertAttemptsSQL = `
INSERT INTO attempts AS a (execution_id, scheduled_for, number, executor_id, started_at, heartbeat_at,
	finished_at, outcome, error, output)
SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[], $5::timestamptz[],
	$6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::text[])
ON CONFLICT (execution_id, scheduled_for, number) DO UPDATE SET
	executor_id = excluded.executor_id, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
	finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error, output = excluded.output`

// updateSuccessesSQL moves jobs' last successes forward: $1 job ids (in
// order), $2 when their successes finished, $3 the executions. Every
// job has its row from its creation (migration 22), so this is an update
// of a narrow row whose only index it does not change: HOT, with the
// room fillfactor 50 leaves (migration 21). A success older than the
// recorded one (reported late) changes nothing; a deleted job has no row
// left to move.
//
// It updates the rows in job id order (store/doc.go, Lock order): the row
// is matched with = ANY (ARRAY[u.job_id]), which an index probe serves
// but no hash or merge join can use, so the only plan is a nested loop
// over the array probing the primary key, as for fastRecordSQL
// (TestJobRowsLockedInOrder). With s.job_id = u.job_id the planner
// hashed the array and met the rows in a bitmap scan's order, the
// table's, for batches of up to a few hundred jobs (and in the array's
// for larger ones): two recorders could lock the same jobs' rows in
// different orders. The nested loop is chosen though recordSettings
// disable it (there is no other), at a cost that would cross
// jit_above_cost: JIT is off (Open).
const updateSuccessesSQL = `
UPDATE job_successes s SET last_success_at = u.at, execution_id = u.execution_id
FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[]) AS u(job_id, at, execution_id)
WHERE s.job_id = ANY (ARRAY[u.job_id])
	AND (s.last_success_at IS NULL OR s.last_success_at < u.at)`

// notifySQL tells the scanners of buckets ($1) that their outbox changed.
const notifySQL = `SELECT pg_notify('` + ExecChannel + `', b::text) FROM unnest($1::int[]) b`

// recordTx records evs[queued] in tx: the executions whose events are
// only their first attempt's success are written by a statement per day
// (the fast path, executions_fast.go, unless fast is false); one
// statement reads and locks every other execution they are about, the
// rules (rules.go) apply each of its events in order, and at most four
// statements write what changed; then what the changes mean for
// notification rules is decided (notifyTx). It returns the executions it
// found, as the rules left them.
func (s *Store) recordTx(ctx context.Context, tx pgx.Tx, evs []model.AttemptEvent, queued []int, fast bool) (map[uuid.UUID]*recExec, error) {
	ids, lo, hi := eventExecutions(evs, queued)
	var cands *fastRows
	if fast {
		cands = fastCandidates(evs, queued, ids)
	}
	byID := make(map[uuid.UUID]*recExec, len(ids))
	// pending are settings the next statements sent apply first.
	var pending []string
	// top is the greatest id the fast statements were given: they may
	// hold a row lock on any of those (executions_fast.go, Lock order).
	var top uuid.UUID
	rest := ids
	if cands == nil {
		if err := keyedPlans(ctx, tx, recordSettings...); err != nil {
			return nil, err
		}
	} else {
		var err error
		if top, err = recordFast(ctx, tx, cands, &s.dayParts, byID); err != nil {
			return nil, err
		}
		pending = fastReset
	}
	var now time.Time
	if len(byID) > 0 {
		rest = make([]uuid.UUID, 0, len(ids)-len(byID))
		for _, id := range ids {
			if byID[id] == nil {
				rest = append(rest, id)
			}
		}
	}
	if len(rest) > 0 {
		// The rows below top are locked without waiting: a wait for one
		// of them, with rows above it held, would break the lock order.
		below, _ := slices.BinarySearchFunc(rest, top, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		lo, hi = timeRange(rest)
		locked, t, err := lockExecutions(ctx, tx, pending, rest[:below], rest[below:])
		if below > 0 && pgCode(err) == "55P03" { // lock_not_available: another transaction holds one of them
			return nil, fmt.Errorf("%w: %w", errFastRedo, err)
		}
		if err != nil {
			return nil, err
		}
		pending, now = nil, t
		maps.Copy(byID, locked)
	}
	for _, i := range queued {
		if e := byID[evs[i].ID]; e != nil && !e.recorded {
			e.apply(&evs[i], now)
		}
	}
	b := &pgx.Batch{}
	queueSettings(b, pending)
	writeBack(b, ids, byID, lo, hi)
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	if err := notifyTx(ctx, tx, ids, byID, &s.rules); err != nil {
		return nil, err
	}
	return byID, nil
}

// eventExecutions lists the executions the queued events are about,
// once each, in id order (the order rows are locked in, so concurrent
// batches never deadlock), and the range of their scheduled times (which
// prunes the executions partitions).
func eventExecutions(evs []model.AttemptEvent, queued []int) (ids []uuid.UUID, lo, hi time.Time) {
	ids = make([]uuid.UUID, 0, len(queued))
	seen := make(map[uuid.UUID]bool, len(queued))
	lo, hi = domain.ExecutionTime(evs[queued[0]].ID), domain.ExecutionTime(evs[queued[0]].ID)
	for _, i := range queued {
		id := evs[i].ID
		if seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
		t := domain.ExecutionTime(id)
		lo, hi = minTime(lo, t), maxTime(hi, t)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids, lo, hi
}

// timeRange is the range of the scheduled times of ids.
func timeRange(ids []uuid.UUID) (lo, hi time.Time) {
	lo, hi = domain.ExecutionTime(ids[0]), domain.ExecutionTime(ids[0])
	for _, id := range ids[1:] {
		t := domain.ExecutionTime(id)
		lo, hi = minTime(lo, t), maxTime(hi, t)
	}
	return lo, hi
}

// lockExecutions reads and locks, after settings, the executions
// nowait and wait (those that exist) with their attempts, and reads the
// database's clock: nowait without waiting for a row another
// transaction holds (the statement fails with lock_not_available), then
// wait.
func lockExecutions(ctx context.Context, tx pgx.Tx, settings []string, nowait, wait []uuid.UUID,
) (map[uuid.UUID]*recExec, time.Time, error) {
	b := &pgx.Batch{}
	queueSettings(b, settings)
	reads := 0
	for _, r := range []struct {
		ids []uuid.UUID
		sql string
	}{{nowait, lockExecsSQL + " NOWAIT"}, {wait, lockExecsSQL}} {
		if len(r.ids) > 0 {
			lo, hi := timeRange(r.ids)
			b.Queue(r.sql, r.ids, lo, hi)
			reads++
		}
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range settings {
		if _, err := br.Exec(); err != nil {
			return nil, time.Time{}, err
		}
	}
	byID := make(map[uuid.UUID]*recExec, len(nowait)+len(wait))
	var now time.Time
	for range reads {
		rows, err := br.Query()
		if err != nil {
			return nil, time.Time{}, err
		}
		for rows.Next() {
			e, t, err := scanRecExec(rows)
			if err != nil {
				rows.Close()
				return nil, time.Time{}, err
			}
			byID[e.id], now = e, t
		}
		if err := rows.Err(); err != nil {
			return nil, time.Time{}, err
		}
	}
	return byID, now, br.Close()
}

// writeBack queues in b the statements that write what the events
// changed: the attempts table's rows, the executions' rows (with attempt
// 1 inline while it is the only one; not those the fast path wrote
// already), the last successes of the jobs whose executions succeeded, and a
// notification for each bucket with a re-queued execution.
func writeBack(b *pgx.Batch, ids []uuid.UUID, byID map[uuid.UUID]*recExec, lo, hi time.Time) {
	var (
		u  execUpdate
		at attemptRows
		ok successRows
	)
	buckets := map[int]bool{}
	for _, id := range ids {
		e := byID[id]
		if e == nil || !e.dirty {
			continue
		}
		if e.requeued {
			buckets[e.bucket] = true
		}
		if e.succeeded {
			ok.add(e)
		}
		if e.recorded {
			continue
		}
		if e.maxAttempt() <= 1 {
			u.add(e, e.att[1])
			continue
		}
		u.add(e, nil)
		for n, r := range e.att {
			// Attempt 1 moves from the execution's row into attempts when
			// the second appears.
			if e.dirtyAtt[n] || (n == 1 && e.inline) {
				at.add(e, n, r)
			}
		}
	}
	// Attempts first: the triggers on executions of migration 36 read
	// a cancelled execution's newest attempt (tock_attempt_open) to
	// decide whether its concurrency slot is free. The rows of both are
	// the executions' locked by the lock read already.
	if len(at.id) > 0 {
		b.Queue(upsertAttemptsSQL, at.id, at.sched, at.number, at.executor, at.started, at.heartbeat,
			at.finished, at.outcome, at.errText, at.output)
	}
	if len(u.id) > 0 {
		b.Queue(updateExecsSQL, u.id, u.sched, u.state, u.attempts, u.dispatches, u.dispatchedAt,
			u.nextAttempt, u.startedAt, u.finishedAt, u.executorID, u.errText, u.output,
			u.aExecutor, u.aStarted, u.aHeartbeat, u.aFinished, u.aOutcome, u.aError, u.aOutput, lo, hi)
	}
	if len(ok) > 0 {
		b.Queue(updateSuccessesSQL, ok.args()...)
	}
	if len(buckets) > 0 {
		bs := make([]int, 0, len(buckets))
		for bk := range buckets {
			bs = append(bs, bk)
		}
		slices.Sort(bs)
		b.Queue(notifySQL, bs)
	}
}

// scanRecExec reads a row of lockExecsSQL.
func scanRecExec(rows pgx.Rows) (*recExec, time.Time, error) {
	var (
		e                               recExec
		aExec, aOutcome, aErr, aOut     *string
		aStarted, aHeartbeat, aFinished *time.Time
		attJSON                         []byte
		now                             time.Time
	)
	err := rows.Scan(rawUUID(&e.id), rawUUID(&e.jobID), &e.namespace, &e.sched, &e.bucket, &e.state, &e.attempts, &e.dispatches, &e.dispatchedAt,
		&e.nextAttempt, &e.startedAt, &e.finishedAt, &e.executorID, &e.errText, &e.output,
		&aExec, &aStarted, &aHeartbeat, &aFinished, &aOutcome, &aErr, &aOut, &attJSON, &now)
	if err != nil {
		return nil, now, err
	}
	e.was.state, e.was.attempts, e.was.startedAt = e.state, e.attempts, e.startedAt
	e.att = map[int]*recAttempt{}
	if aOutcome != nil {
		e.inline = true
		e.att[1] = &recAttempt{executor: deref(aExec), startedAt: aStarted, heartbeatAt: aHeartbeat,
			finishedAt: aFinished, outcome: domain.Outcome(*aOutcome), errText: derefOr(aErr, e.errText), output: derefOr(aOut, e.output)}
	}
	if attJSON != nil {
		var list [][]json.RawMessage
		if err := json.Unmarshal(attJSON, &list); err != nil {
			return nil, now, fmt.Errorf("attempts of execution %s: %w", e.id, err)
		}
		for _, f := range list {
			var (
				n   int
				r   recAttempt
				err error
			)
			if len(f) != 8 {
				return nil, now, fmt.Errorf("attempts of execution %s: %d fields", e.id, len(f))
			}
			for i, dst := range []any{&n, &r.executor, &r.startedAt, &r.heartbeatAt, &r.finishedAt, &r.outcome, &r.errText, &r.output} {
				if err = json.Unmarshal(f[i], dst); err != nil {
					return nil, now, fmt.Errorf("attempts of execution %s: %w", e.id, err)
				}
			}
			r.startedAt, r.heartbeatAt, r.finishedAt = msPtr(r.startedAt), msPtr(r.heartbeatAt), msPtr(r.finishedAt)
			e.att[n] = &r
		}
		e.inline = false
	}
	return &e, now.UTC(), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
}

// successRows are the successes of a batch, the latest per job.
type successRows map[uuid.UUID]*recExec

// add counts e's success, unless its job has a later one in the batch.
func (r *successRows) add(e *recExec) {
	if *r == nil {
		*r = successRows{}
	}
	if p := (*r)[e.jobID]; p == nil || laterSuccess(e, p) {
		(*r)[e.jobID] = e
	}
}

// laterSuccess reports whether a's success is later than b's: it ended
// later, or at the same time with a greater id (so that the choice does
// not depend on the batch's order).
func laterSuccess(a, b *recExec) bool {
	if c := a.finishedAt.Compare(*b.finishedAt); c != 0 {
		return c > 0
	}
	return bytes.Compare(a.id[:], b.id[:]) > 0
}

// args are updateSuccessesSQL's arrays, in job id order.
func (r successRows) args() []any {
	jobs := slices.SortedFunc(maps.Keys(r), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	at, execs := make([]time.Time, len(jobs)), make([]uuid.UUID, len(jobs))
	for i, j := range jobs {
		at[i], execs[i] = *r[j].finishedAt, r[j].id
	}
	return []any{jobs, at, execs}
}

// execUpdate holds updateExecsSQL's arrays.
type execUpdate struct {
	id                                               []uuid.UUID
	sched                                            []time.Time
	state                                            []string
	attempts, dispatches                             []int
	dispatchedAt, nextAttempt, startedAt, finishedAt []*time.Time
	executorID, errText, output                      []string
	aExecutor                                        []*string
	aStarted, aHeartbeat, aFinished                  []*time.Time
	aOutcome, aError, aOutput                        []*string
}

// add appends e, with a1 as its inline attempt (nil: none inline).
func (u *execUpdate) add(e *recExec, a1 *recAttempt) {
	u.id, u.sched, u.state = append(u.id, e.id), append(u.sched, e.sched), append(u.state, string(e.state))
	u.attempts, u.dispatches = append(u.attempts, e.attempts), append(u.dispatches, e.dispatches)
	u.dispatchedAt, u.nextAttempt = append(u.dispatchedAt, e.dispatchedAt), append(u.nextAttempt, e.nextAttempt)
	u.startedAt, u.finishedAt = append(u.startedAt, e.startedAt), append(u.finishedAt, e.finishedAt)
	u.executorID, u.errText, u.output = append(u.executorID, e.executorID), append(u.errText, e.errText), append(u.output, e.output)
	if a1 == nil {
		u.aExecutor, u.aOutcome, u.aError, u.aOutput = append(u.aExecutor, nil), append(u.aOutcome, nil), append(u.aError, nil), append(u.aOutput, nil)
		u.aStarted, u.aHeartbeat, u.aFinished = append(u.aStarted, nil), append(u.aHeartbeat, nil), append(u.aFinished, nil)
		return
	}
	// The inline attempt's error and output are NULL when they are the
	// execution's own (the usual case), to keep the row narrow.
	var aErr, aOut *string
	if a1.errText != e.errText {
		aErr = &a1.errText
	}
	if a1.output != e.output {
		aOut = &a1.output
	}
	outcome := string(a1.outcome)
	u.aExecutor, u.aOutcome = append(u.aExecutor, &a1.executor), append(u.aOutcome, &outcome)
	u.aError, u.aOutput = append(u.aError, aErr), append(u.aOutput, aOut)
	u.aStarted, u.aHeartbeat, u.aFinished = append(u.aStarted, a1.startedAt), append(u.aHeartbeat, a1.heartbeatAt), append(u.aFinished, a1.finishedAt)
}

// attemptRows holds upsertAttemptsSQL's arrays.
type attemptRows struct {
	id                           []uuid.UUID
	sched                        []time.Time
	number                       []int
	executor                     []string
	started, heartbeat, finished []*time.Time
	outcome, errText, output     []string
}

func (at *attemptRows) add(e *recExec, n int, r *recAttempt) {
	at.id, at.sched, at.number = append(at.id, e.id), append(at.sched, e.sched), append(at.number, n)
	at.executor, at.outcome = append(at.executor, r.executor), append(at.outcome, string(r.outcome))
	at.started, at.heartbeat, at.finished = append(at.started, r.startedAt), append(at.heartbeat, r.heartbeatAt), append(at.finished, r.finishedAt)
	at.errText, at.output = append(at.errText, r.errText), append(at.output, r.output)
}

// record records one event.
