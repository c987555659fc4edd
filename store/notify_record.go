package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// What an execution's change means for notification rules is decided in
// the transaction that records it (recordTx): an event is recorded once,
// so each change is seen once, by one recorder, whichever node it runs
// on. The decisions are rows of notification_events, unique by what they
// are about (DedupKey), which the deliverers (package notify) group and
// send.
//
// The cost on the hot path: a batch with successes deletes their jobs'
// rows of job_failures (a small table: only jobs with dead executions
// since their last success have one), and a batch whose executions are
// in a namespace with rules reads those rules from a cache refreshed
// every ruleCacheTTL. Labels are read only for the jobs a rule may be
// about: a dead or failed execution, a failing or recovered job, a late
// or slow one.

// NotifyChannel is the Postgres channel told when notification events
// are written: deliverers group and send them at once.
const NotifyChannel = "tock_notify"

// ruleCacheTTL is how long a recorder uses the rules it read: a rule
// created, changed or paused applies to executions recorded from then on,
// on every node within this time.
const ruleCacheTTL = 2 * time.Second

// ruleCache holds the active rules (not paused, with a channel), by
// namespace.
type ruleCache struct {
	mu   sync.Mutex
	at   time.Time
	byNS map[string][]*activeRule
}

// activeRule is a rule with its selector parsed and its events as a set.
type activeRule struct {
	*model.Rule
	sel   domain.Selector
	kinds map[string]bool
}

func (r *activeRule) matches(labels domain.Labels) bool { return r.sel.Matches(labels) }

func (c *ruleCache) invalidate() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// get returns the active rules by namespace, read through q when the
// cached ones are older than ruleCacheTTL.
func (c *ruleCache) get(ctx context.Context, q querier) (map[string][]*activeRule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < ruleCacheTTL {
		return c.byNS, nil
	}
	rows, err := q.Query(ctx, `SELECT `+ruleColumns+` FROM notification_rules
		WHERE NOT paused AND cardinality(channels) > 0`)
	if err != nil {
		return nil, err
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Rule, error) { return scanRule(r) })
	if err != nil {
		return nil, err
	}
	byNS := map[string][]*activeRule{}
	for _, r := range rs {
		sel, err := domain.ParseSelector(r.Selector)
		if err != nil {
			continue // the API refuses such a selector; one stored before a change of syntax chooses nothing
		}
		ar := &activeRule{Rule: r, sel: sel, kinds: map[string]bool{}}
		for _, k := range r.Events {
			ar.kinds[k] = true
		}
		byNS[r.Namespace] = append(byNS[r.Namespace], ar)
	}
	c.byNS, c.at = byNS, time.Now()
	return byNS, nil
}

// ListActiveRules returns the active rules of namespace ns (all namespaces
// when ns is ""), as recording sees them (at most ruleCacheTTL old).
func (s *Store) ListActiveRules(ctx context.Context, ns string) ([]*model.Rule, error) {
	byNS, err := s.rules.get(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: active rules: %w", err)
	}
	var out []*model.Rule
	for n, rs := range byNS {
		if ns == "" || n == ns {
			for _, r := range rs {
				out = append(out, r.Rule)
			}
		}
	}
	return out, nil
}

// jobRun is what a batch did to one job: its latest success, and its
// executions that went dead after it.
type jobRun struct {
	bucket    int
	namespace string
	success   *recExec
	deads     []*recExec
}

// streak is a job_failures row as a statement left it.
type streak struct {
	consecutive  int
	failingRules []uuid.UUID
}

