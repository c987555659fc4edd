package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// The recording fast path. Nearly every execution is recorded once: it
// was queued, its first attempt ran and succeeded, and the executor
// reported that in one succeeded event (a quick attempt's start travels
// in its end event), or in a started and a succeeded event that land in
// the same batch. For those, recordTx skips the lock read (lockExecsSQL,
// which writes a row lock on each execution, the row the write-back then
// rewrites) and writes each execution's final row with one conditional
// UPDATE per day (fastRecordSQL), whose WHERE clause is the state in
// which rules.go's apply would write exactly those columns. An execution
// the statement does not return (unknown, running, retried, cancelled
// meanwhile, recorded already: anything else) goes through the lock read
// and the rules, in the same transaction, with all of its events: the
// rules stay the one definition of what an event does, and the fast path
// is only a shortcut to a result they would give
// (TestRecordFastPathMatchesRules holds it to them, column by column).
//
// Lock order. Concurrent recorders must not deadlock (Postgres would
// abort one of them after deadlock_timeout, and its batch would be
// retried seconds later), so every transaction that records events waits
// for an execution's row lock only while every execution it holds has a
// smaller id (store/doc.go, Lock order):
//
//   - The fast statements run first, one per day in day order, each a
//     nested loop over its sorted id array that probes (and so updates
//     and locks) one row per element: rows are locked in id order, and
//     ids sort by scheduled time, so days in day order continue it. That
//     plan is the only one the statement allows (TestFastRecordPlan): it
//     names the day's partition (so no restriction on scheduled_for is
//     needed to prune partitions, which another index could serve), the
//     row's id is matched with = ANY (ARRAY[u.id]), which an index probe
//     serves but no hash or merge join can use, and the row's other
//     conditions are not indexable. Any other plan would have to scan
//     the partition, which enable_seqscan = off rules out while the probe
//     exists. (With a plain x.id = u.id, a partition of a few hundred
//     rows was scanned in index order and the array rescanned for each
//     row: 13 ms for 200 events instead of 3.)
//   - The lock read of the other executions then follows in id order, as
//     always, in two statements: those below the greatest id the fast
//     statements were given (any row up to it may be held already) are
//     locked with NOWAIT, the rest waiting as usual. When another
//     transaction holds one of the first, RecordAttemptEvents records the
//     batch again from the start without the fast path (errFastRedo),
//     whose one lock read takes every row in id order. A wait bounded by
//     lock_timeout instead (100 ms, below deadlock_timeout) is not
//     enough: the wait closes a cycle whose other members may have
//     waited for most of deadlock_timeout already, and the first of them
//     to reach it aborts as a deadlock (TestNoDeadlocks found such cycles
//     under load, of two and three recorders).
//
// The last successes and the notification streaks are locked after the
// executions, in job id order. And tables: a statement that names a
// partition locks only the partition, so the fast batch locks the
// parent executions first (ROW EXCLUSIVE, as an update through it
// would), keeping the order of dailyTables (partitions.go): creating a
// day's partitions locks the parent, then every partition.

