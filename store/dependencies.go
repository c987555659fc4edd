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

// lockDepends serialises the writes of dependency edges (exclusive) with
// the deletes of jobs (shared): a cycle check and a check for dependents
// each see every edge committed before them.
const lockDepends int64 = 0x746f636b_0005 // "tock" 5: job_dependencies

// CycleError: the dependencies asked for would close a cycle. Path is the
// cycle in the order runs flow (each job runs after the one before it),
// first and last the same job.
type CycleError struct{ Path []uuid.UUID }

func (e *CycleError) Error() string {
	ids := make([]string, len(e.Path))
	for i, id := range e.Path {
		ids[i] = id.String()
	}
	return "dependency cycle " + strings.Join(ids, " → ")
}

// UnknownUpstreamError: an upstream named by id does not exist.
type UnknownUpstreamError struct{ ID uuid.UUID }

func (e *UnknownUpstreamError) Error() string { return "unknown upstream job " + e.ID.String() }

// DependentsError: a job others depend on cannot be deleted without
// force; Dependents are those jobs.
type DependentsError struct{ Dependents []model.JobRef }

func (e *DependentsError) Error() string {
	names := make([]string, len(e.Dependents))
	for i, d := range e.Dependents {
		names[i] = d.Namespace + "/" + d.Name
	}
	return "jobs depend on it: " + strings.Join(names, ", ")
}