// The statements on job_failures lock its rows in job id order
// (store/doc.go, Lock order), each on its own and the ones of a batch
// together: a batch with successes only ends their jobs' runs
// (endStreaksSQL), one with deaths only adds to theirs (addDeadsSQL),
// and one with both first takes every row it will change, in one pass
// in job id order (holdStreaksSQL), before it ends and starts runs on
// rows it holds. Ending the successes' runs and then adding the deaths
// as two statements, each in order, deadlocked: a batch with a success
// of job b and a death of job a against one with a success of a and a
// death of b.
const (
	// endStreaksSQL deletes the rows of jobs $1 (sorted), returning them
	// as they were. The row is matched with = ANY (ARRAY[u.job_id]), so
	// that the only plan is a nested loop over the array probing the
	// primary key, which deletes in the array's order (with job_id =
	// ANY ($1) the planner could choose a bitmap scan, whose order is the
	// table's; TestJobRowsLockedInOrder).
	endStreaksSQL = `DELETE FROM job_failures f USING unnest($1::uuid[]) AS u(job_id)
WHERE f.job_id = ANY (ARRAY[u.job_id])
RETURNING f.job_id, f.consecutive, f.failing_rules`
	// addDeadsSQL adds $2 deaths, the last at $3, to the runs of jobs
	// $1 (sorted; the rows are inserted or locked in that order).
	addDeadsSQL = `INSERT INTO job_failures AS f (job_id, consecutive, last_dead_at)
SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[])
ON CONFLICT (job_id) DO UPDATE SET consecutive = f.consecutive + excluded.consecutive,
	last_dead_at = GREATEST(f.last_dead_at, excluded.last_dead_at)
RETURNING job_id, consecutive, failing_rules`
	// holdStreaksSQL is addDeadsSQL for a batch with both successes and
	// deaths: jobs $1 (sorted), $2 deaths to add (0 for a job that
	// succeeded), the last at $3 (for a job that succeeded, its success's
	// end: a placeholder), $4 whether the job's row must be held even if
	// it has none (a job that died again after it succeeded). It inserts
	// or locks, in job id order, the rows of the jobs that died, those
	// that must be held and those that succeeded with a run under way,
	// changing only the first, and returns every row it took. The jobs
	// that succeeded are then left to endStreaksSQL, on rows held.
	holdStreaksSQL = `INSERT INTO job_failures AS f (job_id, consecutive, last_dead_at)
SELECT u.job_id, u.n, u.last FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::boolean[]) AS u(job_id, n, last, hold)
WHERE u.n > 0 OR u.hold OR EXISTS (SELECT FROM job_failures e WHERE e.job_id = u.job_id)
ON CONFLICT (job_id) DO UPDATE SET consecutive = f.consecutive + excluded.consecutive,
	last_dead_at = CASE WHEN excluded.consecutive > 0 THEN GREATEST(f.last_dead_at, excluded.last_dead_at)
		ELSE f.last_dead_at END
RETURNING job_id, consecutive, failing_rules`
	addFailingRulesSQL = `UPDATE job_failures f SET failing_rules = f.failing_rules || p.rules
FROM (SELECT j, array_agg(r) AS rules FROM unnest($1::uuid[], $2::uuid[]) AS x(j, r) GROUP BY j) p
WHERE f.job_id = p.j`
	candidateJobsSQL      = `SELECT id, name, labels FROM jobs WHERE bucket = ANY($1) AND id = ANY($2)`
	insertNotifyEventsSQL = `INSERT INTO notification_events
	(id, rule_id, namespace, kind, job_id, job_name, execution_id, handler, at, detail, dedup_key)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[], $7::uuid[],
	$8::text[], $9::timestamptz[], $10::jsonb[], $11::text[])
ON CONFLICT (dedup_key) DO NOTHING`
)