// fastRecordSQL is the fast statement for the executions of one day's
// partition (%s): $1 ids (sorted, once each), $2 their scheduled times,
// $3 their first event's dispatch time (its published_at, to the
// millisecond, or NULL), $4 the attempts' starts, $5 their ends, $6 the
// executors that reported the ends, $7 the outputs, $8 the attempts'
// executors, $9 their errors when not empty. It returns the rows it
// changed.
//
// The columns are what end (and start, for a started event first) in
// rules.go write for an execution in that state: dispatched_at as apply
// makes it (the message's publish time if before now, else now) unless
// set already; attempt 1 inline, its error and output NULL when they are
// the execution's own (a success's error is empty, its output the
// attempt's). The row's state is compared with IS NOT DISTINCT FROM,
// which no index serves (see Lock order); of those columns only
// started_at and attempt_outcome may be NULL, and they must be.
const fastRecordSQL = `
UPDATE %s x SET
	state = 'succeeded', attempts = 1,
	dispatched_at = COALESCE(x.dispatched_at, CASE WHEN u.published < ` + nowMS + ` THEN u.published ELSE ` + nowMS + ` END),
	next_attempt_at = NULL, started_at = u.started, finished_at = u.finished,
	executor_id = u.executor_id, error = '', output = u.output,
	attempt_executor = u.a_executor, attempt_started_at = u.started, attempt_heartbeat_at = NULL,
	attempt_finished_at = u.finished, attempt_outcome = 'succeeded', attempt_error = u.a_error, attempt_output = NULL
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[],
	$6::text[], $7::text[], $8::text[], $9::text[])
	AS u(id, sched, published, started, finished, executor_id, output, a_executor, a_error)
WHERE x.id = ANY (ARRAY[u.id])
	AND (x.scheduled_for, x.state, x.attempts, x.dispatches, x.started_at, x.attempt_outcome)
		IS NOT DISTINCT FROM (u.sched, 'queued', 0, 0, NULL, NULL)
RETURNING x.id, x.job_id, x.namespace, x.bucket, x.dispatched_at`

// fastSettings make the fast statements' plan (see Lock order) generic,
// made once per connection and day: it is the only plan the statement
// allows whatever the array's size or the partition's statistics, so
// planning it for every batch, as recordSettings do for the statements
// that need it, would buy nothing. fastReset, sent before the statements
// that follow, puts keyedPlanSettings and recordSettings in place.
var (
	fastSettings = append([]string{"SET LOCAL plan_cache_mode = force_generic_plan", "SET LOCAL enable_nestloop = on"},
		keyedPlanSettings...)
	fastReset = append(append([]string{}, keyedPlanSettings...), recordSettings...)
)

// lockParentSQL locks the parent of the partitions the fast statements
// name (see Lock order).
const lockParentSQL = "LOCK TABLE ONLY executions IN ROW EXCLUSIVE MODE"

// errFastRedo says a batch is to be recorded again, from the start,
// without the fast path: a row the lock read after the fast statements
// could not wait for was held by another transaction, or a day's
// partition was not there.
var errFastRedo = errors.New("record the batch again without the fast path")

// fastRows holds the fast statements' arrays, one entry per execution,
// in id order, and where each day's executions start in them.
type fastRows struct {
	id                        []uuid.UUID
	sched                     []time.Time
	published, started        []*time.Time
	finished                  []time.Time
	executorID, output, aExec []string
	aError                    []*string
	days                      []fastDay
}

// fastDay is a day's executions, [from, to) in fastRows' arrays.
type fastDay struct {
	day      time.Time
	from, to int
}

// fastCandidates lists the executions of ids (in id order) whose events
// in evs[queued] the fast path may record: exactly a succeeded event, or
// a started then a succeeded event, all of attempt 1 and dispatch 0. An
// execution with any other event in the batch is not one. It returns nil
// if there is none.
func fastCandidates(evs []model.AttemptEvent, queued []int, ids []uuid.UUID) *fastRows {
	// An execution's first two events, by index in evs; more marks a
	// third.
	type group struct {
		first, second int
		more          bool
	}
	groups := make(map[uuid.UUID]*group, len(ids))
	for _, i := range queued {
		switch g := groups[evs[i].ID]; {
		case g == nil:
			groups[evs[i].ID] = &group{first: i, second: -1}
		case g.second < 0:
			g.second = i
		default:
			g.more = true
		}
	}
	of := func(ev *model.AttemptEvent, t domain.EventType) bool {
		return ev.Type == t && ev.Attempt == 1 && ev.Dispatch == 0
	}
	var r fastRows
	for _, id := range ids {
		g := groups[id]
		start, end := (*model.AttemptEvent)(nil), &evs[g.first]
		if g.second >= 0 {
			start, end = end, &evs[g.second]
		}
		if g.more || (start != nil && !of(start, domain.EventStarted)) || !of(end, domain.EventSucceeded) {
			continue
		}
		r.add(id, start, end)
	}
	if len(r.id) == 0 {
		return nil
	}
	// ids sort by scheduled time, so each day's are together.
	for i, t := range r.sched {
		day := t.Truncate(24 * time.Hour)
		if n := len(r.days); n == 0 || !r.days[n-1].day.Equal(day) {
			r.days = append(r.days, fastDay{day: day, from: i})
		}
		r.days[len(r.days)-1].to = i + 1
	}
	return &r
}