// createDependent stores a job with dependencies: the job and its edges
// in one transaction, after the checks of writeEdges.
func (s *Store) createDependent(ctx context.Context, j *model.Job) error {
	if err := s.prepare(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	if err := specOf(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := insertJob(ctx, tx, j); err != nil {
			return err
		}
		if err := s.writeEdges(ctx, tx, j); err != nil {
			return err
		}
		return notifyJob(ctx, tx, j.Bucket, j.ID)
	})
	if err != nil {
		return fmt.Errorf("store: create job %s/%s: %w", j.Namespace, j.Name, err)
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return nil
}

// cycleSQL walks up from the new upstreams ($2) along the edges and
// returns the first path that reaches the downstream ($1), upstream
// first, or nothing.
const cycleSQL = `
WITH RECURSIVE walk(id, path) AS (
	SELECT u, ARRAY[u] FROM unnest($2::uuid[]) u
	UNION ALL
	SELECT e.upstream_id, w.path || e.upstream_id
	FROM walk w JOIN job_dependencies e ON e.downstream_id = w.id
	WHERE NOT e.upstream_id = ANY(w.path) AND w.id <> $1
)
SELECT path FROM walk WHERE id = $1 LIMIT 1`

// writeEdges makes job_dependencies say what j.Depends says (none when
// nil), in tx: under the dependency lock, it refuses an upstream that
// does not exist (UnknownUpstreamError) and a cycle (CycleError), and
// keeps the upstreams' chains marks true to their chain edges.
func (s *Store) writeEdges(ctx context.Context, tx pgx.Tx, j *model.Job) error {
	var ups []uuid.UUID
	if j.Depends != nil {
		for _, u := range j.Depends.On {
			ups = append(ups, u.Job)
		}
	}
	if len(ups) > 0 {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockDepends); err != nil {
			return err
		}
	}
	// The upstreams whose chains mark may change: those of the chain
	// edges removed, and (below) those of new chain edges.
	rows, err := tx.Query(ctx, `DELETE FROM job_dependencies WHERE downstream_id = $1 RETURNING upstream_id, chain`, j.ID)
	if err != nil {
		return err
	}
	var touched []uuid.UUID
	var (
		up    uuid.UUID
		chain bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&up, &chain}, func() error {
		if chain {
			touched = append(touched, up)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(ups) == 0 {
		return s.markChains(ctx, tx, touched)
	}
	if slices.Contains(ups, j.ID) {
		return &CycleError{Path: []uuid.UUID{j.ID, j.ID}}
	}
	rows, err = tx.Query(ctx, `SELECT job_id FROM job_names WHERE job_id = ANY($1)`, ups)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return err
	}
	for _, u := range ups {
		if !slices.Contains(found, u) {
			return &UnknownUpstreamError{ID: u}
		}
	}
	var path []uuid.UUID
	switch err := tx.QueryRow(ctx, cycleSQL, j.ID, ups).Scan(&path); {
	case err == nil:
		// path runs from an upstream of j up to j: j → ... → upstream → j
		// in the order runs flow.
		slices.Reverse(path)
		return &CycleError{Path: append(path, j.ID)}
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	n := len(j.Depends.On)
	ubuckets, ons := make([]int, n), make([]string, n)
	chain = j.Depends.Chain
	for i, u := range j.Depends.On {
		ubuckets[i], ons[i] = domain.BucketOf(u.Job, s.buckets), u.On
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO job_dependencies (downstream_id, downstream_bucket, upstream_id, upstream_bucket, upstream_on, chain)
		SELECT $1, $2, u, b, o, $6 FROM unnest($3::uuid[], $4::int[], $5::text[]) AS x(u, b, o)`,
		j.ID, domain.BucketOf(j.ID, s.buckets), ups, ubuckets, ons, chain); err != nil {
		return err
	}
	if chain {
		touched = append(touched, ups...)
	}
	return s.markChains(ctx, tx, touched)
}

// markChains sets the chains mark of jobs to whether a chain depends on
// them, and announces those whose mark changed, so that their scanners
// load them again.
func (s *Store) markChains(ctx context.Context, tx pgx.Tx, jobs []uuid.UUID) error {
	if len(jobs) == 0 {
		return nil
	}
	// In (bucket, id) order, the jobs rows' lock order (doc.go).
	slices.SortFunc(jobs, func(a, b uuid.UUID) int {
		if c := cmp.Compare(domain.BucketOf(a, s.buckets), domain.BucketOf(b, s.buckets)); c != 0 {
			return c
		}
		return bytes.Compare(a[:], b[:])
	})
	jobs = slices.Compact(jobs)
	buckets := make([]int, len(jobs))
	for i, id := range jobs {
		buckets[i] = domain.BucketOf(id, s.buckets)
	}
	rows, err := tx.Query(ctx, `
		WITH x AS (
			SELECT b, id, EXISTS (SELECT 1 FROM job_dependencies e WHERE e.upstream_id = id AND e.chain) AS chains
			FROM unnest($1::int[], $2::uuid[]) AS x(b, id)
		), locked AS (
			SELECT j.bucket, j.id FROM jobs j JOIN x ON j.bucket = x.b AND j.id = x.id
			ORDER BY j.bucket, j.id FOR UPDATE OF j
		)
		UPDATE jobs j SET chains = x.chains FROM x
		WHERE j.bucket = x.b AND j.id = x.id AND j.chains <> x.chains AND (j.bucket, j.id) IN (SELECT * FROM locked)
		RETURNING j.bucket, j.id`, buckets, jobs)
	if err != nil {
		return err
	}
	var (
		b  int
		id uuid.UUID
	)
	var changed [][2]any
	if _, err := pgx.ForEachRow(rows, []any{&b, &id}, func() error {
		changed = append(changed, [2]any{b, id})
		return nil
	}); err != nil {
		return err
	}
	for _, c := range changed {
		if err := notifyJob(ctx, tx, c[0].(int), c[1].(uuid.UUID)); err != nil {
			return err
		}
	}
	return nil
}

// dependentsOf lists the jobs that depend on job id, by name.
func dependentsOf(ctx context.Context, q querier, id uuid.UUID) ([]model.JobRef, error) {
	rows, err := q.Query(ctx, `
		SELECT e.downstream_id, n.namespace, n.name FROM job_dependencies e
		JOIN job_names n ON n.job_id = e.downstream_id
		WHERE e.upstream_id = $1 ORDER BY n.namespace, n.name`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.JobRef, error) {
		var ref model.JobRef
		return ref, r.Scan(&ref.ID, &ref.Namespace, &ref.Name)
	})
}

// unlinkDependents removes the edges from job id to its dependents and
// drops id from each dependent's depends (a scheduled job left with no
// upstream waits for nothing; a chain left with none runs no more),
// bumping their versions. It returns the dependents.
func (s *Store) unlinkDependents(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]model.JobRef, error) {
	deps, err := dependentsOf(ctx, tx, id)
	if err != nil || len(deps) == 0 {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM job_dependencies WHERE upstream_id = $1`, id); err != nil {
		return nil, err
	}
	for _, d := range deps {
		b := domain.BucketOf(d.ID, s.buckets)
		var dep *domain.Depends
		if err := tx.QueryRow(ctx, `SELECT depends FROM jobs WHERE bucket = $1 AND id = $2 FOR UPDATE`, b, d.ID).Scan(&dep); err != nil {
			return nil, err
		}
		if dep != nil {
			dep.On = slices.DeleteFunc(dep.On, func(u domain.Upstream) bool { return u.Job == id })
			if len(dep.On) == 0 && !dep.Chain {
				dep = nil
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET depends = $3, version = version + 1, revision = revision + 1, updated_at = `+nowMS+`
			WHERE bucket = $1 AND id = $2`, b, d.ID, dep); err != nil {
			return nil, err
		}
		if err := notifyJob(ctx, tx, b, d.ID); err != nil {
			return nil, err
		}
	}
	return deps, nil
}

// ListJobRefs names jobs by id; a job that does not exist is left out.
func (s *Store) ListJobRefs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]model.JobRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT job_id, namespace, name FROM job_names WHERE job_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: name %d jobs: %w", len(ids), err)
	}
	out := map[uuid.UUID]model.JobRef{}
	var ref model.JobRef
	if _, err := pgx.ForEachRow(rows, []any{&ref.ID, &ref.Namespace, &ref.Name}, func() error {
		out[ref.ID] = ref
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: name %d jobs: %w", len(ids), err)
	}
	return out, nil
}

// ListJobEdges lists the dependency edges around job id: the edges up
// from it and down from it, transitively, at most limit of them
// (nearest first).
func (s *Store) ListJobEdges(ctx context.Context, id uuid.UUID, limit int) ([]model.Edge, error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE up(d, u, depth) AS (
			SELECT downstream_id, upstream_id, 1 FROM job_dependencies WHERE downstream_id = $1
			UNION
			SELECT e.downstream_id, e.upstream_id, up.depth + 1 FROM up JOIN job_dependencies e ON e.downstream_id = up.u
			WHERE up.depth < 32
		), down(d, u, depth) AS (
			SELECT downstream_id, upstream_id, 1 FROM job_dependencies WHERE upstream_id = $1
			UNION
			SELECT e.downstream_id, e.upstream_id, down.depth + 1 FROM down JOIN job_dependencies e ON e.upstream_id = down.d
			WHERE down.depth < 32
		), edges AS (
			SELECT d, u, min(depth) AS depth FROM (SELECT * FROM up UNION ALL SELECT * FROM down) x GROUP BY d, u
		)
		SELECT e.d, dn.namespace, dn.name, e.u, un.namespace, un.name, x.upstream_on, x.chain
		FROM edges e
		JOIN job_dependencies x ON x.downstream_id = e.d AND x.upstream_id = e.u
		JOIN job_names dn ON dn.job_id = e.d
		JOIN job_names un ON un.job_id = e.u
		ORDER BY e.depth, dn.namespace, dn.name, un.namespace, un.name
		LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("store: edges of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Edge, error) {
		var e model.Edge
		return e, r.Scan(&e.Downstream.ID, &e.Downstream.Namespace, &e.Downstream.Name,
			&e.Upstream.ID, &e.Upstream.Namespace, &e.Upstream.Name, &e.On, &e.Chain)
	})
	if err != nil {
		return nil, fmt.Errorf("store: edges of %s: %w", id, err)
	}
	return out, nil
}

// chainRunsSQL makes, for upstream runs just fired ($1 upstream job, $2
// scheduled time), one waiting execution ($3 id) of each chain ($4 job,
// $5 bucket) that depends on them and is active, at the same scheduled
// time; a time that has one already keeps it.
var chainRunsSQL = `
INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
	handler, payload, retry, timeout_ms, priority, created_at, fired_by, spec_id, next_attempt_at)
SELECT r.exec_id, d.id, d.bucket, d.namespace, d.name, r.sched, false, 'waiting',
	CASE WHEN d.spec_id IS NULL THEN d.handler END, CASE WHEN d.spec_id IS NULL THEN d.payload END,
	CASE WHEN d.spec_id IS NULL THEN d.retry END, CASE WHEN d.spec_id IS NULL THEN d.timeout_ms END,
	d.priority, ` + nowMS + `, $6, d.spec_id, $7
FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::int[]) AS r(up, sched, exec_id, job, bucket)
JOIN jobs d ON d.bucket = r.bucket AND d.id = r.job
WHERE d.state = 'active' AND (d.depends->>'chain')::boolean
ORDER BY r.sched
ON CONFLICT DO NOTHING`

// insertChainRuns makes the waiting executions of the chains that depend
// on the won firings marked Chains, at their runs' times.
func insertChainRuns(ctx context.Context, tx pgx.Tx, node string, groups map[int]*policyGroup, won map[uuid.UUID]int64) error {
	runs := map[uuid.UUID][]time.Time{}
	for _, g := range groups {
		for _, f := range g.firings {
			if _, ok := won[f.JobID]; ok && f.Chains {
				for _, r := range f.Runs {
					runs[f.JobID] = append(runs[f.JobID], ms(r.At))
				}
			}
		}
	}
	if len(runs) == 0 {
		return nil
	}
	ups := make([]uuid.UUID, 0, len(runs))
	for id := range runs {
		ups = append(ups, id)
	}
	rows, err := tx.Query(ctx, `SELECT upstream_id, downstream_id, downstream_bucket FROM job_dependencies
		WHERE upstream_id = ANY($1) AND chain`, ups)
	if err != nil {
		return err
	}
	var (
		upIDs, execs, jobs []uuid.UUID
		ats                []time.Time
		buckets            []int
		up, down           uuid.UUID
		b                  int
	)
	if _, err := pgx.ForEachRow(rows, []any{&up, &down, &b}, func() error {
		for _, at := range runs[up] {
			upIDs, ats, execs = append(upIDs, up), append(ats, at), append(execs, domain.ExecutionID(down, at))
			jobs, buckets = append(jobs, down), append(buckets, b)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(execs) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, chainRunsSQL, upIDs, ats, execs, jobs, buckets, node, bufferedUntil)
	return err
}

// ListWaitingExecutions reads up to limit executions waiting for their
// upstreams in buckets, oldest first, with what their jobs wait for. An
// execution whose job was deleted or no longer has dependencies comes
// with an empty Depends (it waits for nothing).
func (s *Store) ListWaitingExecutions(ctx context.Context, buckets []int, limit int) ([]model.Waiting, error) {
	if len(buckets) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT x.id, x.job_id, x.bucket, x.namespace, x.job_name, x.scheduled_for, j.depends
		FROM executions x LEFT JOIN jobs j ON j.bucket = x.bucket AND j.id = x.job_id
		WHERE x.bucket = ANY($1) AND x.state = 'waiting'
		ORDER BY x.scheduled_for LIMIT $2`, buckets, limit)
	if err != nil {
		return nil, fmt.Errorf("store: waiting executions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Waiting, error) {
		var (
			w   model.Waiting
			dep *domain.Depends
		)
		err := r.Scan(&w.ID, &w.JobID, &w.Bucket, &w.Namespace, &w.JobName, &w.ScheduledFor, &dep)
		w.ScheduledFor = w.ScheduledFor.UTC()
		if dep != nil {
			w.Depends = *dep
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: waiting executions: %w", err)
	}
	return out, nil
}

// upstreamSQL answers UpstreamQueries ($1 job, $2 time, $3 window in
// ms, 0 for same_time): the matching execution, the upstream job's state
// and next run, and (same_time) its skipped range holding the time. For
// latest_within, executions scheduled more than a day before the window
// are not looked at (an upstream run that long is not "recent").
const upstreamSQL = `
SELECT q.i, e.id, e.scheduled_for, e.state, e.finished_at,
	n.name, j.state, j.next_run_at, sk.reason, n.job_id IS NULL
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[]) WITH ORDINALITY AS q(job, at, within_ms, i)
LEFT JOIN job_names n ON n.job_id = q.job
LEFT JOIN jobs j ON j.bucket = n.bucket AND j.id = q.job
LEFT JOIN LATERAL (
	SELECT * FROM (
		SELECT x.id, x.scheduled_for, x.state, x.finished_at FROM executions x
		WHERE q.within_ms = 0 AND x.job_id = q.job AND x.scheduled_for = q.at
		UNION ALL
		(SELECT x.id, x.scheduled_for, x.state, x.finished_at FROM executions x
		WHERE q.within_ms > 0 AND x.job_id = q.job
			AND x.scheduled_for >= q.at - (q.within_ms * interval '1 ms') - interval '1 day'
			AND x.finished_at >= q.at - (q.within_ms * interval '1 ms') AND x.finished_at <= q.at
			AND x.state IN ('succeeded', 'dead', 'cancelled') AND NOT x.backfill
		ORDER BY x.finished_at DESC LIMIT 1)
		UNION ALL
		(SELECT x.id, x.scheduled_for, x.state, x.finished_at FROM executions x
		WHERE q.within_ms > 0 AND x.job_id = q.job
			AND x.scheduled_for >= q.at - (q.within_ms * interval '1 ms') - interval '1 day'
			AND x.finished_at > q.at AND x.state IN ('succeeded', 'dead', 'cancelled') AND NOT x.backfill
		ORDER BY x.finished_at LIMIT 1)
	) c ORDER BY (c.finished_at IS NULL OR c.finished_at <= q.at) DESC LIMIT 1
) e ON true
LEFT JOIN LATERAL (
	SELECT s.reason FROM skipped_runs s
	WHERE q.within_ms = 0 AND s.job_id = q.job AND s.first_at <= q.at AND s.last_at >= q.at
	ORDER BY s.first_at DESC LIMIT 1
) sk ON true
ORDER BY q.i`

// ListUpstreamRuns answers qs, in their order.
func (s *Store) ListUpstreamRuns(ctx context.Context, qs []model.UpstreamQuery) ([]model.UpstreamRun, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	jobs, ats, within := make([]uuid.UUID, len(qs)), make([]time.Time, len(qs)), make([]int64, len(qs))
	for i, q := range qs {
		jobs[i], ats[i], within[i] = q.Job, ms(q.At), q.Within.Milliseconds()
	}
	rows, err := s.pool.Query(ctx, upstreamSQL, jobs, ats, within)
	if err != nil {
		return nil, fmt.Errorf("store: upstream runs: %w", err)
	}
	out := make([]model.UpstreamRun, 0, len(qs))
	var (
		i                    int64
		execID               *uuid.UUID
		sched, finished, nxt *time.Time
		state, jobState      *string
		name, skipped        *string
		missing              bool
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &execID, &sched, &state, &finished, &name, &jobState, &nxt, &skipped, &missing}, func() error {
		r := model.UpstreamRun{Missing: missing || jobState == nil, NextRunAt: utcPtr(nxt)}
		if name != nil {
			r.JobName = *name
		}
		if jobState != nil {
			r.JobState = domain.JobState(*jobState)
		}
		if skipped != nil {
			r.Skipped = *skipped
		}
		if execID != nil {
			r.Execution = &model.UpstreamExecution{ID: *execID, JobID: qs[i-1].Job, ScheduledFor: sched.UTC(),
				State: domain.ExecState(*state), FinishedAt: utcPtr(finished)}
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: upstream runs: %w", err)
	}
	return out, nil
}

// ApplyWaitDecisions carries out the resolver's decisions in one transaction:
// a released execution goes from waiting to queued, due now, or at its
// (jittered) time if that is still ahead (never early; its bucket's
// scanner is told), with the upstream executions that satisfied it
// recorded; a skipped one leaves the executions table for the skip ledger
// (reason and detail), and a timeout's notification events are decided.
// Each takes effect only if the execution is still waiting, so a
// decision taken twice (two nodes, a retry) does it once.
func (s *Store) ApplyWaitDecisions(ctx context.Context, ds []model.WaitDecision) (model.WaitResult, error) {
	var res model.WaitResult
	if len(ds) == 0 {
		return res, nil
	}
	var (
		relIDs, skipIDs     []uuid.UUID
		relAt, skipAt       []time.Time
		reasons, details    []string
		lExec, lUp, lUpJob  []uuid.UUID
		lAt, lUpAt          []time.Time
		lJob                []uuid.UUID
		lState              []string
		timeouts            = map[uuid.UUID]model.WaitDecision{}
		releasedAt          = map[uuid.UUID]bool{}
		relBuckets, skipped = map[int]bool{}, map[uuid.UUID]bool{}
	)
	for _, d := range ds {
		w := d.Waiting
		if d.Timeout {
			timeouts[w.ID] = d
		}
		if !d.Release {
			skipIDs, skipAt = append(skipIDs, w.ID), append(skipAt, w.ScheduledFor)
			reasons, details = append(reasons, d.Reason), append(details, d.Detail)
			continue
		}
		relIDs, relAt = append(relIDs, w.ID), append(relAt, w.ScheduledFor)
		for _, u := range d.Upstreams {
			lExec, lAt, lJob = append(lExec, w.ID), append(lAt, w.ScheduledFor), append(lJob, w.JobID)
			lUp, lUpAt, lUpJob = append(lUp, u.ID), append(lUpAt, u.ScheduledFor), append(lUpJob, u.JobID)
			lState = append(lState, string(u.State))
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Every decided execution still waiting is locked first, in id
		// order (store/doc.go, Lock order), so that two resolvers deciding
		// the same rows (a bucket changing owner) wait for each other
		// rather than deadlock; the statements below then meet only rows
		// this transaction holds.
		if _, err := tx.Exec(ctx, `SELECT x.id FROM executions x
			JOIN unnest($1::uuid[], $2::timestamptz[]) AS r(id, sched) ON x.id = r.id AND x.scheduled_for = r.sched
			WHERE x.state = 'waiting' ORDER BY x.id FOR UPDATE OF x`,
			append(slices.Clone(relIDs), skipIDs...), append(slices.Clone(relAt), skipAt...)); err != nil {
			return err
		}
		if len(relIDs) > 0 {
			rows, err := tx.Query(ctx, `
				WITH rel AS (
					UPDATE executions x SET state = 'queued',
						next_attempt_at = GREATEST(`+nowMS+`, COALESCE(x.due_at, x.scheduled_for))
					FROM unnest($1::uuid[], $2::timestamptz[]) AS r(id, sched)
					WHERE x.id = r.id AND x.scheduled_for = r.sched AND x.state = 'waiting'
					RETURNING x.id, x.bucket
				), links AS (
					INSERT INTO execution_upstreams (execution_id, scheduled_for, job_id, upstream_execution_id,
						upstream_scheduled_for, upstream_job_id, upstream_state)
					SELECT l.e, l.at, l.job, l.up, l.up_at, l.up_job, l.st
					FROM unnest($3::uuid[], $4::timestamptz[], $5::uuid[], $6::uuid[], $7::timestamptz[], $8::uuid[], $9::text[])
						AS l(e, at, job, up, up_at, up_job, st)
					WHERE l.e IN (SELECT id FROM rel)
					ON CONFLICT DO NOTHING
				)
				SELECT id, bucket FROM rel`, relIDs, relAt, lExec, lAt, lJob, lUp, lUpAt, lUpJob, lState)
			if err != nil {
				return err
			}
			var (
				id uuid.UUID
				b  int
			)
			if _, err := pgx.ForEachRow(rows, []any{&id, &b}, func() error {
				releasedAt[id], relBuckets[b] = true, true
				return nil
			}); err != nil {
				return err
			}
			for b := range relBuckets {
				if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", ExecChannel, strconv.Itoa(b)); err != nil {
					return err
				}
			}
		}
		if len(skipIDs) > 0 {
			rows, err := tx.Query(ctx, `
				WITH gone AS (
					DELETE FROM executions x
					USING unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[]) AS r(id, sched, reason, detail)
					WHERE x.id = r.id AND x.scheduled_for = r.sched AND x.state = 'waiting'
					RETURNING x.id, x.job_id, x.scheduled_for, x.namespace, x.job_name, r.reason, r.detail
				), sk AS (
					INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, detail, namespace, job_name)
					SELECT job_id, scheduled_for, scheduled_for, 1, reason, detail, namespace, job_name FROM gone
					ON CONFLICT DO NOTHING
				)
				SELECT id FROM gone`, skipIDs, skipAt, reasons, details)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil {
				return err
			}
			for _, id := range ids {
				skipped[id] = true
			}
		}
		var evs []model.NotifyEvent
		for id, d := range timeouts {
			if releasedAt[id] || skipped[id] {
				res.TimedOut = append(res.TimedOut, d)
			}
		}
		if len(res.TimedOut) > 0 {
			var err error
			if evs, err = s.timeoutEvents(ctx, tx, res.TimedOut); err != nil {
				return err
			}
			if len(evs) > 0 {
				b := &pgx.Batch{}
				queueNotifyEvents(b, evs)
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return model.WaitResult{}, fmt.Errorf("store: resolve %d waiting executions: %w", len(ds), err)
	}
	res.Released, res.Skipped = len(releasedAt), len(skipped)
	return res, nil
}

// ListExecutionUpstreams lists the upstream executions that let
// execution id run.
func (s *Store) ListExecutionUpstreams(ctx context.Context, id uuid.UUID) ([]model.ExecutionLink, error) {
	return s.links(ctx, `
		SELECT l.upstream_execution_id, l.upstream_job_id, COALESCE(n.name, ''), COALESCE(n.namespace, ''),
			l.upstream_scheduled_for, l.upstream_state
		FROM execution_upstreams l LEFT JOIN job_names n ON n.job_id = l.upstream_job_id
		WHERE l.execution_id = $1 ORDER BY n.namespace, n.name`, id)
}

// ListReleasedExecutions lists the downstream executions that execution
// id let run, with their states now.
func (s *Store) ListReleasedExecutions(ctx context.Context, id uuid.UUID) ([]model.ExecutionLink, error) {
	return s.links(ctx, `
		SELECT l.execution_id, l.job_id, x.job_name, x.namespace, l.scheduled_for, x.state
		FROM execution_upstreams l
		JOIN executions x ON x.id = l.execution_id AND x.scheduled_for = l.scheduled_for
		WHERE l.upstream_execution_id = $1 ORDER BY x.namespace, x.job_name LIMIT 500`, id)
}

func (s *Store) links(ctx context.Context, sql string, id uuid.UUID) ([]model.ExecutionLink, error) {
	rows, err := s.pool.Query(ctx, sql, id)
	if err != nil {
		return nil, fmt.Errorf("store: dependency links of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.ExecutionLink, error) {
		var l model.ExecutionLink
		err := r.Scan(&l.ExecutionID, &l.JobID, &l.JobName, &l.Namespace, &l.ScheduledFor, &l.State)
		l.ScheduledFor = l.ScheduledFor.UTC()
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: dependency links of %s: %w", id, err)
	}
	return out, nil
}

// timeoutEvents decides execution.dependency_timeout for the waits that
// ran out: one event per rule that asks for it and whose selector
// chooses the job, unique by rule and execution (a decision taken again
// decides nothing again).
func (s *Store) timeoutEvents(ctx context.Context, tx pgx.Tx, ds []model.WaitDecision) ([]model.NotifyEvent, error) {
	byNS, err := s.rules.get(ctx, tx)
	if err != nil {
		return nil, err
	}
	var jobs []uuid.UUID
	for _, d := range ds {
		if len(byNS[d.Waiting.Namespace]) > 0 {
			jobs = append(jobs, d.Waiting.JobID)
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT j.id, j.labels FROM job_names n JOIN jobs j ON j.bucket = n.bucket AND j.id = n.job_id
		WHERE n.job_id = ANY($1)`, jobs)
	if err != nil {
		return nil, err
	}
	labels := map[uuid.UUID]domain.Labels{}
	var (
		id uuid.UUID
		l  domain.Labels
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &l}, func() error {
		labels[id] = l
		return nil
	}); err != nil {
		return nil, err
	}
	var evs []model.NotifyEvent
	for _, d := range ds {
		w := d.Waiting
		l, ok := labels[w.JobID]
		if !ok {
			continue
		}
		for _, r := range byNS[w.Namespace] {
			if !r.kinds[domain.NotifyExecutionDependencyTimeout] || !r.matches(l) {
				continue
			}
			job, exec := w.JobID, w.ID
			then := "skipped"
			if d.Release {
				then = "ran"
			}
			ev := model.NotifyEvent{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: w.Namespace,
				Kind: domain.NotifyExecutionDependencyTimeout, JobID: &job, JobName: w.JobName, ExecutionID: &exec,
				At:       w.ScheduledFor.Add(w.Depends.WaitTimeout()).UTC(),
				DedupKey: r.ID.String() + "/" + domain.NotifyExecutionDependencyTimeout + "/" + exec.String()}
			ev.Detail, _ = json.Marshal(map[string]any{"scheduled_for": w.ScheduledFor, "waited_for": d.Detail,
				"then": then, "wait_timeout_ms": w.Depends.WaitTimeoutMS})
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// GetJobRef names the job called name in namespace, or fails with
// ErrNotFound.
func (s *Store) GetJobRef(ctx context.Context, namespace, name string) (model.JobRef, error) {
	return jobRefOf(ctx, s.pool, namespace, name)
}

func jobRefOf(ctx context.Context, q querier, namespace, name string) (model.JobRef, error) {
	ref := model.JobRef{Namespace: namespace, Name: name}
	err := q.QueryRow(ctx, `SELECT job_id FROM job_names WHERE namespace = $1 AND name = $2`, namespace, name).Scan(&ref.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return ref, fmt.Errorf("store: job %s/%s: %w", namespace, name, err)
	}
	return ref, nil
}
