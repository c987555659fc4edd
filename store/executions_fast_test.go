package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Tests of the recording fast path (executions_fast.go).

// fastCase is an execution's story for TestRecordFastPathMatchesRules:
// what happened to it before (prep: events recorded by the rules;
// change: anything else), and its events in the batch.
type fastCase struct {
	name string
	// job names the job: cases with the same one share it.
	job string
	// off: the execution is scheduled off earlier than the others' times
	// (a minute apart, before the test's base time).
	off time.Duration
	// fast: the fast path records it; missing: there is no such execution.
	fast, missing bool
	prep          func(x uuid.UUID, at time.Time) []model.AttemptEvent
	change        func(t *testing.T, s *Store, x uuid.UUID, at time.Time)
	batch         func(x uuid.UUID, at time.Time) []model.AttemptEvent
}

// succ is the usual report of a quick attempt: its start in its end.
func succ(x uuid.UUID, at time.Time) model.AttemptEvent {
	return model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventSucceeded, Output: "ok",
		At: at.Add(1500*time.Millisecond + 123456*time.Nanosecond), StartedAt: ptr(at.Add(100*time.Millisecond + 789*time.Nanosecond)),
		PublishedAt: ptr(at.Add(50*time.Millisecond + time.Nanosecond))}
}

func with(ev model.AttemptEvent, change func(ev *model.AttemptEvent)) model.AttemptEvent {
	change(&ev)
	return ev
}

func evs(e ...model.AttemptEvent) []model.AttemptEvent { return e }

func started(x uuid.UUID, at time.Time, executor string) model.AttemptEvent {
	return model.AttemptEvent{ID: x, Attempt: 1, Executor: executor, Type: domain.EventStarted,
		At: at.Add(10*time.Millisecond + 5*time.Nanosecond), PublishedAt: ptr(at.Add(5 * time.Millisecond))}
}

func heartbeat(x uuid.UUID, at time.Time) model.AttemptEvent {
	return model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventHeartbeat, At: at.Add(700 * time.Millisecond),
		PublishedAt: ptr(at.Add(5 * time.Millisecond))}
}

func failed(x uuid.UUID, at time.Time, final bool) model.AttemptEvent {
	return model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventFailed, Final: final, Error: "boom",
		Output: "partial", At: at.Add(900 * time.Millisecond), StartedAt: ptr(at.Add(100 * time.Millisecond)),
		RetryIn: 5 * time.Second, PublishedAt: ptr(at.Add(5 * time.Millisecond))}
}

