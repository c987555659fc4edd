package store

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// plain reports whether f fires exactly its ScheduledFor, unjittered,
// skipping nothing, whatever else the job runs: the common case, which
// fireSQL handles.
func (f *Firing) plain() bool { return f.Plain() }

// Plain is plain, for the scanner: a firing that is not plain names its
// runs (Runs), even when it fires just ScheduledFor.
func (f *Firing) Plain() bool {
	return f.Runs == nil && len(f.Skips) == 0 && (f.Overlap == "" || f.Overlap == domain.OverlapAllow) && !f.Waits && !f.Chains &&
		f.Concurrency == nil && !f.RateLimited
}

// policyAdvanceSQL is the compare-and-set of firings that are not plain,
// on one bucket's jobs partition ($6): it moves each job to its next run
// (completing it when there is none), counts the runs it fires and
// records its skipped ranges, only for the jobs whose next_run_at is
// still the one the scanner read. It returns the jobs it moved.
var policyAdvanceSQL = `
WITH f AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::timestamptz[])
		AS f(job_id, sched, next, nruns, last_run)
), fired AS (
	UPDATE jobs j SET
		next_run_at = f.next,
		last_run_at = COALESCE(f.last_run, j.last_run_at),
		runs = j.runs + f.nruns,
		state = CASE WHEN f.next IS NULL THEN 'completed' ELSE j.state END,
		updated_at = ` + nowMS + `,
		version = j.version + 1
	FROM f
	WHERE j.bucket = $6 AND j.id = ANY($1) AND j.id = f.job_id
		AND (j.state = 'active') IS TRUE AND j.next_run_at = f.sched
	RETURNING j.id, j.namespace, j.name, j.runs, j.state
), done AS (
	UPDATE job_names n SET state = 'completed' FROM fired WHERE n.job_id = fired.id AND fired.state = 'completed'
), sk AS (
	INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, detail, namespace, job_name)
	SELECT s.job_id, s.first_at, s.last_at, s.runs, s.reason, s.detail, fired.namespace, fired.name
	FROM unnest($7::uuid[], $8::timestamptz[], $9::timestamptz[], $10::bigint[], $11::text[], $12::text[])
		AS s(job_id, first_at, last_at, runs, reason, detail)
	JOIN fired ON fired.id = s.job_id
	ON CONFLICT DO NOTHING
)
SELECT id, runs FROM fired`

// policyRunsSQL inserts the executions of moved jobs' runs ($1 job,
// $2 scheduled time, $3 execution id, $4 publish time or NULL) from
// bucket $5's jobs partition, as fireSQL does for a plain firing; a
// jittered run waits in the outbox until its publish time (due_at, and
// next_attempt_at until it is dispatched); a buffered one ($7) until
// ReleaseBufferedExecutions ($8 is bufferedUntil); a run of a job with
// dependencies ($9) is inserted waiting, out of the outbox's reach as a
// buffered one, until the dependency resolver releases it. It returns
// the executions to dispatch: all but the buffered and waiting ones.
var policyRunsSQL = `
WITH r AS (
	SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::timestamptz[], $7::boolean[], $9::boolean[])
		AS r(job_id, sched, exec_id, due, buffered, waiting)
), ins AS (
	INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
		handler, payload, retry, timeout_ms, priority, created_at, fired_by, spec_id, next_attempt_at, due_at,
		buffered, ` + slotColumns + `)
	SELECT r.exec_id, j.id, j.bucket, j.namespace, j.name, r.sched, false, CASE WHEN r.waiting THEN 'waiting' ELSE 'queued' END,
		CASE WHEN j.spec_id IS NULL THEN j.handler END, CASE WHEN j.spec_id IS NULL THEN j.payload END,
		CASE WHEN j.spec_id IS NULL THEN j.retry END, CASE WHEN j.spec_id IS NULL THEN j.timeout_ms END,
		j.priority, ` + nowMS + `, $6, j.spec_id, CASE WHEN r.buffered OR r.waiting THEN $8 ELSE r.due END, r.due, r.buffered,
		` + slotValues("j.") + `
	FROM r JOIN jobs j ON j.bucket = $5 AND j.id = r.job_id
	ORDER BY r.sched
	ON CONFLICT DO NOTHING
	RETURNING *
)
SELECT ` + execCols("ins.") + ` FROM ins WHERE NOT ins.buffered AND ins.state = 'queued'`

// policyGroup is one bucket's firings that are not plain, as the arrays
// of its statements.
type policyGroup struct {
	firings []Firing
}

func (g *policyGroup) advanceArgs(b int) []any {
	var (
		ids, skipJobs         []uuid.UUID
		scheds, firsts, lasts []time.Time
		nexts, lastRuns       []*time.Time
		nruns, skipRuns       []int64
		reasons, details      []string
	)
	for _, f := range g.firings {
		ids, scheds, nexts = append(ids, f.JobID), append(scheds, ms(f.ScheduledFor)), append(nexts, msPtr(f.Next))
		nruns = append(nruns, int64(len(f.Runs)))
		var last *time.Time
		if n := len(f.Runs); n > 0 {
			t := ms(f.Runs[n-1].At)
			last = &t
		}
		lastRuns = append(lastRuns, last)
		for _, s := range f.Skips {
			skipJobs, firsts, lasts = append(skipJobs, f.JobID), append(firsts, ms(s.First)), append(lasts, ms(s.Last))
			skipRuns, reasons, details = append(skipRuns, s.Count), append(reasons, s.Reason), append(details, s.Detail)
		}
	}
	return []any{ids, scheds, nexts, nruns, lastRuns, b, skipJobs, firsts, lasts, skipRuns, reasons, details}
}

