package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// mixHistory loads days of execution history with COPY, times the
// search and statistics API over it, and drops its oldest day while
// every-second jobs fire (docs/bench.md, "History at scale").
const mixHistory = "history"

// historyFlags are --mix history's own flags.
type historyFlags struct {
	HistoryDays       int  `name:"history-days" default:"30" help:"--mix history: whole days of history to load before today (today's part so far is loaded too)."`
	HistoryPerDay     int  `name:"history-per-day" default:"1000000" help:"--mix history: executions per day (a multiple of --history-jobs)."`
	HistoryJobs       int  `name:"history-jobs" default:"100000" help:"--mix history: jobs the executions belong to."`
	HistoryNamespaces int  `name:"history-namespaces" default:"20" help:"--mix history: namespaces the jobs are spread over."`
	HistoryRepeat     int  `name:"history-repeat" default:"10" help:"--mix history: calls of each query after its first."`
	HistoryFireJobs   int  `name:"history-fire-jobs" default:"100" help:"--mix history: every-second jobs firing while the oldest day is dropped (0: no drop)."`
	HistoryReload     bool `name:"history-reload" help:"--mix history: load the history again even if the database holds a set of the same shape."`
	HistoryQueries    bool `name:"history-queries" default:"true" negatable:"" help:"--mix history: time the search and statistics queries (--no-history-queries: skip them)."`

	historyDeleteFlags `embed:""`
}

// histNamespace is the namespace of job j of a history set.
func histNamespace(j, namespaces int) string { return fmt.Sprintf("hist-%02d", j%namespaces) }

// histJobID is job j's id: the same in every load, so a query names a
// job without reading the jobs back.
func histJobID(j int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "tockbench-history/%d", j))
}

// HistoryReport is what a --mix history run measured.
type HistoryReport struct {
	Data    HistoryData    `json:"data"`
	Queries []QueryTiming  `json:"queries"`
	Drop    *HistoryDrop   `json:"drop,omitempty"`
	Delete  *HistoryDelete `json:"delete,omitempty"`
	Window  *Report        `json:"window,omitempty"`
	Failed  []string       `json:"failed_targets"`
}

