package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// fireRetries is how many times Fire re-runs a transaction that
// Postgres aborted as a deadlock victim (two batches locking the same
// jobs in different orders).
const fireRetries = 3

// ClaimBucket records in the database that node owns bucket at epoch,
// unless a newer epoch is recorded already, in which case it fails with
// ErrFenced. Claiming the same epoch again is a no-op that succeeds.
//
// It is the write side of fencing: its update waits for firing
// transactions in flight in the bucket (they hold the bucket's row FOR
// SHARE), and every Fire after it sees the new epoch, so the previous
// owner's firings do nothing from then on.
func (s *Store) ClaimBucket(ctx context.Context, bucket int, node string, epoch int64) error {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO bucket_owners (bucket, node, epoch, claimed_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (bucket) DO UPDATE
			SET node = excluded.node, epoch = excluded.epoch, claimed_at = excluded.claimed_at
			WHERE bucket_owners.epoch <= excluded.epoch`, bucket, node, epoch)
	if err != nil {
		return fmt.Errorf("store: claim bucket %d for %s at epoch %d: %w", bucket, node, epoch, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: claim bucket %d for %s at epoch %d: %w", bucket, node, epoch, ErrFenced)
	}
	// A bucket claimed for the first time has fired nothing yet: its
	// publish position starts just before now (creation times are kept
	// to the millisecond, so one fired in this millisecond is after it).
	if _, err := s.pool.Exec(ctx, `INSERT INTO publish_positions (bucket, published_through)
		VALUES ($1, `+nowMS+` - interval '1 ms') ON CONFLICT DO NOTHING`, bucket); err != nil {
		return fmt.Errorf("store: claim bucket %d: publish position: %w", bucket, err)
	}
	return nil
}

// dueSQL reads the due jobs of some buckets for the scanner: only what
// it needs to fire. The schedule and policies come as their JSON text,
// which dueCodec decodes once per distinct text: thousands of jobs share
// a few, and extracting their fields in SQL cost Postgres more than
// sending the text (BenchmarkDueAfter, docs/bench.md).
//
// The namespace comes only for jobs whose policy names calendars (the
// scanner reads their calendars by it); "" for the others, which so
// cost no more than before calendars ("" scans without allocating).
const dueSQL = `SELECT id, bucket, next_run_at, schedule::text, runs, coalesce(policy::text, ''), skip_before,
		depends IS NOT NULL, chains, CASE WHEN policy ? 'calendars' THEN namespace ELSE '' END
	FROM jobs
	WHERE bucket = ANY($1) AND state = 'active' AND next_run_at > $2 AND next_run_at <= $3
	ORDER BY next_run_at LIMIT $4`

var negInfinity = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}

// ListDueJobs reads, for the scanner, up to limit active jobs in buckets
// whose next run is after after (exclusive; the zero time means no lower
// bound) and at or before until, earliest first: a scanner that already
// holds the jobs due up to after reads just the new slice of its
// look-ahead. It reads only those buckets' partitions.
func (s *Store) ListDueJobs(ctx context.Context, buckets []int, after, until time.Time, limit int) ([]model.Due, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	var lower any = after.UTC()
	if after.IsZero() {
		lower = negInfinity
	}
	rows, err := s.duePool.Query(ctx, dueSQL, buckets, lower, until.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: due jobs in %d buckets: %w", len(buckets), err)
	}
	due, err := pgx.CollectRows(rows, s.due.scanDue)
	if err != nil {
		return nil, fmt.Errorf("store: due jobs in %d buckets: %w", len(buckets), err)
	}
	return due, nil
}

// dueCodec decodes the schedules and policies of due jobs from their
// JSON text, keeping what it decoded. Safe for concurrent use.
type dueCodec struct {
	schedules decoded[schedule.Spec]
	policies  decoded[domain.JobPolicy]
}

// decoded keeps JSON texts decoded into T, at most dueCodecSize of them
// (it starts over when full).
type decoded[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

const dueCodecSize = 100_000

// decode is text decoded into a T, then changed by fix (if not nil),
// from the cache when text was decoded before.
func (c *decoded[T]) decode(text string, fix func(*T)) (T, error) {
	c.mu.Lock()
	v, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return v, fmt.Errorf("%q: %w", text, err)
	}
	if fix != nil {
		fix(&v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= dueCodecSize {
		c.m = map[string]T{}
	}
	c.m[text] = v
	return v, nil
}

// schedule decodes a schedule's text, without At and In: a due job's
// one-shot schedule needs neither (its run is the row's next_run_at).
func (c *dueCodec) schedule(text string) (schedule.Spec, error) {
	sp, err := c.schedules.decode(text, func(sp *schedule.Spec) { sp.At, sp.In = nil, "" })
	if err != nil {
		return sp, fmt.Errorf("schedule %w", err)
	}
	return sp, nil
}

// policy decodes a policy's text ("" for none: the zero policy).
func (c *dueCodec) policy(text string) (domain.JobPolicy, error) {
	if text == "" {
		return domain.JobPolicy{}, nil
	}
	p, err := c.policies.decode(text, nil)
	if err != nil {
		return p, fmt.Errorf("policy %w", err)
	}
	return p, nil
}

// scanDue reads a row of dueSQL.
func (c *dueCodec) scanDue(r pgx.CollectableRow) (model.Due, error) {
	var (
		d             model.Due
		sched, policy string
		err           error
	)
	if err := r.Scan(rawUUID(&d.ID), &d.Bucket, &d.NextRunAt, &sched, &d.FiredCount, &policy, &d.SkipBefore, &d.Waits, &d.Chains, &d.Namespace); err != nil {
		return d, err
	}
	d.NextRunAt, d.SkipBefore = d.NextRunAt.UTC(), utcPtr(d.SkipBefore)
	if d.Schedule, err = c.schedule(sched); err != nil {
		return d, fmt.Errorf("job %s: %w", d.ID, err)
	}
	if d.Policy, err = c.policy(policy); err != nil {
		return d, fmt.Errorf("job %s: %w", d.ID, err)
	}
	return d, nil
}

// fireSQL fires a batch in one statement: the compare-and-set on each
// job's next_run_at, then the executions of the jobs that won it. What an
// execution runs is returned from its job's row (the values its spec_id
// names), not looked up in job_specs column by column.
//
// One statement fires the whole batch, across all its buckets: with
// fireJoinSettings the planner joins the firings to the jobs partitions
// with a nested loop whose Append is pruned at run time to the firing's
// own partition (one primary-key probe per firing), and the plan is
// generic, made once per connection. One statement per bucket, as
// before, paid a statement's set-up for every ~4 firings at 10,000/s
// over 256 buckets (docs/bench.md, issue 20).
//
// The job must be active, tested as "(j.state = 'active') IS TRUE"
// rather than "j.state = 'active'": the same for a NOT NULL column, but it
// does not imply jobs_due's predicate, so the planner cannot read a
// partition whole through that partial index. With statistics older than
// a bulk load (a table analyzed empty, then 600,000 jobs created and
// due) it did exactly that: a generic plan that materialized every
// active job and compared each firing with all of them, 40-60 s per
// statement and runs skipped as missed (docs/bench.md, issue 20). The
// primary key's probe is then the only index path for the join, whatever
// the statistics say (TestFirePlanWithStaleStatistics).
//
// It names its conflict's arbiter, the (job_id, scheduled_for) key: an
// execution's id is derived from those two (domain.ExecutionID), so a
// conflict on the primary key is one on this key too, and Postgres checks
// one unique index before each insert instead of both.
var fireSQL = `
WITH f AS (
	SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::timestamptz[], $5::uuid[], $7::uuid[])
		AS f(job_id, bucket, sched, next, exec_id, batch)
), fired AS (
	UPDATE jobs j SET
		next_run_at = f.next,
		last_run_at = f.sched,
		runs = j.runs + 1,
		state = CASE WHEN f.next IS NULL THEN 'completed' ELSE j.state END,
		updated_at = ` + nowMS + `,
		version = j.version + 1
	FROM f
	WHERE j.bucket = f.bucket AND j.id = f.job_id
		AND (j.state = 'active') IS TRUE AND j.next_run_at = f.sched
	RETURNING f.exec_id, j.id, j.bucket, j.namespace, j.name, f.sched, j.handler, j.payload, j.retry,
		j.timeout_ms, j.priority, j.spec_id, f.batch, j.state
), done AS (
	UPDATE job_names n SET state = 'completed' FROM fired WHERE n.job_id = fired.id AND fired.state = 'completed'
)
INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
	handler, payload, retry, timeout_ms, priority, created_at, fired_by, spec_id, batch)