// notifyTx decides, in the recording transaction, what the batch's
// changes (byID, the executions ids) mean for notification rules, and
// writes it: the jobs' runs of dead executions (job_failures), and the
// events the active rules ask for.
func notifyTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, byID map[uuid.UUID]*recExec, rules *ruleCache) error {
	runs := map[uuid.UUID]*jobRun{}
	run := func(e *recExec) *jobRun {
		r := runs[e.jobID]
		if r == nil {
			r = &jobRun{bucket: e.bucket, namespace: e.namespace}
			runs[e.jobID] = r
		}
		return r
	}
	for _, id := range ids {
		e := byID[id]
		switch {
		case e == nil || !e.dirty:
		case e.succeeded && e.was.state != domain.ExecSucceeded:
			if r := run(e); r.success == nil || laterSuccess(e, r.success) {
				r.success = e
			}
		case e.state == domain.ExecDead && e.was.state != domain.ExecDead:
			r := run(e)
			r.deads = append(r.deads, e)
		}
	}
	ended, grown, err := writeStreaks(ctx, tx, runs)
	if err != nil {
		return err
	}
	byNS, err := rules.get(ctx, tx)
	if err != nil || len(byNS) == 0 {
		return err
	}
	d := decider{byNS: byNS, runs: runs, ended: ended, grown: grown, jobs: map[uuid.UUID]bool{}}
	for _, id := range ids {
		if e := byID[id]; e != nil && e.dirty && len(byNS[e.namespace]) > 0 {
			d.consider(e)
		}
	}
	for job, s := range ended {
		if len(s.failingRules) > 0 {
			d.jobs[job] = true
		}
	}
	for job, s := range grown {
		if d.crosses(job, s) {
			d.jobs[job] = true
		}
	}
	if len(d.jobs) == 0 {
		return nil
	}
	labels, names, err := candidateJobs(ctx, tx, d.jobs, runs, d.execs)
	if err != nil {
		return err
	}
	evs, failing := d.decide(labels, names)
	if len(evs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueNotifyEvents(b, evs)
	if len(failing) > 0 {
		var js, rs []uuid.UUID
		for _, p := range failing {
			js, rs = append(js, p[0]), append(rs, p[1])
		}
		b.Queue(addFailingRulesSQL, js, rs)
	}
	return tx.SendBatch(ctx, b).Close()
}

// writeStreaks ends the runs of dead executions of the jobs that
// succeeded and adds the batch's dead executions to theirs: what each
// row was when it ended (ended) and what it is now (grown).
func writeStreaks(ctx context.Context, tx pgx.Tx, runs map[uuid.UUID]*jobRun) (ended, grown map[uuid.UUID]streak, err error) {
	var okJobs, deadJobs []uuid.UUID
	for job, r := range runs {
		if r.success != nil {
			okJobs = append(okJobs, job)
			// Only deaths after the success start a new run.
			r.deads = slices.DeleteFunc(r.deads, func(e *recExec) bool { return !e.finishedAt.After(*r.success.finishedAt) })
		}
		if len(r.deads) > 0 {
			deadJobs = append(deadJobs, job)
		}
	}
	byBytes := func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(okJobs, byBytes) // rows locked in one order: concurrent batches never deadlock
	slices.SortFunc(deadJobs, byBytes)
	switch {
	case len(okJobs) == 0 && len(deadJobs) == 0:
		return nil, nil, nil
	case len(deadJobs) == 0:
		ended, err = queryStreaks(ctx, tx, endStreaksSQL, okJobs)
		return ended, nil, err
	case len(okJobs) == 0:
		grown, err = queryStreaks(ctx, tx, addDeadsSQL, deadRun(runs, deadJobs)...)
		return nil, grown, err
	}
	// Both: every row is taken in one pass in job id order, then the
	// successes' runs end and the jobs that died after their success
	// start new ones, on rows held.
	jobs := slices.SortedFunc(slices.Values(slices.Concat(okJobs, deadJobs)), byBytes)
	jobs = slices.Compact(jobs)
	n, last, hold := make([]int, len(jobs)), make([]time.Time, len(jobs)), make([]bool, len(jobs))
	var again []uuid.UUID // jobs that died after their success
	for i, job := range jobs {
		r := runs[job]
		switch {
		case r.success == nil:
			n[i], last[i] = deadCount(r)
		default:
			last[i], hold[i] = *r.success.finishedAt, len(r.deads) > 0
			if hold[i] {
				again = append(again, job)
			}
		}
	}
	held, err := queryStreaks(ctx, tx, holdStreaksSQL, jobs, n, last, hold)
	if err != nil {
		return nil, nil, err
	}
	grown = map[uuid.UUID]streak{}
	var end []uuid.UUID
	for _, job := range jobs {
		s, ok := held[job]
		switch {
		case !ok:
		case runs[job].success == nil:
			grown[job] = s
		default:
			end = append(end, job)
		}
	}
	b := &pgx.Batch{}
	if len(end) > 0 {
		b.Queue(endStreaksSQL, end)
	}
	if len(again) > 0 {
		b.Queue(addDeadsSQL, deadRun(runs, again)...)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if len(end) > 0 {
		if ended, err = readStreaks(br.Query()); err != nil {
			return nil, nil, err
		}
		// A row held only to be ended (the job had no run) is none.
		maps.DeleteFunc(ended, func(_ uuid.UUID, s streak) bool { return s.consecutive == 0 })
	}
	if len(again) > 0 {
		s, err := readStreaks(br.Query())
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(grown, s)
	}
	return ended, grown, br.Close()
}

// deadCount is how many executions of r died in the batch, and when the
// last one did.
func deadCount(r *jobRun) (int, time.Time) {
	last := *r.deads[0].finishedAt
	for _, e := range r.deads {
		last = maxTime(last, *e.finishedAt)
	}
	return len(r.deads), last
}

// deadRun is addDeadsSQL's arguments for jobs (sorted), whose runs
// (runs) have deaths.
func deadRun(runs map[uuid.UUID]*jobRun, jobs []uuid.UUID) []any {
	counts, lastDead := make([]int, len(jobs)), make([]time.Time, len(jobs))
	for i, job := range jobs {
		counts[i], lastDead[i] = deadCount(runs[job])
	}
	return []any{jobs, counts, lastDead}
}

// queryStreaks runs sql, a statement that returns job_failures rows, and
// reads them.
func queryStreaks(ctx context.Context, tx pgx.Tx, sql string, args ...any) (map[uuid.UUID]streak, error) {
	return readStreaks(tx.Query(ctx, sql, args...))
}

// readStreaks reads job_failures rows (job_id, consecutive,
// failing_rules).
func readStreaks(rows pgx.Rows, err error) (map[uuid.UUID]streak, error) {
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]streak{}
	var (
		job uuid.UUID
		s   streak
	)
	_, err = pgx.ForEachRow(rows, []any{&job, &s.consecutive, &s.failingRules}, func() error {
		out[job] = s
		return nil
	})
	return out, err
}

// decider decides a batch's notification events.
type decider struct {
	byNS  map[string][]*activeRule
	runs  map[uuid.UUID]*jobRun
	ended map[uuid.UUID]streak
	grown map[uuid.UUID]streak
	// jobs are those whose labels are needed; execs the executions a
	// rule of their namespace may be about.
	jobs  map[uuid.UUID]bool
	execs []*recExec
}

// transitions says what e's change is, as the rules' events name it.
func transitions(e *recExec) (dead, failed, started, final bool) {
	dead = e.state == domain.ExecDead && e.was.state != domain.ExecDead
	failed = e.state == domain.ExecFailed && (e.was.state != domain.ExecFailed || e.attempts > e.was.attempts)
	started = e.was.startedAt == nil && e.startedAt != nil
	final = dead || (e.succeeded && e.was.state != domain.ExecSucceeded)
	return
}

// lateBy and took are how late e started and how long its last attempt
// ran.
func lateBy(e *recExec) time.Duration { return e.startedAt.Sub(e.sched) }

func took(e *recExec) time.Duration {
	a := e.att[e.maxAttempt()]
	if a == nil || a.startedAt == nil || a.finishedAt == nil {
		return 0
	}
	return a.finishedAt.Sub(*a.startedAt)
}

// wants says whether rule r asks for a change of e, before labels.
func wants(r *activeRule, e *recExec) bool {
	dead, failed, started, final := transitions(e)
	return (dead && r.kinds[domain.NotifyExecutionDead]) ||
		(failed && r.kinds[domain.NotifyExecutionFailed]) ||
		(started && r.kinds[domain.NotifyExecutionLate] && lateBy(e) > r.LateAfter) ||
		(final && r.kinds[domain.NotifyExecutionSlow] && took(e) > r.SlowAfter)
}

// consider notes e when a rule of its namespace may ask for its change.
func (d *decider) consider(e *recExec) {
	for _, r := range d.byNS[e.namespace] {
		if wants(r, e) {
			d.jobs[e.jobID] = true
			d.execs = append(d.execs, e)
			return
		}
	}
}

// crosses says whether job's run of dead executions, now s, reached a
// rule's failing_after with this batch.
func (d *decider) crosses(job uuid.UUID, s streak) bool {
	r := d.runs[job]
	return slices.ContainsFunc(d.byNS[r.namespace], func(rule *activeRule) bool { return failingNow(rule, s, len(r.deads)) })
}

// failingNow says whether rule r says job.failing of a job whose run of
// dead executions is now s, added grew it: it asks for the event, the run
// reached its failing_after with these deaths, and it has not said so
// about this run yet.
func failingNow(r *activeRule, s streak, added int) bool {
	return r.kinds[domain.NotifyJobFailing] && s.consecutive-added < r.FailingAfter &&
		s.consecutive >= r.FailingAfter && !slices.Contains(s.failingRules, r.ID)
}

// candidateJobs reads the labels and names of jobs.
func candidateJobs(ctx context.Context, tx pgx.Tx, jobs map[uuid.UUID]bool, runs map[uuid.UUID]*jobRun, execs []*recExec,
) (map[uuid.UUID]domain.Labels, map[uuid.UUID]string, error) {
	bucketOf := map[uuid.UUID]int{}
	for job, r := range runs {
		bucketOf[job] = r.bucket
	}
	for _, e := range execs {
		bucketOf[e.jobID] = e.bucket
	}
	var (
		buckets []int
		ids     []uuid.UUID
	)
	seen := map[int]bool{}
	for job := range jobs {
		ids = append(ids, job)
		if b := bucketOf[job]; !seen[b] {
			seen[b] = true
			buckets = append(buckets, b)
		}
	}
	rows, err := tx.Query(ctx, candidateJobsSQL, buckets, ids)
	if err != nil {
		return nil, nil, err
	}
	labels, names := map[uuid.UUID]domain.Labels{}, map[uuid.UUID]string{}
	var (
		id   uuid.UUID
		name string
		l    domain.Labels
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &name, &l}, func() error {
		labels[id], names[id] = l, name
		l = nil
		return nil
	})
	return labels, names, err
}