// HistoryData is the history set queried.
type HistoryData struct {
	Days       int       `json:"days"`
	PerDay     int       `json:"per_day"`
	Jobs       int       `json:"jobs"`
	Namespaces int       `json:"namespaces"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Rows       int64     `json:"rows"`
	// LoadSeconds is how long loading took; 0 when an earlier load was
	// reused.
	LoadSeconds float64 `json:"load_seconds"`
	// Bytes is the executions and attempts partitions' size on disk,
	// indexes included.
	Bytes int64 `json:"bytes"`
}

// QueryTiming is one API query's latency, in ms, over its calls: the
// first (cold), then --history-repeat more with other jobs or
// namespaces.
type QueryTiming struct {
	Name     string  `json:"name"`
	Example  string  `json:"example"`
	TargetMS float64 `json:"target_ms,omitempty"`
	FirstMS  float64 `json:"first_ms"`
	P50MS    float64 `json:"p50_ms"`
	MaxMS    float64 `json:"max_ms"`
	// Items is the first call's page length; Total its count (count=true).
	Items int    `json:"items"`
	Total *int64 `json:"total,omitempty"`
}

// HistoryDrop is the oldest day's drop, made while every-second jobs
// fired.
type HistoryDrop struct {
	Day     time.Time `json:"day"`
	Rows    int64     `json:"rows"`
	Seconds float64   `json:"seconds"`
	// FireLag is the fire lag of the every-second jobs' executions
	// scheduled from a second before the drop began to two after it
	// ended.
	FireLag Lag `json:"fire_lag_ms"`
	// Reloaded says the day was loaded again afterwards.
	Reloaded bool `json:"reloaded"`
}

// Targets of issue 11 for the history queries and the drop.
const (
	dropTargetSeconds = 1.0
	dropLagTargetMS   = 100.0
)

func (c *cli) validateHistory() error {
	switch {
	case c.HistoryDays < 2:
		return fmt.Errorf("--history-days %d: want at least 2", c.HistoryDays)
	case c.HistoryJobs < 1 || c.HistoryPerDay < c.HistoryJobs || c.HistoryPerDay%c.HistoryJobs != 0:
		return fmt.Errorf("--history-per-day %d: want a multiple of --history-jobs %d", c.HistoryPerDay, c.HistoryJobs)
	case c.HistoryNamespaces < 1 || c.HistoryNamespaces > c.HistoryJobs:
		return fmt.Errorf("--history-namespaces %d: want 1 to --history-jobs", c.HistoryNamespaces)
	case c.HistoryRepeat < 1:
		return fmt.Errorf("--history-repeat %d: want at least 1", c.HistoryRepeat)
	case c.HistoryFireJobs < 0:
		return fmt.Errorf("--history-fire-jobs %d: want 0 or more", c.HistoryFireJobs)
	case c.HistoryDelete && c.HistoryFireJobs == 0:
		return errors.New("--history-delete: want --history-fire-jobs above 0")
	case c.HistoryDeleteBatch < 0:
		return fmt.Errorf("--history-delete-batch %d: want 0 or more", c.HistoryDeleteBatch)
	case !c.HistoryDelete && (c.HistoryArchiveDir != "" || c.HistoryDeleteBatch != 0 || c.HistoryDeletePause != 0):
		return errors.New("--history-archive-dir, --history-delete-batch and --history-delete-pause go with --history-delete")
	}
	return nil
}

// mainHistory runs --mix history and returns the exit code: 1 when a
// target was missed.
func (c *cli) mainHistory(ctx context.Context) int {
	rep, err := c.runHistory(ctx)
	if err == nil {
		err = rep.write(os.Stdout, c.Output)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	if len(rep.Failed) > 0 {
		return 1
	}
	return 0
}

func (c *cli) runHistory(ctx context.Context) (*HistoryReport, error) {
	if err := c.validateHistory(); err != nil {
		return nil, err
	}
	b := c.newBench()
	b.Mix, b.Jobs = mixEverySecond, max(c.HistoryFireJobs, 1)
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.close()
	h := &history{bench: b}
	rep := &HistoryReport{}
	var err error
	if rep.Data, err = h.load(ctx); err != nil {
		return nil, err
	}
	if c.HistoryQueries {
		if rep.Queries, err = h.queries(ctx, rep.Data); err != nil {
			return nil, err
		}
	}
	for _, q := range rep.Queries {
		if q.TargetMS > 0 && q.MaxMS > q.TargetMS {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %.1f ms > %.0f ms", q.Name, q.MaxMS, q.TargetMS))
		}
	}
	if c.HistoryFireJobs > 0 && c.HistoryDelete {
		if rep.Delete, rep.Window, err = h.deleteWhileFiring(ctx, rep.Data); err != nil {
			return nil, err
		}
		if m := rep.Delete.FireLag.Max; m == nil || *m > dropLagTargetMS {
			rep.Failed = append(rep.Failed, fmt.Sprintf("fire lag during the delete: max %s ms > %.0f ms", fmtMS(m), dropLagTargetMS))
		}
	} else if c.HistoryFireJobs > 0 {
		if rep.Drop, rep.Window, err = h.dropWhileFiring(ctx, rep.Data); err != nil {
			return nil, err
		}
		if rep.Drop.Seconds > dropTargetSeconds {
			rep.Failed = append(rep.Failed, fmt.Sprintf("drop: %.2f s > %.0f s", rep.Drop.Seconds, dropTargetSeconds))
		}
		if m := rep.Drop.FireLag.Max; m == nil || *m > dropLagTargetMS {
			rep.Failed = append(rep.Failed, fmt.Sprintf("fire lag during the drop: max %s ms > %.0f ms", fmtMS(m), dropLagTargetMS))
		}
	}
	return rep, nil
}

// history is a --mix history run.
type history struct {
	*bench
}

// historyMarkerSQL creates the table that remembers the loaded set, so
// that a later run reuses it.
const historyMarkerSQL = `CREATE TABLE IF NOT EXISTS tockbench_history (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	days int NOT NULL, per_day int NOT NULL, jobs int NOT NULL, namespaces int NOT NULL,
	loaded_from timestamptz NOT NULL, loaded_to timestamptz NOT NULL, load_seconds float8 NOT NULL)`

// load makes sure the database holds the history set, loading it unless
// a set of the same shape is there with all its days.
func (h *history) load(ctx context.Context) (HistoryData, error) {
	d := HistoryData{Days: h.HistoryDays, PerDay: h.HistoryPerDay, Jobs: h.HistoryJobs, Namespaces: h.HistoryNamespaces}
	pool := h.st.Pool()
	if _, err := pool.Exec(ctx, historyMarkerSQL); err != nil {
		return d, err
	}
	var days, perDay, jobs, nss int
	err := pool.QueryRow(ctx, "SELECT days, per_day, jobs, namespaces, loaded_from, loaded_to FROM tockbench_history").
		Scan(&days, &perDay, &jobs, &nss, &d.From, &d.To)
	reuse := err == nil && !h.HistoryReload && days == d.Days && perDay == d.PerDay && jobs == d.Jobs && nss == d.Namespaces
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return d, err
	}
	if reuse {
		have, err := h.st.ListHistoryDays(ctx)
		if err != nil {
			return d, err
		}
		for day := d.From; day.Before(d.To.Truncate(24 * time.Hour)); day = day.AddDate(0, 0, 1) {
			if !slices.ContainsFunc(have, day.Equal) {
				h.say("the loaded history lacks %s: loading it again", day.Format(time.DateOnly))
				reuse = false
				break
			}
		}
	}
	if !reuse {
		start := time.Now()
		if err := h.loadAll(ctx, &d); err != nil {
			return d, err
		}
		d.LoadSeconds = time.Since(start).Seconds()
	} else {
		h.say("reusing the history loaded for %s to %s (--history-reload loads it again)",
			d.From.Format(time.DateOnly), d.To.Format(time.DateTime))
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM job_names WHERE namespace LIKE 'hist-%'").Scan(&n); err != nil {
			return d, err
		}
		if n != d.Jobs {
			if err := h.createJobs(ctx, &d); err != nil {
				return d, err
			}
		}
	}
	err = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM executions WHERE namespace LIKE 'hist-%' AND scheduled_for >= $1 AND scheduled_for < $2),
		(SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent IN ('executions'::regclass, 'attempts'::regclass))::bigint`, d.From, d.To).Scan(&d.Rows, &d.Bytes)
	return d, err
}