// add appends execution id, recorded by end (a success), after start (a
// started event, or nil): the values rules.go's start and end give.
func (r *fastRows) add(id uuid.UUID, start, end *model.AttemptEvent) {
	first, started, aExec := end, msPtr(end.StartedAt), end.Executor
	if start != nil {
		first, started = start, least(tp(ms(start.At)), started)
		if start.Executor != "" {
			aExec = start.Executor
		}
	}
	// The dispatch time is the first event's (apply): its message's
	// publish time, to the millisecond, if that is before now, which the
	// statement decides (a time is before a whole millisecond exactly
	// when its millisecond is).
	var published *time.Time
	if p := first.PublishedAt; p != nil && !p.IsZero() {
		published = tp(ms(*p))
	}
	var aErr *string
	if e := cleanText(end.Error); e != "" {
		aErr = &e
	}
	r.id, r.sched = append(r.id, id), append(r.sched, domain.ExecutionTime(id))
	r.published, r.started, r.finished = append(r.published, published), append(r.started, started), append(r.finished, ms(end.At))
	r.executorID, r.output, r.aExec = append(r.executorID, end.Executor), append(r.output, cleanText(end.Output)), append(r.aExec, aExec)
	r.aError = append(r.aError, aErr)
}

// recordFast runs the fast statements for r's days that have a
// partition, after fastSettings, and adds the executions they recorded to
// byID, as recExecs that the write-back and notifyTx see exactly as the
// rules would have left them (recorded: the row is written already). It
// returns the greatest id it gave the statements (the zero id if none):
// they may have locked any row up to it, even one they did not change
// (an update that waited for a row another transaction changed keeps
// its lock when the changed row no longer matches).
func recordFast(ctx context.Context, tx pgx.Tx, r *fastRows, parts *dayPartitions, byID map[uuid.UUID]*recExec) (uuid.UUID, error) {
	days, err := parts.have(ctx, tx, r.days)
	if err != nil || len(days) == 0 {
		return uuid.UUID{}, err
	}
	b := &pgx.Batch{}
	queueSettings(b, fastSettings)
	b.Queue(lockParentSQL)
	for _, d := range days {
		b.Queue(fmt.Sprintf(fastRecordSQL, pgx.Identifier{DayPartition("executions", d.day)}.Sanitize()),
			r.id[d.from:d.to], r.sched[d.from:d.to], r.published[d.from:d.to], r.started[d.from:d.to],
			r.finished[d.from:d.to], r.executorID[d.from:d.to], r.output[d.from:d.to], r.aExec[d.from:d.to],
			r.aError[d.from:d.to])
	}
	top := r.id[days[len(days)-1].to-1]
	err = readFast(tx.SendBatch(ctx, b), r, days, byID)
	if pgCode(err) == "42P01" { // undefined_table: a partition dropped since have looked
		for _, d := range days {
			parts.forget(d.day)
		}
		return top, fmt.Errorf("%w: %w", errFastRedo, err)
	}
	return top, err
}