// decide makes the events of the considered changes, for the rules whose
// selectors choose their jobs, and lists the (job, rule) pairs that said
// job.failing.
func (d *decider) decide(labels map[uuid.UUID]domain.Labels, names map[uuid.UUID]string) ([]model.NotifyEvent, [][2]uuid.UUID) {
	var (
		evs     []model.NotifyEvent
		failing [][2]uuid.UUID
	)
	add := func(r *activeRule, kind string, job uuid.UUID, x *recExec, at time.Time, key string, detail map[string]any) {
		ev := model.NotifyEvent{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: r.Namespace, Kind: kind,
			JobID: &job, JobName: names[job], At: at.UTC(), DedupKey: r.ID.String() + "/" + kind + "/" + key}
		if x != nil {
			ev.ExecutionID = &x.id
		}
		ev.Detail, _ = json.Marshal(detail)
		evs = append(evs, ev)
	}
	for _, e := range d.execs {
		l, ok := labels[e.jobID]
		if !ok {
			continue // deleted meanwhile
		}
		dead, failed, started, final := transitions(e)
		for _, r := range d.byNS[e.namespace] {
			if !r.matches(l) {
				continue
			}
			key := e.id.String()
			if dead && r.kinds[domain.NotifyExecutionDead] {
				add(r, domain.NotifyExecutionDead, e.jobID, e, *e.finishedAt, key,
					map[string]any{"error": e.errText, "attempts": e.attempts, "scheduled_for": e.sched})
			}
			if failed && r.kinds[domain.NotifyExecutionFailed] {
				add(r, domain.NotifyExecutionFailed, e.jobID, e, timeOr(e.finishedAt, e.sched), fmt.Sprintf("%s/%d", key, e.attempts),
					map[string]any{"error": e.errText, "attempt": e.attempts, "retry_at": e.nextAttempt, "scheduled_for": e.sched})
			}
			if started && r.kinds[domain.NotifyExecutionLate] && lateBy(e) > r.LateAfter {
				add(r, domain.NotifyExecutionLate, e.jobID, e, *e.startedAt, key,
					map[string]any{"scheduled_for": e.sched, "started_at": e.startedAt, "late_ms": lateBy(e).Milliseconds(),
						"threshold_ms": r.LateAfter.Milliseconds()})
			}
			if final && r.kinds[domain.NotifyExecutionSlow] && took(e) > r.SlowAfter {
				add(r, domain.NotifyExecutionSlow, e.jobID, e, timeOr(e.finishedAt, e.sched), key,
					map[string]any{"took_ms": took(e).Milliseconds(), "threshold_ms": r.SlowAfter.Milliseconds(),
						"state": e.state, "scheduled_for": e.sched})
			}
		}
	}
	for job, s := range d.ended {
		run := d.runs[job]
		for _, r := range d.byNS[run.namespace] {
			if slices.Contains(s.failingRules, r.ID) && r.kinds[domain.NotifyJobRecovered] {
				ok := run.success
				add(r, domain.NotifyJobRecovered, job, ok, *ok.finishedAt, ok.id.String(),
					map[string]any{"after_dead": s.consecutive})
			}
		}
	}
	for job, s := range d.grown {
		run := d.runs[job]
		l, ok := labels[job]
		if !ok {
			continue
		}
		last := run.deads[0]
		for _, e := range run.deads {
			if e.finishedAt.After(*last.finishedAt) {
				last = e
			}
		}
		for _, r := range d.byNS[run.namespace] {
			if failingNow(r, s, len(run.deads)) && r.matches(l) {
				add(r, domain.NotifyJobFailing, job, last, *last.finishedAt, last.id.String(),
					map[string]any{"consecutive_dead": s.consecutive, "error": last.errText})
				failing = append(failing, [2]uuid.UUID{job, r.ID})
			}
		}
	}
	return evs, failing
}