var fastCases = []fastCase{
	// Recorded by the fast path.
	{name: "lone success", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "no start, no publish time", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.StartedAt, ev.PublishedAt = nil, nil }))
	}},
	{name: "published after now", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.PublishedAt = ptr(time.Now().Add(time.Hour)) }))
	}},
	{name: "zero publish time", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.PublishedAt = &time.Time{} }))
	}},
	{name: "error and unclean output", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.Error, ev.Output = "warn\x00ing", "a\x00b\xffc" }))
	}},
	{name: "dispatch acknowledged", fast: true,
		change: func(t *testing.T, s *Store, x uuid.UUID, at time.Time) {
			if err := s.MarkExecutionsDispatched(context.Background(), []model.Dispatched{{ID: x}}, at.Add(20*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		},
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "started, then succeeded", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(started(x, at, "s1"), with(succ(x, at), func(ev *model.AttemptEvent) { ev.StartedAt = ptr(at.Add(20 * time.Millisecond)) }))
	}},
	{name: "started by no executor, then succeeded", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(started(x, at, ""), with(succ(x, at), func(ev *model.AttemptEvent) { ev.StartedAt = nil }))
	}},
	{name: "started, then succeeded with an earlier start", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(started(x, at, "s1"), with(succ(x, at), func(ev *model.AttemptEvent) { ev.StartedAt = ptr(at.Add(time.Millisecond)) }))
	}},
	{name: "late and slow", fast: true, batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) {
			ev.StartedAt, ev.At = ptr(at.Add(2*time.Second)), at.Add(5*time.Second)
		}))
	}},
	{name: "two successes of one job, later", job: "two", off: time.Second, fast: true,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "two successes of one job, earlier", job: "two", off: 2 * time.Second, fast: true,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "a fast success before a slow one of its job", job: "mixed", off: 3 * time.Second, fast: true,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "a slow success after a fast one of its job", job: "mixed", off: time.Second,
		prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(failed(x, at, false)) },
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
			return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.Attempt, ev.Dispatch, ev.At = 2, 1, at.Add(2*time.Minute) }))
		}},
	{name: "dead before", job: "recovers", off: 5 * time.Second,
		prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(failed(x, at, true)) }},
	{name: "success after a dead execution", job: "recovers", off: time.Second, fast: true,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},

	// Recorded by the rules alone.
	{name: "unknown execution", missing: true,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "unknown execution of a day without a partition", missing: true, off: -400 * 24 * time.Hour,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "execution of a day without a partition", off: -30 * 24 * time.Hour,
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "running", prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(started(x, at, "s1")) },
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "a repeated success", prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) },
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "cancelled meanwhile",
		change: func(t *testing.T, s *Store, x uuid.UUID, at time.Time) {
			if _, err := s.CancelExecution(context.Background(), x); err != nil {
				t.Fatal(err)
			}
			// Cancelling writes now; both sides' rows get the same time.
			if _, err := s.pool.Exec(context.Background(), "UPDATE executions SET finished_at = $2, dispatched_at = $2 WHERE id = $1",
				x, at.Add(30*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		},
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(succ(x, at)) }},
	{name: "a failure", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(failed(x, at, false)) }},
	{name: "a final failure", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(failed(x, at, true)) }},
	{name: "succeeded, then a heartbeat", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(succ(x, at), heartbeat(x, at))
	}},
	{name: "a heartbeat, then succeeded", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(heartbeat(x, at), succ(x, at))
	}},
	{name: "the same success twice in the batch", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(succ(x, at), succ(x, at))
	}},
	{name: "started, a heartbeat, succeeded", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(started(x, at, "s1"), heartbeat(x, at), succ(x, at))
	}},
	{name: "succeeded, then cancelled", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(succ(x, at), model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventCancelled, At: at.Add(2 * time.Second)})
	}},
	{name: "attempt 2 succeeded", prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent { return evs(failed(x, at, false)) },
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
			return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.Attempt, ev.Dispatch, ev.At = 2, 1, at.Add(7*time.Second) }))
		}},
	{name: "attempt 2 succeeded, attempt 1 never reported", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.Attempt = 2 }))
	}},
	{name: "started attempt 1, succeeded attempt 2", batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(started(x, at, "s1"), with(succ(x, at), func(ev *model.AttemptEvent) { ev.Attempt = 2 }))
	}},
	{name: "succeeded after a deferral", prep: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
		return evs(model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventDeferred, At: at.Add(time.Millisecond), RetryIn: time.Second})
	},
		batch: func(x uuid.UUID, at time.Time) []model.AttemptEvent {
			return evs(with(succ(x, at), func(ev *model.AttemptEvent) { ev.Dispatch = 1 }))
		}},
}

