package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
)

// DependentsReport is what --dependents measured: the dependent jobs'
// runs in the window, each waiting for its upstream's run at the same
// time.
type DependentsReport struct {
	Jobs int `json:"jobs"`
	// Expected are the upstream runs of the window that succeeded: each
	// should have released exactly one run of its dependent.
	Expected int64 `json:"expected"`
	Ran      int64 `json:"ran"`
	// Missing are expected runs without one; Twice, times with more than
	// one (never: the executions table's key); Early, runs dispatched
	// before their upstream's end was recorded.
	Missing int64 `json:"missing"`
	Twice   int64 `json:"twice"`
	Early   int64 `json:"early"`
	Skipped int64 `json:"skipped"`
	// ReleaseLag is the upstream's end (finished_at) → the dependent's
	// dispatch; FireLag the dependent's scheduled time → its dispatch.
	ReleaseLag Lag `json:"release_lag_ms"`
	FireLag    Lag `json:"fire_lag_ms"`
}

// depsNamespace is where --dependents' jobs live.
func (b *bench) depsNamespace() string { return b.ns + "-deps" }

// createDependents makes dependent i wait for job i (same schedule,
// same_time), through the jobs use case, so each is checked and its edge
// written as the API would.
func (b *bench) createDependents(ctx context.Context) error {
	if b.Dependents <= 0 {
		return nil
	}
	svc, err := jobs.New(jobs.Config{Store: b.st})
	if err != nil {
		return err
	}
	start := time.Now()
	handler := domain.Handler{Type: domain.HandlerCustom, Name: b.Handler}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	var mu sync.Mutex
	done := 0
	for i := range b.Dependents {
		g.Go(func() error {
			_, err := svc.Create(gctx, jobs.NewJob{Namespace: b.depsNamespace(), Name: fmt.Sprintf("dep-%07d", i), Handler: handler,
				Schedule: schedule.Spec{Cron: cronOf(b.Mix, i%slots(b.Mix))},
				Depends:  &jobs.DependsSpec{On: []jobs.DependRef{{Job: b.ns + "/" + jobName(i)}}},
				MayRead:  func(string) bool { return true }})
			if err != nil {
				return fmt.Errorf("dependent %d: %w", i, err)
			}
			mu.Lock()
			done++
			if done%2000 == 0 {
				b.say("created %d dependent jobs", done)
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b.say("created %d dependent jobs in %s", b.Dependents, time.Since(start).Round(time.Millisecond))
	b.rep.Dependents = &DependentsReport{Jobs: b.Dependents}
	return nil
}

// dependentsStats waits (until deadline) for the dependents' runs of
// [from, to) to be decided and end, then measures them.
func (b *bench) dependentsStats(ctx context.Context, from, to, deadline time.Time) error {
	r := b.rep.Dependents
	if r == nil {
		return nil
	}
	ns := b.depsNamespace()
	for {
		var open int
		if err := b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM executions WHERE namespace = $1
			AND scheduled_for >= $2 AND scheduled_for < $3 AND state NOT IN ('succeeded', 'dead', 'cancelled')`,
			ns, from, to).Scan(&open); err != nil {
			return err
		}
		if open == 0 || b.dbNow().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	err := b.st.Pool().QueryRow(ctx, `
		WITH up AS (
			SELECT job_name, scheduled_for, finished_at FROM executions
			WHERE namespace = $1 AND scheduled_for >= $3 AND scheduled_for < $4 AND state = 'succeeded'
				AND job_name < $5
		), down AS (
			SELECT 'job-' || substr(job_name, 5) AS up_name, scheduled_for, dispatched_at, count(*) OVER w AS n
			FROM executions WHERE namespace = $2 AND scheduled_for >= $3 AND scheduled_for < $4
			WINDOW w AS (PARTITION BY job_name, scheduled_for)
		), j AS (
			SELECT up.finished_at, down.dispatched_at, down.scheduled_for AS sched, down.n
			FROM up LEFT JOIN down ON down.up_name = up.job_name AND down.scheduled_for = up.scheduled_for
		)
		SELECT (SELECT count(*) FROM up), count(dispatched_at), count(*) FILTER (WHERE sched IS NULL),
			count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE dispatched_at < finished_at),
			(SELECT count(*) FROM skipped_runs WHERE namespace = $2 AND first_at >= $3 AND first_at < $4),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - finished_at) * 1000),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - finished_at) * 1000),
			max(extract(epoch FROM dispatched_at - finished_at) * 1000),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - sched) * 1000),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - sched) * 1000),
			max(extract(epoch FROM dispatched_at - sched) * 1000)
		FROM j`, b.ns, ns, from, to, jobName(r.Jobs)).Scan(&r.Expected, &r.Ran, &r.Missing, &r.Twice, &r.Early, &r.Skipped,
		&r.ReleaseLag.P50, &r.ReleaseLag.P99, &r.ReleaseLag.Max, &r.FireLag.P50, &r.FireLag.P99, &r.FireLag.Max)
	if err != nil {
		return fmt.Errorf("dependents' statistics: %w", err)
	}
	r.ReleaseLag, r.FireLag = r.ReleaseLag.rounded(), r.FireLag.rounded()
	return nil
}

// deleteDependents deletes --dependents' jobs, executions and skipped
// runs.
func (b *bench) deleteDependents(ctx context.Context) error {
	if b.Dependents <= 0 {
		return nil
	}
	ns := b.depsNamespace()
	for _, sql := range []string{
		"DELETE FROM job_dependencies WHERE downstream_id IN (SELECT job_id FROM job_names WHERE namespace = $1)",
		"DELETE FROM jobs WHERE namespace = $1",
		"DELETE FROM job_successes WHERE job_id IN (SELECT job_id FROM job_names WHERE namespace = $1)",
		"DELETE FROM job_names WHERE namespace = $1",
		"DELETE FROM skipped_runs WHERE namespace = $1",
		"DELETE FROM execution_upstreams WHERE job_id IN (SELECT DISTINCT job_id FROM executions WHERE namespace = $1)",
		`DELETE FROM attempts a USING executions e
			WHERE e.namespace = $1 AND a.execution_id = e.id AND a.scheduled_for = e.scheduled_for`,
		"DELETE FROM executions WHERE namespace = $1",
	} {
		if err := b.exec(ctx, sql, ns); err != nil {
			return fmt.Errorf("delete the dependents: %w", err)
		}
	}
	return nil
}