func timeOr(t *time.Time, or time.Time) time.Time {
	if t == nil {
		return or
	}
	return *t
}

// queueNotifyEvents queues the insert of evs (those already decided are
// left alone) and the notification that wakes the deliverers.
func queueNotifyEvents(b *pgx.Batch, evs []model.NotifyEvent) {
	n := len(evs)
	var (
		ids, rules         = make([]uuid.UUID, n), make([]uuid.UUID, n)
		nss, kinds, jnames = make([]string, n), make([]string, n), make([]string, n)
		handlers, keys     = make([]*string, n), make([]string, n)
		jobs, execs        = make([]*uuid.UUID, n), make([]*uuid.UUID, n)
		ats                = make([]time.Time, n)
		details            = make([]json.RawMessage, n)
	)
	for i, e := range evs {
		ids[i], rules[i], nss[i], kinds[i], jnames[i] = e.ID, e.RuleID, e.Namespace, e.Kind, e.JobName
		jobs[i], execs[i], ats[i], keys[i] = e.JobID, e.ExecutionID, e.At, e.DedupKey
		if e.Handler != "" {
			h := e.Handler
			handlers[i] = &h
		}
		details[i] = e.Detail
		if len(details[i]) == 0 {
			details[i] = json.RawMessage("{}")
		}
	}
	b.Queue(insertNotifyEventsSQL, ids, rules, nss, kinds, jobs, jnames, execs, handlers, ats, details, keys)
	b.Queue(`SELECT pg_notify('` + NotifyChannel + `', '')`)
}

// CreateNotifyEvents writes events decided outside recording (job.silent,
// handler.open and handler.close): those whose DedupKey is already
// written are left alone. It returns how many were new.
func (s *Store) CreateNotifyEvents(ctx context.Context, evs []model.NotifyEvent) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	queueNotifyEvents(b, evs)
	br := s.pool.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil {
		err = br.Close()
	} else {
		_ = br.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("store: add %d notification events: %w", len(evs), err)
	}
	return int(tag.RowsAffected()), nil
}