SELECT exec_id, id, bucket, namespace, name, sched, false, 'queued',
	CASE WHEN spec_id IS NULL THEN handler END, CASE WHEN spec_id IS NULL THEN payload END,
	CASE WHEN spec_id IS NULL THEN retry END, CASE WHEN spec_id IS NULL THEN timeout_ms END,
	priority, ` + nowMS + `, $6, spec_id, batch
FROM fired
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING ` + firedColumns

// firedColumns are the columns of a fired execution that fireSQL
// returns, as scanFired reads them: the execution's own handler, payload,
// retry policy and timeout (NULL when spec_id names them) and its spec
// id. Returning the job's values instead would take a join of the
// inserted rows with the updated ones.
const firedColumns = `id, job_id, bucket, namespace, job_name, scheduled_for, manual, state, attempts,
	handler, payload, retry, timeout_ms, dispatched_at, started_at, finished_at, executor_id, error, output,
	created_at, fired_by, priority, next_attempt_at, series_base, dispatches, due_at, backfill, buffered, spec_id, batch`

// scanFired reads a row of firedColumns: the execution, and its spec id
// (nil when the execution carries its own copy, already decoded).
func scanFired(r pgx.CollectableRow) (firedRow, error) {
	var (
		e                     model.Execution
		specID                pgtype.UUID
		handler, retry, pload []byte
		timeoutMS             *int64
	)
	err := r.Scan(rawUUID(&e.ID), rawUUID(&e.JobID), &e.Bucket, &e.Namespace, &e.JobName, &e.ScheduledFor, &e.Manual,
		&e.State, &e.Attempts, &handler, &pload, &retry, &timeoutMS, &e.DispatchedAt,
		&e.StartedAt, &e.FinishedAt, &e.ExecutorID, &e.Error, &e.Output, &e.CreatedAt, &e.FiredBy,
		&e.Priority, &e.NextAttemptAt, &e.SeriesBase, &e.Dispatches, &e.JitteredDue, &e.Backfill, &e.Buffered, &specID,
		nullUUID(&e.Batch))
	if err != nil {
		return firedRow{}, err
	}
	var spec *uuid.UUID
	if specID.Valid {
		id := uuid.UUID(specID.Bytes)
		spec = &id
	}
	if spec == nil {
		if err := json.Unmarshal(handler, &e.Handler); err != nil {
			return firedRow{}, fmt.Errorf("execution %s: handler: %w", e.ID, err)
		}
		if retry != nil {
			if err := json.Unmarshal(retry, &e.Retry); err != nil {
				return firedRow{}, fmt.Errorf("execution %s: retry: %w", e.ID, err)
			}
		}
		if pload != nil {
			e.Payload = json.RawMessage(pload)
		}
		if timeoutMS != nil {
			e.Timeout = msDuration(*timeoutMS)
		}
	}
	e.ScheduledFor, e.CreatedAt = e.ScheduledFor.UTC(), e.CreatedAt.UTC()
	e.DispatchedAt, e.StartedAt, e.FinishedAt = utcPtr(e.DispatchedAt), utcPtr(e.StartedAt), utcPtr(e.FinishedAt)
	e.NextAttemptAt, e.JitteredDue = utcPtr(e.NextAttemptAt), utcPtr(e.JitteredDue)
	return firedRow{&e, spec}, nil
}

type firedRow struct {
	e    *model.Execution
	spec *uuid.UUID
}

// fireJoinSettings shape fireSQL's plan, and fireJoinReset undoes them
// after it, for the policy firings later in the same transaction: index
// probes joined by a nested loop (a hash or merge join would read every
// partition of jobs whole), a generic plan (planning an update of 256
// partitions costs ~100 ms; the generic plan prunes at run time), and no
// JIT (the disabled join methods' costs would otherwise trigger it: 1.7 s
// of compilation per statement, seen with EXPLAIN ANALYZE; it stays off
// for the rest of the transaction, which has no use for it either).
var (
	fireJoinSettings = []string{"SET LOCAL enable_hashjoin = off", "SET LOCAL enable_mergejoin = off",
		"SET LOCAL plan_cache_mode = force_generic_plan", "SET LOCAL jit = off", firingSetting}
	fireJoinReset = []string{"SET LOCAL enable_hashjoin = on", "SET LOCAL enable_mergejoin = on",
		"SET LOCAL plan_cache_mode = auto"}
)

// firingSetting tells migration 37's trigger on jobs that this
// transaction keeps job_names' copy of the state of the jobs it fires
// itself: fireSQL and policyAdvanceSQL mark the jobs they complete in
// one set-based update, several times cheaper than the trigger's update
// per job (a firing changes no other copied column).
const firingSetting = "SET LOCAL tock.firing = on"

// Fire records a batch of firings in one transaction, in a few
// statements whatever the batch size. node and epochs (bucket → epoch)
// are the caller's claims, as given to ClaimBucket.
//
// Fencing: the transaction first reads the firings' buckets' ownership
// rows FOR SHARE. A bucket whose recorded node and epoch are not the
// caller's (or that was never claimed, or is missing from epochs) is
// fenced: nothing fires there and it is listed in FireResult.Fenced.
//
// Exactly once: in the other buckets each firing advances its job's
// next_run_at to Next (completing the job when Next is nil) only if the
// job is still active with next_run_at equal to ScheduledFor, and inserts
// the execution domain.ExecutionID(job, ScheduledFor) with a snapshot of the
// job's priority and a reference to its spec (handler, payload, retry
// policy, timeout: job_specs), not a copy. An
// execution that exists already is not inserted again. Firings that did
// nothing are counted in Skipped; at most one firing per job in a batch
// can succeed.
//
// The error is nil even when everything was fenced or skipped; it
// reports only a failed transaction, after which nothing was written.
func (s *Store) Fire(ctx context.Context, node string, epochs map[int]int64, firings []Firing) (model.FireResult, error) {
	if len(firings) == 0 {
		return model.FireResult{}, nil
	}
	if err := s.EnsureHistoryPartitions(ctx, pastDays(firings, time.Now())...); err != nil {
		return model.FireResult{}, err
	}
	for attempt := 0; ; attempt++ {
		res, err := s.fire(ctx, node, epochs, firings)
		if err == nil {
			return res, nil
		}
		if !isRetryable(err) || attempt == fireRetries || ctx.Err() != nil {
			return model.FireResult{}, fmt.Errorf("store: fire %d jobs: %w", len(firings), err)
		}
	}
}

// pastDays are the days (UTC midnight) before yesterday that the
// firings' executions fall on, once each: usually none. A late catch-up
// (a scheduler down for days, a missed-run policy of all) fires times
// older than the days MaintainHistoryPartitions keeps ready (yesterday to a
// week ahead), and Fire makes sure those days have their partitions
// (EnsureHistoryPartitions, which remembers the days it made sure of), so that the
// runs land in their own day rather than in the DEFAULT partition, and
// retention drops them with it.
func pastDays(firings []Firing, now time.Time) []time.Time {
	yesterday := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	var days []time.Time
	add := func(t time.Time) {
		if !t.Before(yesterday) {
			return // the usual case, decided without truncating
		}
		if d := t.UTC().Truncate(24 * time.Hour); !slices.ContainsFunc(days, d.Equal) {
			days = append(days, d)
		}
	}
	for _, f := range firings {
		if f.Runs == nil {
			add(f.ScheduledFor)
		}
		for _, r := range f.Runs {
			add(r.At)
		}
	}
	return days
}

func (s *Store) fire(ctx context.Context, node string, epochs map[int]int64, firings []Firing) (model.FireResult, error) {
	var buckets []int
	for _, f := range firings {
		buckets = append(buckets, f.Bucket)
	}
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)

	var res model.FireResult
	err := pgx.BeginFunc(ctx, s.firePool, func(tx pgx.Tx) error {
		res = model.FireResult{}
		owned, fenced, err := ownedBuckets(ctx, tx, node, epochs, buckets)
		if err != nil {
			return err
		}
		res.Fenced = fenced
		if len(owned) == 0 {
			return nil
		}
		plain, policy := groupFirings(firings, owned)
		res.Executions, res.Skipped, err = fireOwned(ctx, tx, &s.specs, node, plain)
		if err != nil {
			return err
		}
		pr, err := firePolicy(ctx, tx, node, owned, policy)
		if err != nil {
			return err
		}
		res.Executions, res.Moved = append(res.Executions, pr.execs...), pr.moved
		res.Cancelled, res.SkippedRuns, res.FiredCounts = pr.cancelled, pr.skipped, pr.runs
		for _, g := range policy {
			res.Skipped += len(g.firings)
		}
		res.Skipped -= len(pr.moved)
		return nil
	})
	if err != nil {
		return model.FireResult{}, err
	}
	return res, nil
}

// ownedBuckets locks buckets' owner rows (FOR SHARE, in bucket order in
// every transaction) and splits them into those node still owns at the
// epoch it claimed them (epochs) and the fenced rest.
func ownedBuckets(ctx context.Context, tx pgx.Tx, node string, epochs map[int]int64, buckets []int) (owned, fenced []int, err error) {
	rows, err := tx.Query(ctx, `
		SELECT bucket, node, epoch FROM bucket_owners WHERE bucket = ANY($1)
		ORDER BY bucket FOR SHARE`, buckets)
	if err != nil {
		return nil, nil, err
	}
	var (
		b, owner = 0, ""
		epoch    int64
		ok       = make(map[int]bool, len(buckets))
	)
	_, err = pgx.ForEachRow(rows, []any{&b, &owner, &epoch}, func() error {
		if e, claimed := epochs[b]; claimed && e == epoch && owner == node {
			ok[b] = true
			owned = append(owned, b)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, b := range buckets {
		if !ok[b] {
			fenced = append(fenced, b)
		}
	}
	return owned, fenced, nil
}

// fireGroup is a batch's plain firings, as the arrays of fireSQL.
type fireGroup struct {
	ids, execIDs []uuid.UUID
	bs           []int
	scheds       []time.Time
	nexts        []*time.Time
	// batches are pgtype.UUIDs, which pgx encodes directly: an array of
	// *uuid.UUID went through driver.Valuer element by element, as text.
	batches []pgtype.UUID
}

// FireBatchMembers is the most executions the firing puts in one batch
// (model.Execution.Batch): the plain firings of one bucket for the same
// instant, in (bucket, job id) order, are cut into batches of at most this
// many, each named by its first member's execution id, and the
// dispatcher publishes each batch's first dispatch in one message per
// queue and priority class (wire.HeaderBatch). A firing alone gets no
// batch. At 10,000 executions a second over 256 buckets a bucket fires
// about 40 a second, so a batch is rarely cut; a burst (50,000 due at
// once) is cut into messages of this size. At most wire.MaxBatchMembers.
const FireBatchMembers = 64

// assignBatches names the batches of plain firings: the firings of one
// bucket for the same scheduled time, in the order of the arrays, cut
// every FireBatchMembers; nil for a batch of one. The arrays keep their
// (bucket, job id) order, the order rows are locked in.
func (g *fireGroup) assignBatches() {
	type key struct {
		bucket int
		at     time.Time
	}
	type open struct{ first, n int } // the batch's first firing, its size so far
	g.batches = make([]pgtype.UUID, len(g.ids))
	cur := map[key]*open{}
	first := make([]int, len(g.ids)) // each firing's batch, by its first firing
	size := make(map[int]int)
	for i := range g.ids {
		k := key{g.bs[i], g.scheds[i]}
		b := cur[k]
		if b == nil || b.n == FireBatchMembers {
			b = &open{first: i}
			cur[k] = b
		}
		b.n++
		size[b.first]++
		first[i] = b.first
	}
	for i, f := range first {
		if size[f] >= 2 {
			g.batches[i] = pgtype.UUID{Bytes: g.execIDs[f], Valid: true}
		}
	}
}

// groupFirings splits the firings of the owned buckets into the plain
// ones (one group for the batch) and the others, by bucket.
func groupFirings(firings []Firing, owned []int) (*fireGroup, map[int]*policyGroup) {
	ok := make(map[int]bool, len(owned))
	for _, b := range owned {
		ok[b] = true
	}
	g := &fireGroup{}
	policy := map[int]*policyGroup{}
	var plain []*Firing
	for i := range firings {
		f := &firings[i]
		if !ok[f.Bucket] {
			continue
		}
		if !f.plain() {
			pg := policy[f.Bucket]
			if pg == nil {
				pg = &policyGroup{}
				policy[f.Bucket] = pg
			}
			pg.firings = append(pg.firings, *f)
			continue
		}
		plain = append(plain, f)
	}
	// In (bucket, id) order, the order in which a statement over the jobs
	// table (a bulk pause, a namespace's deletion) meets the rows: firing
	// locks them in the order of its arrays, and a batch in due-time order
	// deadlocked with such statements.
	slices.SortFunc(plain, func(a, b *Firing) int {
		if a.Bucket != b.Bucket {
			return a.Bucket - b.Bucket
		}
		return bytes.Compare(a.JobID[:], b.JobID[:])
	})
	for _, f := range plain {
		at := ms(f.ScheduledFor)
		g.ids, g.bs, g.scheds = append(g.ids, f.JobID), append(g.bs, f.Bucket), append(g.scheds, at)
		g.nexts, g.execIDs = append(g.nexts, msPtr(f.Next)), append(g.execIDs, domain.ExecutionID(f.JobID, at))
	}
	g.assignBatches()
	return g, policy
}

// fireOwned fires the plain firings of the owned buckets with one
// statement, its plan settings before it and their reset after it, all
// sent in one round trip. It returns the executions created and how
// many firings were skipped (their job changed since it was read).
func fireOwned(ctx context.Context, tx pgx.Tx, sc *specCache, node string, g *fireGroup) ([]*model.Execution, int, error) {
	if len(g.ids) == 0 {
		return nil, 0, nil
	}
	batch := &pgx.Batch{}
	before := append(slices.Clone(keyedPlanSettings), fireJoinSettings...)
	for _, set := range before {
		batch.Queue(set)
	}
	batch.Queue(fireSQL, g.ids, g.bs, g.scheds, g.nexts, g.execIDs, node, g.batches)
	for _, set := range fireJoinReset {
		batch.Queue(set)
	}
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	for range before {
		if _, err := br.Exec(); err != nil {
			return nil, 0, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, 0, err
	}
	got, err := pgx.CollectRows(rows, scanFired)
	if err != nil {
		return nil, 0, err
	}
	for range fireJoinReset {
		if _, err := br.Exec(); err != nil {
			return nil, 0, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, 0, err
	}
	execs, specs := make([]*model.Execution, len(got)), make([]*uuid.UUID, len(got))
	for i, r := range got {
		execs[i], specs[i] = r.e, r.spec
	}
	if err := sc.fill(ctx, tx, execs, specs); err != nil {
		return nil, 0, err
	}
	return execs, len(g.ids) - len(execs), nil
}

// keyedPlanSettings make the planner use index lookups for the rest of a
// transaction. The hot-path statements (firing, recording events) touch
// rows by key; with stale statistics — autovacuum off, a fresh daily
// partition, right after a bulk load — the planner would otherwise pick
// sequential scans of whole partitions, and throughput would fall a
// hundredfold. (Joins are left to the planner: each statement also names
// its keys with = ANY, so the index scan is the selective side.)
var keyedPlanSettings = []string{
	"SET LOCAL enable_seqscan = off",
}

// keyedPlans applies keyedPlanSettings and extra to tx, in one round trip.
func keyedPlans(ctx context.Context, tx pgx.Tx, extra ...string) error {
	_, err := tx.Exec(ctx, strings.Join(append(slices.Clone(keyedPlanSettings), extra...), "; "), pgx.QueryExecModeSimpleProtocol)
	return err
}