// readFast reads the results of recordFast's batch.
func readFast(br pgx.BatchResults, r *fastRows, days []fastDay, byID map[uuid.UUID]*recExec) error {
	defer br.Close()
	for range len(fastSettings) + 1 { // and lockParentSQL
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	var (
		id, job    uuid.UUID
		ns         string
		bucket     int
		dispatched *time.Time
	)
	for _, d := range days {
		index := make(map[uuid.UUID]int, d.to-d.from)
		for i := d.from; i < d.to; i++ {
			index[r.id[i]] = i
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{rawUUID(&id), rawUUID(&job), &ns, &bucket, &dispatched}, func() error {
			i, ok := index[id]
			if !ok {
				return fmt.Errorf("the fast path recorded execution %s, which it was not given", id)
			}
			byID[id] = r.recExec(i, job, ns, bucket, utcPtr(dispatched))
			return nil
		})
		if err != nil {
			return err
		}
	}
	return br.Close()
}

// recExec is execution i as the fast statement left it, and as it was
// before (queued, no attempt, not started).
func (r *fastRows) recExec(i int, job uuid.UUID, ns string, bucket int, dispatched *time.Time) *recExec {
	finished := r.finished[i]
	e := &recExec{id: r.id[i], jobID: job, namespace: ns, sched: r.sched[i], bucket: bucket,
		state: domain.ExecSucceeded, attempts: 1, dispatchedAt: dispatched, startedAt: r.started[i], finishedAt: &finished,
		executorID: r.executorID[i], output: r.output[i], inline: true, dirty: true, succeeded: true, recorded: true}
	a := &recAttempt{executor: r.aExec[i], startedAt: r.started[i], finishedAt: &finished,
		outcome: domain.OutcomeSucceeded, output: r.output[i]}
	if r.aError[i] != nil {
		a.errText = *r.aError[i]
	}
	e.att = map[int]*recAttempt{1: a}
	e.dirtyAtt = map[int]bool{1: true}
	e.was.state = domain.ExecQueued
	return e
}

// dayPartitions remembers which days have an executions partition, for
// the fast path, which names it. A day without one (its executions, if
// any, are in the DEFAULT partition) is asked about again after
// dayRecheck; one dropped since is forgotten when a statement misses it.
type dayPartitions struct {
	mu    sync.Mutex
	known map[time.Time]dayPartition
}

type dayPartition struct {
	exists bool
	at     time.Time
}

const dayRecheck = time.Minute

// dayPartitionsSQL says which of the days ($1, named $2) have an
// executions partition (not only a table of that name).
const dayPartitionsSQL = `
SELECT d.day, EXISTS (SELECT FROM pg_inherits i
	WHERE i.inhparent = 'executions'::regclass AND i.inhrelid = to_regclass(d.name))
FROM unnest($1::timestamptz[], $2::text[]) AS d(day, name)`

// have returns those of days whose partition exists, asking q about the
// days it does not know.
func (c *dayPartitions) have(ctx context.Context, q querier, days []fastDay) ([]fastDay, error) {
	c.mu.Lock()
	if c.known == nil {
		c.known = map[time.Time]dayPartition{}
	}
	var ask []time.Time
	var names []string
	for _, d := range days {
		if p, ok := c.known[d.day]; !ok || (!p.exists && time.Since(p.at) > dayRecheck) {
			ask, names = append(ask, d.day), append(names, DayPartition("executions", d.day))
		}
	}
	c.mu.Unlock()
	if len(ask) > 0 {
		rows, err := q.Query(ctx, dayPartitionsSQL, ask, names)
		if err != nil {
			return nil, err
		}
		var (
			day    time.Time
			exists bool
		)
		got := map[time.Time]bool{}
		if _, err := pgx.ForEachRow(rows, []any{&day, &exists}, func() error {
			got[day.UTC()] = exists
			return nil
		}); err != nil {
			return nil, err
		}
		c.mu.Lock()
		for d, exists := range got {
			c.known[d] = dayPartition{exists: exists, at: time.Now()}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := days[:0:0]
	for _, d := range days {
		if c.known[d.day].exists {
			out = append(out, d)
		}
	}
	return out, nil
}

// forget drops what c knows of day.
func (c *dayPartitions) forget(day time.Time) {
	c.mu.Lock()
	delete(c.known, day)
	c.mu.Unlock()
}

// queueSettings queues settings (SET LOCAL statements) in b, each a
// statement of its own.
func queueSettings(b *pgx.Batch, settings []string) {
	for _, s := range settings {
		b.Queue(s)
	}
}

// pgCode is err's SQLSTATE, if Postgres sent it.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