// TestRecordFastPathMatchesRules records the same events for two twin
// sets of executions (same times, same histories, jobs alike but for
// their names), one set with the fast path and one without, in one
// transaction (so that both see the same now), and compares every column
// of what they wrote: executions, attempts, the jobs' last successes and
// runs of dead executions, and notification events (a rule asks for
// every kind). Each case also says whether the fast path took it.
func TestRecordFastPathMatchesRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	ch, err := s.CreateChannel(ctx, model.Channel{Namespace: "default", Name: "hook", Type: model.ChannelWebhook,
		URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRule(ctx, model.Rule{Namespace: "default", Name: "all", Selector: "team=a",
		Events: []string{domain.NotifyExecutionDead, domain.NotifyExecutionFailed, domain.NotifyExecutionLate,
			domain.NotifyExecutionSlow, domain.NotifyJobFailing, domain.NotifyJobRecovered},
		Channels: []uuid.UUID{ch.ID}, FailingAfter: 1, LateAfter: time.Second, SlowAfter: time.Second, GroupInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	base := baseTime().Add(-time.Minute)
	type side struct {
		jobs  map[string]*model.Job
		execs []uuid.UUID // by case
		prep  []model.AttemptEvent
		batch []model.AttemptEvent
		got   map[uuid.UUID]*recExec
	}
	sides := [2]*side{{jobs: map[string]*model.Job{}}, {jobs: map[string]*model.Job{}}}
	at := func(i int) time.Time { return base.Add(-time.Duration(i)*time.Minute - fastCases[i].off) }
	for k, sd := range sides {
		for i, c := range fastCases {
			key := c.job
			if key == "" {
				key = c.name
			}
			j := sd.jobs[key]
			if j == nil {
				j = testJob(fmt.Sprintf("fast-%d-%s", k, strings.ReplaceAll(key, " ", "-")), nil)
				j.Labels = domain.Labels{"team": "a"}
				sd.jobs[key] = mustCreate(t, s, j)
			}
			var x uuid.UUID
			if c.missing {
				x = domain.ExecutionID(uuid.New(), at(i))
			} else {
				e, err := s.CreateManualExecution(ctx, j.ID, at(i))
				if err != nil {
					t.Fatal(err)
				}
				if !e.ScheduledFor.Equal(at(i)) {
					t.Fatalf("%s: execution at %v, want %v", c.name, e.ScheduledFor, at(i))
				}
				x = e.ID
			}
			sd.execs = append(sd.execs, x)
			if c.prep != nil {
				sd.prep = append(sd.prep, c.prep(x, at(i))...)
			}
			if c.change != nil {
				c.change(t, s, x, at(i))
			}
			if c.batch != nil {
				sd.batch = append(sd.batch, c.batch(x, at(i))...)
			}
		}
	}
	// Creation writes now.
	if _, err := s.pool.Exec(ctx, "UPDATE executions SET created_at = $1", base); err != nil {
		t.Fatal(err)
	}
	all := func(evs []model.AttemptEvent) []int {
		out := make([]int, len(evs))
		for i := range out {
			out[i] = i
		}
		return out
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		prep := append(slices.Clone(sides[0].prep), sides[1].prep...)
		_, err := s.recordTx(ctx, tx, prep, all(prep), false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for k, sd := range sides {
			var err error
			if sd.got, err = s.recordTx(ctx, tx, sd.batch, all(sd.batch), k == 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for i, c := range fastCases {
		a, b := sides[0].execs[i], sides[1].execs[i]
		ea, eb := sides[0].got[a], sides[1].got[b]
		switch {
		case c.missing && (ea != nil || eb != nil):
			t.Errorf("%s: found %v, %v; want neither", c.name, ea != nil, eb != nil)
		case c.missing:
		case c.batch != nil && (ea == nil || eb == nil):
			t.Errorf("%s: found %v, %v; want both", c.name, ea != nil, eb != nil)
		case c.batch != nil && (ea.recorded != c.fast || eb.recorded):
			t.Errorf("%s: recorded by the fast path: %v (slow side %v), want %v", c.name, ea.recorded, eb.recorded, c.fast)
		}
		if c.missing {
			continue
		}
		for _, q := range []string{
			`SELECT to_jsonb(x) - '{id,job_id,job_name,bucket}'::text[] FROM executions x WHERE id = $1`,
			`SELECT coalesce(jsonb_agg(to_jsonb(a) - 'execution_id' ORDER BY number), '[]') FROM attempts a WHERE execution_id = $1`,
		} {
			if ra, rb := jsonOf(t, s, q, a), jsonOf(t, s, q, b); ra != rb {
				t.Errorf("%s: fast path wrote\n%s\nthe rules\n%s", c.name, ra, rb)
			}
		}
	}
	// Execution ids and job ids differ between the sides: name them by
	// case and job.
	names := map[uuid.UUID]string{}
	for _, sd := range sides {
		for i, x := range sd.execs {
			names[x] = "execution " + fastCases[i].name
		}
	}
	jobRows := func(sd *side) []string {
		var out []string
		for key, j := range sd.jobs {
			var (
				last *time.Time
				exec *uuid.UUID
			)
			if err := s.pool.QueryRow(ctx, "SELECT last_success_at, execution_id FROM job_successes WHERE job_id = $1", j.ID).Scan(&last, &exec); err != nil {
				t.Fatal(err)
			}
			name := "none"
			if exec != nil {
				name = names[*exec]
			}
			out = append(out, fmt.Sprintf("%s: last success %v of %s; dead run %s", key, last, name,
				jsonOf(t, s, `SELECT coalesce((SELECT to_jsonb(f) - 'job_id' FROM job_failures f WHERE job_id = $1), 'null')`, j.ID)))
			rows, err := s.pool.Query(ctx, `SELECT kind, execution_id, at, detail::text FROM notification_events WHERE job_id = $1`, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			var (
				kind, detail string
				x            *uuid.UUID
				evAt         time.Time
			)
			if _, err := pgx.ForEachRow(rows, []any{&kind, &x, &evAt, &detail}, func() error {
				name := ""
				if x != nil {
					name = names[*x]
				}
				out = append(out, fmt.Sprintf("%s: %s of %s at %v: %s", key, kind, name, evAt.UTC(), detail))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(out)
		return out
	}
	ja, jb := jobRows(sides[0]), jobRows(sides[1])
	if !slices.Equal(ja, jb) {
		t.Errorf("jobs after the fast path:\n%s\nafter the rules:\n%s", strings.Join(ja, "\n"), strings.Join(jb, "\n"))
	}
	if n := len(ja); n < len(sides[0].jobs)+6 {
		t.Errorf("%d job rows and notification events, want the jobs' and a few events:\n%s", n, strings.Join(ja, "\n"))
	}
}

func jsonOf(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	var out string
	if err := s.pool.QueryRow(context.Background(), q, args...).Scan(&out); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// RecordAttemptEvents' results are the same with the fast path: nil for
// an event recorded, ErrNotFound for an unknown execution, the
// validation error for an invalid event.
func TestRecordFastPathResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime().Add(-time.Minute)
	j := mustCreate(t, s, testJob("fast-results", nil))
	e, err := s.CreateManualExecution(ctx, j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	unknown := domain.ExecutionID(uuid.New(), at)
	res, err := s.RecordAttemptEvents(ctx, evs(succ(e.ID, at), succ(unknown, at),
		with(succ(e.ID, at), func(ev *model.AttemptEvent) { ev.Attempt = 0 })))
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || !errors.Is(res[1], ErrNotFound) || res[2] == nil || errors.Is(res[2], ErrNotFound) {
		t.Fatalf("results %v, want nil, not found, invalid", res)
	}
	if n := s.recordStats.fast.Load(); n != 1 {
		t.Fatalf("the fast path recorded %d executions, want 1", n)
	}
	got := get(t, s, e.ID)
	if got.State != domain.ExecSucceeded || got.Attempts != 1 || attemptText(got) != "1:succeeded" {
		t.Fatalf("execution %s, %d attempts (%s), want succeeded after 1", got.State, got.Attempts, attemptText(got))
	}
	var last time.Time
	if err := s.pool.QueryRow(ctx, "SELECT last_success_at FROM job_successes WHERE job_id = $1", j.ID).Scan(&last); err != nil ||
		!last.Equal(ms(succ(e.ID, at).At)) {
		t.Fatalf("last success %v (%v), want %v", last, err, ms(succ(e.ID, at).At))
	}
}

// A day whose partition is dropped after the fast path saw it: the fast
// statement fails, and the batch is recorded again without it.
func TestRecordFastPathPartitionGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	day := baseTime().AddDate(0, 0, 40).Truncate(24 * time.Hour)
	if err := s.EnsureHistoryPartitions(ctx, day); err != nil {
		t.Fatal(err)
	}
	x := domain.ExecutionID(uuid.New(), day.Add(time.Hour))
	notFound := func() {
		t.Helper()
		res, err := s.RecordAttemptEvents(ctx, evs(succ(x, day.Add(time.Hour))))
		if err != nil || !errors.Is(res[0], ErrNotFound) {
			t.Fatalf("results %v, %v; want not found", res, err)
		}
	}
	notFound()
	if _, err := s.pool.Exec(ctx, "DROP TABLE "+DayPartition("executions", day)); err != nil {
		t.Fatal(err)
	}
	notFound()
	notFound()
	if n := s.recordStats.redone.Load(); n != 1 {
		t.Fatalf("%d batches recorded again, want 1", n)
	}
}

// The fast statement's plan is a nested loop over the id array probing
// the partition's primary key, which updates rows in id order (Lock
// order in executions_fast.go), whatever the partition's size and
// statistics; and it does return (so update) them in that order.
func TestFastRecordPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime().Add(-time.Minute)
	epochs, jobs := benchJobs(t, s, 40, at)
	firings := make([]Firing, len(jobs))
	for i, j := range jobs {
		firings[i] = Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at}
	}
	res, err := s.Fire(ctx, "bench", epochs, firings)
	if err != nil || len(res.Executions) != len(jobs) {
		t.Fatalf("fire: %d executions, %v", len(res.Executions), err)
	}
	var batch []model.AttemptEvent
	for _, e := range res.Executions {
		batch = append(batch, succ(e.ID, at))
	}
	queued := make([]int, len(batch))
	for i := range queued {
		queued[i] = i
	}
	ids, _, _ := eventExecutions(batch, queued)
	r := fastCandidates(batch, queued, ids)
	if r == nil || len(r.days) != 1 {
		t.Fatalf("fast candidates %+v, want one day's", r)
	}
	table := DayPartition("executions", r.days[0].day)
	sql := fmt.Sprintf(fastRecordSQL, table)
	literal := func(v any) string { // an array as Postgres text
		var parts []string
		switch a := v.(type) {
		case []uuid.UUID:
			for _, x := range a {
				parts = append(parts, x.String())
			}
		case []time.Time:
			for _, x := range a {
				parts = append(parts, `"`+x.Format(time.RFC3339Nano)+`"`)
			}
		case []*time.Time:
			for _, x := range a {
				if x == nil {
					parts = append(parts, "NULL")
				} else {
					parts = append(parts, `"`+x.Format(time.RFC3339Nano)+`"`)
				}
			}
		case []string:
			for _, x := range a {
				parts = append(parts, `"`+x+`"`)
			}
		case []*string:
			for _, x := range a {
				if x == nil {
					parts = append(parts, "NULL")
				} else {
					parts = append(parts, `"`+*x+`"`)
				}
			}
		}
		return "'{" + strings.Join(parts, ",") + "}'"
	}
	args := []string{literal(r.id), literal(r.sched), literal(r.published), literal(r.started), literal(r.finished),
		literal(r.executorID), literal(r.output), literal(r.aExec), literal(r.aError)}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := s.pool.Exec(ctx, "ANALYZE "+table); err != nil {
				t.Fatal(err)
			}
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := keyedPlans(ctx, tx, fastSettings...); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "PREPARE fastplan AS "+sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			// Prepared statements outlive the transaction.
			defer tx.Exec(ctx, "DEALLOCATE fastplan", pgx.QueryExecModeSimpleProtocol)
			rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE fastplan("+strings.Join(args, ", ")+")",
				pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				return err
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			plan := strings.Join(lines, "\n")
			loop, fn, probe := strings.Index(plan, "Nested Loop"), strings.Index(plan, "Function Scan on u"),
				strings.Index(plan, "Index Scan using "+table+"_pkey")
			if loop < 0 || fn < loop || probe < fn || !strings.Contains(plan, "Index Cond: (id = ANY (ARRAY[u.id]))") ||
				strings.Contains(plan, "Seq Scan") {
				t.Errorf("analyzed %v: plan\n%s\nwant a nested loop over the array probing %s_pkey", analyzed, plan, table)
			}
			rows, err = tx.Query(ctx, "EXECUTE fastplan("+strings.Join(args, ", ")+")", pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
				var id uuid.UUID
				return id, row.Scan(&id, nil, nil, nil, nil)
			})
			if err != nil {
				return err
			}
			if !slices.Equal(got, r.id) {
				t.Errorf("analyzed %v: updated %d rows in the order %v, want %v", analyzed, len(got), got, r.id)
			}
			return errors.New("roll back")
		})
		if err != nil && err.Error() != "roll back" {
			t.Fatal(err)
		}
	}
}

// Concurrent recorders on the same executions, with fast and slow events
// of the same executions in different batches (and the dispatcher
// marking them dispatched meanwhile), neither deadlock nor lose an
// event: every execution ends as its events say, whatever their order.
func TestRecordFastPathConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, writers, rounds = 120, 4, 8
	s := newStore(t)
	at := baseTime().Add(-time.Hour)
	epochs, jobs := benchJobs(t, s, n, at)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		next := at.Add(time.Second)
		res := fireEvery(t, s, epochs, jobs, at, next)
		pub := at.Add(3 * time.Millisecond)
		batches := make([][]model.AttemptEvent, writers)
		lastBeat := map[uuid.UUID]time.Time{}
		var dispatched []model.Dispatched
		for i, e := range res.Executions {
			dispatched = append(dispatched, model.Dispatched{ID: e.ID})
			ok := model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", Type: domain.EventSucceeded, Output: "ok",
				At: at.Add(500*time.Millisecond + time.Duration(i)*time.Millisecond), StartedAt: ptr(at.Add(100 * time.Millisecond)),
				PublishedAt: &pub}
			start := model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", Type: domain.EventStarted,
				At: at.Add(200 * time.Millisecond), PublishedAt: &pub}
			beat := func(w int) model.AttemptEvent {
				b := model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", Type: domain.EventHeartbeat,
					At: at.Add(300*time.Millisecond + time.Duration(w)*time.Millisecond), PublishedAt: &pub}
				if b.At.After(lastBeat[e.ID]) {
					lastBeat[e.ID] = b.At
				}
				return b
			}
			succeeded := false
			for w := range writers {
				var add []model.AttemptEvent
				switch p := rng.IntN(100); {
				case p < 35:
				case p < 70:
					add = evs(ok)
				case p < 78:
					add = evs(start)
				case p < 86:
					add = evs(beat(w))
				case p < 93:
					add = evs(start, ok)
				default:
					add = evs(ok, beat(w))
				}
				for _, ev := range add {
					succeeded = succeeded || ev.Type == domain.EventSucceeded
				}
				batches[w] = append(batches[w], add...)
			}
			if !succeeded {
				w := rng.IntN(writers)
				batches[w] = append(batches[w], ok)
			}
		}
		go1 := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers+1)
		for w := range writers {
			// Two calls per writer, each with half of its executions' events.
			var halves [2][]model.AttemptEvent
			for _, ev := range batches[w] {
				h := int(ev.ID[15] & 1)
				halves[h] = append(halves[h], ev)
			}
			wg.Go(func() {
				<-go1
				for _, b := range halves {
					if len(b) == 0 {
						continue
					}
					res, err := s.RecordAttemptEvents(ctx, b)
					if err != nil {
						errs <- err
						return
					}
					for i, r := range res {
						if r != nil {
							errs <- fmt.Errorf("event %+v: %w", b[i], r)
						}
					}
				}
			})
		}
		wg.Go(func() {
			<-go1
			if err := s.MarkExecutionsDispatched(ctx, dispatched, pub); err != nil {
				errs <- err
			}
		})
		close(go1)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, e := range res.Executions {
			got := get(t, s, e.ID)
			want := fmt.Sprintf("succeeded 1 x ok %v %v %v %v", ms(at.Add(100*time.Millisecond)),
				ms(at.Add(500*time.Millisecond+time.Duration(i)*time.Millisecond)), pub, lastBeat[e.ID])
			var beatAt time.Time
			if a := got.AttemptList; len(a) == 1 && a[0].HeartbeatAt != nil {
				beatAt = a[0].HeartbeatAt.UTC()
			}
			have := fmt.Sprintf("%s %d %s %s %v %v %v %v", got.State, got.Attempts, got.ExecutorID, got.Output,
				derefTime(got.StartedAt), derefTime(got.FinishedAt), derefTime(got.DispatchedAt), beatAt)
			if have != want || attemptText(got) != "1:succeeded" {
				t.Fatalf("round %d, execution %d: %s (%s), want %s", round, i, have, attemptText(got), want)
			}
		}
		at = next
	}
	t.Logf("%d executions recorded by the fast path, %d batches recorded again without it",
		s.recordStats.fast.Load(), s.recordStats.redone.Load())
	if s.recordStats.fast.Load() == 0 {
		t.Fatal("the fast path recorded nothing")
	}
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