// loadAll loads the set: every day partition before today is replaced
// (so the database must be the bench's own), the whole days are loaded
// two at a time into tables of their own then attached, and today's part
// so far is copied into today's partition.
func (h *history) loadAll(ctx context.Context, d *HistoryData) error {
	pool := h.st.Pool()
	now := h.dbNow().Truncate(time.Second)
	today := now.Truncate(24 * time.Hour)
	d.From, d.To = today.AddDate(0, 0, -d.Days), now
	if _, err := pool.Exec(ctx, "DELETE FROM tockbench_history"); err != nil {
		return err
	}
	old, err := h.st.ListHistoryDays(ctx)
	if err != nil {
		return err
	}
	for _, day := range old {
		if day.Before(today) {
			if err := h.dropPartitions(ctx, day); err != nil {
				return err
			}
		}
	}
	if _, err := pool.Exec(ctx, "DELETE FROM executions WHERE namespace LIKE 'hist-%' AND scheduled_for >= $1", today); err != nil {
		return err
	}
	if err := h.createJobs(ctx, d); err != nil {
		return err
	}
	h.say("loading %d days of %d executions (%d jobs, %d namespaces) from %s, and today's part so far",
		d.Days, d.PerDay, d.Jobs, d.Namespaces, d.From.Format(time.DateOnly))
	gen, err := h.newGen(ctx, d)
	if err != nil {
		return err
	}
	days := make(chan time.Time)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for day := range days {
				if err := h.loadDay(ctx, gen, day, day.AddDate(0, 0, 1), true); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(days)
		for day := d.From; day.Before(today); day = day.AddDate(0, 0, 1) {
			select {
			case days <- day:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.st.EnsureHistoryPartitions(ctx, today); err != nil {
		return err
	}
	if err := h.loadDay(ctx, gen, today, now, false); err != nil {
		return err
	}
	if err := h.vacuum(ctx); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `INSERT INTO tockbench_history (days, per_day, jobs, namespaces, loaded_from, loaded_to, load_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, 0)`, d.Days, d.PerDay, d.Jobs, d.Namespaces, d.From, d.To)
	return err
}

// createJobs replaces the set's jobs: paused (they never fire), with the
// ids, names, namespaces and handlers of their executions.
func (h *history) createJobs(ctx context.Context, d *HistoryData) error {
	start := time.Now()
	_, err := h.st.Pool().Exec(ctx, `WITH gone AS (DELETE FROM jobs WHERE namespace LIKE 'hist-%' RETURNING id)
		DELETE FROM job_names WHERE job_id IN (SELECT id FROM gone)`)
	if err != nil {
		return fmt.Errorf("delete the history's jobs: %w", err)
	}
	svc, err := jobs.New(jobs.Config{Store: h.st})
	if err != nil {
		return err
	}
	gen := newHistGen(d.Jobs, d.Namespaces, d.PerDay, h.buckets)
	for off := 0; off < d.Jobs; off += createBatch {
		batch := make([]*model.Job, min(createBatch, d.Jobs-off))
		for k := range batch {
			j := off + k
			var hd domain.Handler
			if err := json.Unmarshal(gen.handlers[j], &hd); err != nil {
				return err
			}
			nj := jobs.NewJob{Namespace: gen.nss[j], Name: gen.names[j], Handler: hd, Payload: gen.payloads[j],
				Schedule: schedule.Spec{Cron: "0 0 */2 * * *"}, Paused: true}
			job, err := svc.Build(nj, func() (time.Time, error) { return h.dbNow(), nil })
			if err != nil {
				return fmt.Errorf("job %d: %w", j, err)
			}
			job.ID, job.Bucket = gen.ids[j], gen.buckets[j]
			batch[k] = job
		}
		if err := h.st.CopyJobs(ctx, batch); err != nil {
			return err
		}
	}
	h.say("created %d paused jobs in %s", d.Jobs, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// vacuum makes the loaded partitions all-visible, with statistics, as
// autovacuum leaves old days in production; then the parents get
// statistics. It runs once every load has committed: a VACUUM while
// another load's transaction is open cannot mark that load's pages
// all-visible.
func (h *history) vacuum(ctx context.Context) error {
	start := time.Now()
	for _, q := range []string{"VACUUM (ANALYZE) executions, attempts", "ANALYZE executions, attempts"} {
		if _, err := h.st.Pool().Exec(ctx, q); err != nil {
			return err
		}
	}
	h.say("vacuumed and analyzed in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// dropPartitions drops day's executions and attempts partitions.
func (h *history) dropPartitions(ctx context.Context, day time.Time) error {
	_, err := h.st.Pool().Exec(ctx, "DROP TABLE IF EXISTS "+store.DayPartition("executions", day)+", "+store.DayPartition("attempts", day))
	return err
}

// execCols are the executions columns a history row sets; the others
// keep their defaults.
var execCols = []string{"id", "job_id", "bucket", "namespace", "job_name", "scheduled_for", "manual", "state",
	"attempts", "handler", "payload", "dispatched_at", "started_at", "finished_at", "executor_id", "error", "output",
	"created_at", "fired_by", "dispatches", "attempt_executor", "attempt_started_at", "attempt_finished_at",
	"attempt_outcome", "backfill", "spec_id"}

var attemptCols = []string{"execution_id", "scheduled_for", "number", "executor_id", "started_at", "finished_at", "outcome", "error"}

// loadDay loads the executions of day scheduled before until. staged: the
// day's partitions are created as tables of their own, filled, checked
// and attached (the indexes are built once, at attach); otherwise the
// rows are copied into the parent tables (today's partition).
func (h *history) loadDay(ctx context.Context, gen *histGen, day, until time.Time, staged bool) error {
	start := time.Now()
	conn, err := h.st.Pool().Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	ex, at := "executions", "attempts"
	rng := fmt.Sprintf("FROM ('%s') TO ('%s')", day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339))
	if staged {
		ex, at = store.DayPartition("executions", day), store.DayPartition("attempts", day)
		for _, t := range [][2]string{{ex, "executions"}, {at, "attempts"}} {
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)", t[0], t[1])); err != nil {
				return err
			}
		}
	}
	t0 := time.Now()
	src := gen.day(day, until)
	n, err := conn.CopyFrom(ctx, pgx.Identifier{ex}, execCols, src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", day.Format(time.DateOnly), err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{at}, attemptCols, pgx.CopyFromRows(src.attempts)); err != nil {
		return fmt.Errorf("copy attempts of %s: %w", day.Format(time.DateOnly), err)
	}
	copied := time.Since(t0)
	t0 = time.Now()
	if staged {
		for _, t := range [][2]string{{ex, "executions"}, {at, "attempts"}} {
			for _, q := range []string{
				fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %[1]s_day CHECK (scheduled_for >= '%s' AND scheduled_for < '%s')",
					t[0], day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339)),
				fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES %s", t[1], t[0], rng),
				fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %[1]s_day", t[0]),
			} {
				if _, err := conn.Exec(ctx, q); err != nil {
					return fmt.Errorf("attach %s: %w", t[0], err)
				}
			}
		}
	}
	h.say("loaded %s: %d executions, %d attempts rows in %s (copy %s, indexes %s)", day.Format(time.DateOnly),
		n, len(src.attempts), time.Since(start).Round(100*time.Millisecond), copied.Round(100*time.Millisecond),
		time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// newGen is the set's generator, with the job specs of its jobs (which
// must exist): executions name their job's spec, as fired ones do,
// rather than carry their own handler and payload.
func (h *history) newGen(ctx context.Context, d *HistoryData) (*histGen, error) {
	gen := newHistGen(d.Jobs, d.Namespaces, d.PerDay, h.buckets)
	rows, err := h.st.Pool().Query(ctx, "SELECT id, spec_id FROM jobs WHERE namespace LIKE 'hist-%' AND spec_id IS NOT NULL")
	if err != nil {
		return nil, err
	}
	specs := map[uuid.UUID]uuid.UUID{}
	var id, spec uuid.UUID
	if _, err := pgx.ForEachRow(rows, []any{&id, &spec}, func() error { specs[id] = spec; return nil }); err != nil {
		return nil, err
	}
	gen.specs = make([]uuid.UUID, d.Jobs)
	for j, id := range gen.ids {
		var ok bool
		if gen.specs[j], ok = specs[id]; !ok {
			return nil, fmt.Errorf("job %d (%s) has no spec: load the history again (--history-reload)", j, id)
		}
	}
	return gen, nil
}

// histGen generates a history set's executions: each job runs
// perDay/jobs times a day at its own offsets; about 1 % of executions
// failed (one attempt) and 0.1 % are dead (three attempts, in the
// attempts table); the rest succeeded at the first attempt. A day's rows
// are the same in every load.
type histGen struct {
	jobs, namespaces, perJob int
	period                   time.Duration
	ids                      []uuid.UUID
	buckets                  []int
	order                    []int // jobs by offset in the period
	offsets                  []time.Duration
	handlers                 []json.RawMessage
	payloads                 []json.RawMessage
	// names, namespaces, executors and nodes of the jobs, made once.
	names, nss, executors, nodes []string
	// specs are the jobs' specs (newGen).
	specs []uuid.UUID
}

// histErrors are the failures' error texts.
var histErrors = []string{
	"http 500 Internal Server Error: upstream returned an error",
	"http 503 Service Unavailable",
	"dial tcp 10.0.3.7:443: connect: connection refused",
	"context deadline exceeded (timeout 30s)",
	"handler panicked: runtime error: invalid memory address or nil pointer dereference",
	"http 429 Too Many Requests: rate limited by the payments API",
	"lookup billing.internal: no such host",
}

func newHistGen(jobs, namespaces, perDay, buckets int) *histGen {
	g := &histGen{jobs: jobs, namespaces: namespaces, perJob: perDay / jobs}
	g.period = 24 * time.Hour / time.Duration(g.perJob)
	handlers := []string{
		`{"type": "custom", "name": "billing"}`, `{"type": "custom", "name": "reports"}`,
		`{"type": "custom", "name": "sync"}`, `{"type": "custom", "name": "email"}`,
		`{"type": "custom", "name": "billing"}`, `{"type": "custom", "name": "sync"}`,
		`{"type": "http", "url": "https://hooks.example.com/%d", "method": "POST"}`,
		`{"type": "http", "url": "https://api.example.com/jobs/%d", "method": "POST"}`,
		`{"type": "http", "url": "https://api.example.com/jobs/%d", "method": "GET"}`,
		`{"type": "nats", "subject": "work.%d"}`,
	}
	for j := range jobs {
		id := histJobID(j)
		g.ids = append(g.ids, id)
		g.buckets = append(g.buckets, domain.BucketOf(id, buckets))
		// Spread over the period, to the millisecond.
		g.offsets = append(g.offsets, time.Duration((uint64(j)*7_919_003)%uint64(g.period.Milliseconds()))*time.Millisecond)
		hs := handlers[j%len(handlers)]
		if strings.Contains(hs, "%d") {
			hs = fmt.Sprintf(hs, j)
		}
		g.handlers = append(g.handlers, json.RawMessage(hs))
		if j%2 == 0 {
			g.payloads = append(g.payloads, json.RawMessage(fmt.Sprintf(`{"customer": %d, "region": "eu-west-1"}`, j)))
		} else {
			g.payloads = append(g.payloads, nil)
		}
		g.order = append(g.order, j)
		g.names, g.nss = append(g.names, fmt.Sprintf("job-%06d", j)), append(g.nss, histNamespace(j, namespaces))
		g.executors = append(g.executors, fmt.Sprintf("executor-%d", j%4))
		g.nodes = append(g.nodes, fmt.Sprintf("node-%d", g.buckets[j]%3))
	}
	slices.SortStableFunc(g.order, func(a, b int) int { return int(g.offsets[a] - g.offsets[b]) })
	return g
}

// day is a COPY source of day's executions scheduled before until, in
// time order; it collects the dead executions' attempts rows.
func (g *histGen) day(day, until time.Time) *histDay {
	return &histDay{g: g, day: day, until: until, rnd: rand.New(rand.NewPCG(uint64(day.Unix()), 11)), i: -1}
}

type histDay struct {
	g          *histGen
	day, until time.Time
	rnd        *rand.Rand
	k, i       int
	row        []any
	attempts   [][]any
}

// Next moves to the next execution.
func (s *histDay) Next() bool {
	s.i++
	if s.i == s.g.jobs {
		s.i, s.k = 0, s.k+1
	}
	if s.k >= s.g.perJob {
		return false
	}
	j := s.g.order[s.i]
	t := s.day.Add(time.Duration(s.k)*s.g.period + s.g.offsets[j])
	if !t.Before(s.until) {
		return false
	}
	s.row = s.make(j, t)
	return true
}

func (s *histDay) make(j int, t time.Time) []any {
	g, r := s.g, s.rnd
	id := domain.ExecutionID(g.ids[j], t)
	dispatched := t.Add(time.Duration(2+r.IntN(14)) * time.Millisecond)
	started := dispatched.Add(time.Duration(1+r.IntN(10)) * time.Millisecond)
	dur := time.Duration(math.Min(600_000, math.Exp(math.Log(200)+r.NormFloat64()))) * time.Millisecond
	finished := started.Add(dur)
	executor := g.executors[j]
	state, attempts, errText, outcome := domain.ExecSucceeded, 1, "", "succeeded"
	var aExec, aOutcome any = executor, "succeeded"
	var aStarted, aFinished any = started, finished
	switch p := r.Float64(); {
	case p < 0.001:
		state, attempts, errText = domain.ExecDead, 3, histErrors[r.IntN(len(histErrors))]
		aExec, aOutcome, aStarted, aFinished = nil, nil, nil, nil
		for n := 1; n <= 3; n++ {
			s.attempts = append(s.attempts, []any{id, t, n, executor, started, finished, "failed", errText})
			started = finished.Add(time.Duration(n) * 10 * time.Second)
			finished = started.Add(dur)
		}
	case p < 0.011:
		state, errText, outcome = domain.ExecFailed, histErrors[r.IntN(len(histErrors))], "failed"
		aOutcome = outcome
	}
	return []any{id, g.ids[j], g.buckets[j], g.nss[j], g.names[j], t,
		j%500 == 0, string(state), attempts, nil, nil, dispatched, started, finished,
		executor, errText, "", t.Add(-500 * time.Millisecond), g.nodes[j], attempts,
		aExec, aStarted, aFinished, aOutcome, false, g.specs[j]}
}

// Values is the current execution's row.
func (s *histDay) Values() ([]any, error) { return s.row, nil }

// Err is nil: generating cannot fail.
func (s *histDay) Err() error { return nil }

// queryCase is one timed API query; path builds its i-th call.
type queryCase struct {
	name   string
	target float64
	path   func(i int) string
}

// queries times the history queries through the REST API.
func (h *history) queries(ctx context.Context, d HistoryData) ([]QueryTiming, error) {
	rfc := func(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339)) }
	day, week, month := rfc(d.To.Add(-24*time.Hour)), rfc(d.To.Add(-7*24*time.Hour)), rfc(d.From)
	until := rfc(d.To)
	job := func(i int) string { return histJobID((i * 7_919) % d.Jobs).String() }
	ns := func(i int) string { return histNamespace(i, d.Namespaces) }
	cases := []queryCase{
		{"failed or dead since 24 h, first page", 100, func(int) string {
			return "/v1/executions?state=failed,dead&since=" + day
		}},
		{"failed or dead since 24 h, count=true", 1000, func(int) string {
			return "/v1/executions?state=failed,dead&since=" + day + "&count=true"
		}},
		{"one job's executions, first page", 20, func(i int) string { return "/v1/executions?job_id=" + job(i) }},
		{"one job's executions, count=true", 1000, func(i int) string { return "/v1/executions?job_id=" + job(i) + "&count=true" }},
		{"stats of one namespace over 7 days", 1000, func(i int) string {
			return "/v1/stats?namespace=" + ns(i) + "&since=" + week + "&until=" + until
		}},
		{"one namespace since 24 h, first page", 0, func(i int) string {
			return "/v1/executions?namespace=" + ns(i) + "&since=" + day
		}},
		{"error contains \"timeout\" since 24 h, first page", 0, func(int) string {
			return "/v1/executions?error=timeout&since=" + day
		}},
		{"stats of one job over 30 days", 0, func(i int) string {
			return "/v1/stats?job_id=" + job(i) + "&since=" + month + "&until=" + until
		}},
		{"stats by job, one namespace, 24 h", 0, func(i int) string {
			return "/v1/stats?namespace=" + ns(i) + "&group_by=job&since=" + day + "&until=" + until
		}},
	}
	client := &http.Client{Timeout: time.Minute}
	var out []QueryTiming
	for _, c := range cases {
		qt := QueryTiming{Name: c.name, Example: c.path(0), TargetMS: c.target}
		var lat []float64
		for i := range h.HistoryRepeat + 1 {
			ms, items, total, err := h.get(ctx, client, c.path(i))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			if i == 0 {
				qt.FirstMS, qt.Items, qt.Total = ms, items, total
			}
			lat = append(lat, ms)
		}
		slices.Sort(lat)
		qt.P50MS, qt.MaxMS = lat[len(lat)/2], lat[len(lat)-1]
		h.say("%-48s first %7.1f ms  p50 %7.1f ms  max %7.1f ms", c.name, qt.FirstMS, qt.P50MS, qt.MaxMS)
		out = append(out, qt)
	}
	return out, nil
}

// get calls the API and returns the call's time in ms, the length of
// its items (or groups) and its total.
func (h *history) get(ctx context.Context, client *http.Client, path string) (float64, int, *int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(h.Server, "/")+path, nil)
	if err != nil {
		return 0, 0, nil, err
	}
	start := time.Now()
	setToken(req)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		return 0, 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	var page struct {
		Items  []json.RawMessage `json:"items"`
		Groups []json.RawMessage `json:"groups"`
		Total  *int64            `json:"total"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return ms, len(page.Items) + len(page.Groups), page.Total, nil
}

// dropWhileFiring runs --history-fire-jobs every-second jobs for the
// window (--duration) and, a third into it, applies retention so that it
// drops the oldest day; then loads that day again.
func (h *history) dropWhileFiring(ctx context.Context, d HistoryData) (*HistoryDrop, *Report, error) {
	drop := &HistoryDrop{Day: d.From}
	var dropFrom, dropTo time.Time
	h.duringWindow = func(ctx context.Context, from, to time.Time) error {
		if err := h.sleepUntil(ctx, from.Add(to.Sub(from)/3)); err != nil {
			return err
		}
		if err := h.st.Pool().QueryRow(ctx, "SELECT count(*) FROM "+store.DayPartition("executions", d.From)).Scan(&drop.Rows); err != nil {
			return err
		}
		now := h.dbNow()
		// Retention such that only the oldest day has ended that long ago.
		ret := now.Sub(d.From.AddDate(0, 0, 1))
		dropFrom = now
		start := time.Now()
		res, err := h.st.ApplyRetention(ctx, now, model.RetentionPolicy{Default: ret})
		drop.Seconds = time.Since(start).Seconds()
		dropTo = h.dbNow()
		if err != nil {
			return err
		}
		if len(res.Dropped) != 1 || !res.Dropped[0].Equal(d.From) {
			return fmt.Errorf("retention dropped %v, want %s alone", res.Dropped, d.From.Format(time.DateOnly))
		}
		h.say("dropped %s (%d executions) in %.3f s", d.From.Format(time.DateOnly), drop.Rows, drop.Seconds)
		// The runs due up to two seconds after the drop have fired (fire
		// lead is at most a second) before their lag is read.
		if err := h.sleepUntil(ctx, dropTo.Add(3*time.Second)); err != nil {
			return err
		}
		return h.st.Pool().QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l)
		FROM (SELECT extract(epoch FROM dispatched_at - scheduled_for)::float8 * 1000 AS l FROM executions
			WHERE namespace = $1 AND scheduled_for >= $2 AND scheduled_for < $3) x`,
			h.ns, dropFrom.Add(-time.Second), dropTo.Add(2*time.Second)).Scan(&drop.FireLag.P50, &drop.FireLag.P99, &drop.FireLag.Max)
	}
	rep, err := h.runRecurring(ctx)
	if err != nil {
		return nil, nil, err
	}
	drop.FireLag = drop.FireLag.rounded()
	gen, err := h.newGen(ctx, &d)
	if err != nil {
		return nil, nil, err
	}
	if err := h.loadDay(ctx, gen, d.From, d.From.AddDate(0, 0, 1), true); err != nil {
		return nil, nil, fmt.Errorf("load the dropped day again: %w", err)
	}
	if _, err := h.st.Pool().Exec(ctx, "VACUUM (ANALYZE) "+store.DayPartition("executions", d.From)); err != nil {
		return nil, nil, err
	}
	drop.Reloaded = true
	return drop, rep, nil
}