func (g *policyGroup) runArgs(b int, node string, won map[uuid.UUID]int64) ([]any, bool) {
	var (
		jobs, execs []uuid.UUID
		ats         []time.Time
		dues        []*time.Time
		buffered    []bool
		waiting     []bool
	)
	for _, f := range g.firings {
		if _, ok := won[f.JobID]; !ok {
			continue
		}
		for _, r := range f.Runs {
			at := ms(r.At)
			jobs, ats, execs = append(jobs, f.JobID), append(ats, at), append(execs, domain.ExecutionID(f.JobID, at))
			dues, buffered = append(dues, msPtr(r.Due)), append(buffered, r.Buffered && !f.Waits)
			waiting = append(waiting, f.Waits)
		}
	}
	return []any{jobs, ats, execs, dues, b, node, buffered, bufferedUntil, waiting}, len(jobs) > 0
}

// onPartition names bucket b's jobs partition in sql instead of jobs.
func onPartition(sql, b string) string {
	sql = strings.Replace(sql, "UPDATE jobs j SET", "UPDATE "+b+" j SET", 1)
	return strings.Replace(sql, "JOIN jobs j ON", "JOIN "+b+" j ON", 1)
}

// policyResult is what firePolicy did.
type policyResult struct {
	execs []*model.Execution
	// moved are the jobs whose compare-and-set won, runs their run counts
	// after it.
	moved []uuid.UUID
	runs  map[uuid.UUID]int64
	// cancelled are executions cancelled by an overlap policy.
	cancelled []uuid.UUID
	// skipped counts the scheduled times skipped, by reason.
	skipped map[string]int64
}

// firePolicy fires the firings that are not plain, bucket by bucket:
// their overlap policies are applied (one query), one round trip moves
// the jobs (and records their skips), the moved jobs' executions that an
// overlap policy cancels are cancelled, and a last round trip inserts
// the executions of the jobs moved.
func firePolicy(ctx context.Context, tx pgx.Tx, node string, owned []int, groups map[int]*policyGroup) (policyResult, error) {
	var res policyResult
	if len(groups) == 0 {
		return res, nil
	}
	if err := applyOverlap(ctx, tx, groups); err != nil {
		return res, err
	}
	won, err := advance(ctx, tx, owned, groups)
	if err != nil {
		return res, err
	}
	res.runs = won
	res.skipped = map[string]int64{}
	for _, g := range groups {
		for _, f := range g.firings {
			if _, ok := won[f.JobID]; ok {
				res.moved = append(res.moved, f.JobID)
				for _, k := range f.Skips {
					res.skipped[k.Reason] += k.Count
				}
			}
		}
	}
	if res.cancelled, err = cancelRunning(ctx, tx, groups, won); err != nil {
		return res, err
	}
	oldest, err := cancelOldest(ctx, tx, groups, won)
	if err != nil {
		return res, err
	}
	res.cancelled = append(res.cancelled, oldest...)
	if res.execs, err = insertRuns(ctx, tx, node, owned, groups, won); err != nil {
		return res, err
	}
	return res, insertChainRuns(ctx, tx, node, groups, won)
}

// advance runs the compare-and-set of the groups' firings, one statement
// per bucket in one round trip, and returns the jobs it moved with their
// run counts.
func advance(ctx context.Context, tx pgx.Tx, owned []int, groups map[int]*policyGroup) (map[uuid.UUID]int64, error) {
	batch := &pgx.Batch{}
	batch.Queue(firingSetting)
	var buckets []int
	for _, b := range owned {
		if g := groups[b]; g != nil {
			batch.Queue(onPartition(policyAdvanceSQL, jobsPartition(b)), g.advanceArgs(b)...)
			buckets = append(buckets, b)
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	won := map[uuid.UUID]int64{}
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	var (
		id   uuid.UUID
		runs int64
	)
	for range buckets {
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		if _, err := pgx.ForEachRow(rows, []any{&id, &runs}, func() error {
			won[id] = runs
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return won, br.Close()
}

// insertRuns inserts the runs of the moved jobs, one statement per
// bucket in one round trip, and returns the executions to dispatch.
func insertRuns(ctx context.Context, tx pgx.Tx, node string, owned []int, groups map[int]*policyGroup, won map[uuid.UUID]int64) ([]*model.Execution, error) {
	batch := &pgx.Batch{}
	queued := 0
	for _, b := range owned {
		if g := groups[b]; g != nil {
			if args, ok := g.runArgs(b, node, won); ok {
				batch.Queue(onPartition(policyRunsSQL, jobsPartition(b)), args...)
				queued++
			}
		}
	}
	if queued == 0 {
		return nil, nil
	}
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	var execs []*model.Execution
	for range queued {
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Execution, error) { return scanExecution(r) })
		if err != nil {
			return nil, err
		}
		execs = append(execs, got...)
	}
	return execs, br.Close()
}