func (r *HistoryReport) write(w io.Writer, format string) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	p := func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }
	d := r.Data
	p("history: %d days × %d executions (%d jobs, %d namespaces), %s to %s: %d executions, %.1f GB on disk",
		d.Days, d.PerDay, d.Jobs, d.Namespaces, d.From.Format(time.DateOnly), d.To.Format(time.DateTime), d.Rows, float64(d.Bytes)/1e9)
	if d.LoadSeconds > 0 {
		p("loaded in %.0f s (%.0f executions/s)", d.LoadSeconds, float64(d.Rows)/d.LoadSeconds)
	}
	if len(r.Queries) > 0 {
		p("%-48s %9s %9s %9s %9s", "query (first call, then others)", "first ms", "p50 ms", "max ms", "target")
	}
	for _, q := range r.Queries {
		target := "-"
		if q.TargetMS > 0 {
			target = fmt.Sprintf("%.0f", q.TargetMS)
		}
		p("%-48s %9.1f %9.1f %9.1f %9s", q.Name, q.FirstMS, q.P50MS, q.MaxMS, target)
	}
	if r.Drop != nil {
		p("drop of %s (%d executions): %.3f s; fire lag meanwhile %s ms (p50/p99/max)",
			r.Drop.Day.Format(time.DateOnly), r.Drop.Rows, r.Drop.Seconds, r.Drop.FireLag)
	}
	if r.Delete != nil {
		r.Delete.write(p)
	}
	if r.Window != nil {
		p("every-second jobs over the window: fire lag %s ms, start lag %s ms, %d fired, %d zero-fired, %d multi-fired",
			r.Window.FireLag, r.Window.StartLag, r.Window.Fired, r.Window.ZeroFired, r.Window.MultiFired)
	}
	if len(r.Failed) == 0 {
		p("all targets met")
	}
	for _, f := range r.Failed {
		p("MISSED: %s", f)
	}
	return nil
}

// setToken sends $TOCK_TOKEN, if set, as the request's API key: a
// cluster started with tockd serve requires one (tockd dev does not).
func setToken(req *http.Request) {
	if k := os.Getenv("TOCK_TOKEN"); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
}
