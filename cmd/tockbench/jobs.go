package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// slots is how many schedules a mix's jobs have: job i has the schedule
// of slot i % slots.
func slots(mix string) int {
	switch mix {
	case mixSpreadMinute:
		return 60
	case mixSpreadHour:
		return 3600
	}
	return 1
}

// cronOf is the cron expression of a recurring mix's slot: for
// spread-minute, second slot of every minute; for spread-hour, second
// slot of every hour.
func cronOf(mix string, slot int) string {
	switch mix {
	case mixEverySecond:
		return "* * * * * *"
	case mixSpreadHour:
		return fmt.Sprintf("%d %d * * * *", slot%60, slot/60)
	}
	return fmt.Sprintf("%d * * * * *", slot)
}

// jobsInSlot is how many of n jobs have slot s of k.
func jobsInSlot(n, k, s int) int {
	c := n / k
	if s < n%k {
		c++
	}
	return c
}

// jobName is job i's name; the exactly-once check relies on it.
func jobName(i int) string { return fmt.Sprintf("job-%07d", i) }

// createJobs stores the run's jobs with CopyJobs, createBatch at a
// time. Recurring jobs get their first run after the moment their batch
// is stored; same-second jobs are stored paused, and armed later.
func (b *bench) createJobs(ctx context.Context) error {
	handler := domain.Handler{Type: domain.HandlerCustom, Name: b.Handler}
	start := time.Now()
	err := b.storeJobs(ctx, 0, b.Jobs, func(i int, now time.Time) jobs.NewJob {
		nj := jobs.NewJob{Namespace: b.ns, Name: jobName(i), Handler: handler}
		if i < b.NotifyJobs {
			nj.Labels = domain.Labels{notifyLabel: "yes"}
		}
		if b.Mix == mixSameSecond || b.Mix == mixSpreadOnce {
			// A placeholder: arm sets the instants once all exist.
			at := now.Add(24 * time.Hour).Truncate(time.Second)
			nj.Schedule, nj.Paused = schedule.Spec{At: &at}, true
		} else {
			nj.Schedule = schedule.Spec{Cron: cronOf(b.Mix, i%slots(b.Mix))}
		}
		return nj
	}, func(done int) {
		if done%100_000 == 0 && done < b.Jobs {
			b.say("created %d jobs (%.0f jobs/s)", done, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		return err
	}
	took := time.Since(start)
	b.rep.Create = Creation{Seconds: took.Seconds(), JobsPerSecond: float64(b.Jobs) / took.Seconds()}
	b.say("created %d jobs in %s (%.0f jobs/s)", b.Jobs, took.Round(time.Millisecond), b.rep.Create.JobsPerSecond)
	return nil
}

// storedName is stored job i's name: it sorts before every jobName, so
// that the ceiling search, which deletes the newest jobs by name, keeps
// them.
func storedName(i int) string { return fmt.Sprintf("idle-%07d", i) }

// createStored stores --stored-jobs jobs that do not fire during the run:
// active one-shot jobs due a year ahead, in the run's namespace (deleted
// with its jobs).
func (b *bench) createStored(ctx context.Context) error {
	if b.StoredJobs <= 0 {
		return nil
	}
	handler := domain.Handler{Type: domain.HandlerCustom, Name: b.Handler}
	start := time.Now()
	err := b.storeJobs(ctx, 0, b.StoredJobs, func(i int, now time.Time) jobs.NewJob {
		at := now.AddDate(1, 0, 0).Truncate(time.Second)
		return jobs.NewJob{Namespace: b.ns, Name: storedName(i), Handler: handler, Schedule: schedule.Spec{At: &at}}
	}, nil)
	if err != nil {
		return fmt.Errorf("stored jobs: %w", err)
	}
	b.say("stored %d jobs that do not fire in %s", b.StoredJobs, time.Since(start).Round(time.Millisecond))
	return nil
}

// storeJobs stores jobs lo … hi-1, as describe says for each, with
// CopyJobs, createBatch at a time, and calls progress (if not nil) with
// the number stored after each batch. Each job is checked and built as
// the API builds one (jobs.Service.Build); its first run is computed from
// a second after its batch is built, since the scanners find bulk-created
// jobs on their next scan, within a second.
func (b *bench) storeJobs(ctx context.Context, lo, hi int, describe func(i int, now time.Time) jobs.NewJob, progress func(done int)) error {
	svc, err := jobs.New(jobs.Config{Store: b.st})
	if err != nil {
		return err
	}
	for off := lo; off < hi; off += createBatch {
		n := min(createBatch, hi-off)
		now := b.dbNow()
		ahead := func() (time.Time, error) { return now.Add(time.Second), nil }
		batch := make([]*model.Job, n)
		for k := range batch {
			if batch[k], err = svc.Build(describe(off+k, now), ahead); err != nil {
				return fmt.Errorf("job %d: %w", off+k, err)
			}
		}
		if err := b.st.CopyJobs(ctx, batch); err != nil {
			return err
		}
		if progress != nil {
			progress(off + n)
		}
	}
	return nil
}

// analyze has Postgres update the jobs tables' statistics, unless
// --no-analyze.
func (b *bench) analyze(ctx context.Context) error {
	if b.NoAnalyze {
		return nil
	}
	// Until the planner knows the jobs partitions are no longer nearly
	// empty, it fires a batch by comparing every job of the batch's
	// buckets with every firing (a nested loop over the whole
	// partitions), and the scheduler falls behind. Autovacuum analyzes
	// the tables within a minute or so of a bulk load; do it now so the
	// run measures the steady state, not that minute.
	start := time.Now()
	if err := b.exec(ctx, "ANALYZE jobs, job_names"); err != nil {
		return fmt.Errorf("analyze the jobs tables: %w", err)
	}
	b.rep.Create.AnalyzeSeconds = time.Since(start).Seconds()
	b.say("analyzed the jobs tables in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// analyzeLoop runs analyzeFirst after the jobs are created, then every
// analyzeEvery.
const (
	analyzeFirst = 5 * time.Second
	analyzeEvery = 30 * time.Second
)

// analyzeLoop stands in for autovacuum's ANALYZE when the server runs
// without it: the executions tables start the run empty, and a plan that
// Postgres chose while they were (and cached in every connection) reads
// the whole table for each executor event, until statistics change. It
// ANALYZEs them every analyzeEvery until ctx ends.
func (b *bench) analyzeLoop(ctx context.Context) {
	if b.NoAnalyze || !b.noAutovacuum {
		return
	}
	b.say("autovacuum is off: analyzing the executions tables every %s, as it would", analyzeEvery)
	// The first time soon, so that the plans are fixed before the window.
	t := time.NewTimer(analyzeFirst)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(analyzeEvery)
		}
		if err := b.exec(ctx, "ANALYZE executions, attempts"); err != nil && ctx.Err() == nil {
			b.say("analyze the executions tables: %v", err)
		}
	}
}

// onceSlots is how many seconds a spread-once run spreads its jobs over:
// job i is due at the window's start plus i mod onceSlots seconds.
func (b *bench) onceSlots() int { return int(b.Duration / time.Second) }

// arm makes the paused one-shot jobs due, in one statement, as resuming
// each would (schedule, state, next run, version): job i at from + (i mod
// k) seconds. same-second arms them all at one instant (k = 1),
// spread-once over the window's seconds.
func (b *bench) arm(ctx context.Context, from time.Time, k int) error {
	specs, ats := make([]string, k), make([]time.Time, k)
	for slot := range k {
		at := from.Add(time.Duration(slot) * time.Second)
		raw, err := json.Marshal(schedule.Spec{At: &at})
		if err != nil {
			return err
		}
		specs[slot], ats[slot] = string(raw), at
	}
	// Names are jobName(i): "job-" and i's digits.
	tag, err := b.st.Pool().Exec(ctx, `
		UPDATE jobs SET schedule = (($2::text[])[substr(name, 5)::bigint % $4 + 1])::jsonb,
			next_run_at = ($3::timestamptz[])[substr(name, 5)::bigint % $4 + 1], state = 'active',
			updated_at = date_trunc('milliseconds', now()), version = version + 1
		WHERE namespace = $1 AND state = 'paused'`,
		b.ns, specs, ats, k)
	if err != nil {
		return fmt.Errorf("arm the jobs: %w", err)
	}
	if int(tag.RowsAffected()) != b.Jobs {
		return fmt.Errorf("armed %d jobs, want %d", tag.RowsAffected(), b.Jobs)
	}
	return nil
}

// expectedTimes are the runs of cron (UTC) in [from, to).
func expectedTimes(cron string, from, to time.Time) ([]time.Time, error) {
	sch, err := schedule.Compile(schedule.Spec{Cron: cron})
	if err != nil {
		return nil, err
	}
	var out []time.Time
	// Next is strictly after its argument, and from is a whole second.
	for t, ok := sch.Next(from.Add(-time.Millisecond)); ok && t.Before(to); t, ok = sch.Next(t) {
		out = append(out, t)
	}
	return out, nil
}

// deleteJobs deletes the run's jobs and their names, one statement per
// table: they stop firing.
func (b *bench) deleteJobs(ctx context.Context) error {
	for _, sql := range []string{
		"DELETE FROM notification_rules WHERE namespace = $1",
		"DELETE FROM notification_channels WHERE namespace = $1",
		"DELETE FROM notification_events WHERE namespace = $1",
		"DELETE FROM notifications WHERE namespace = $1",
		"DELETE FROM job_failures WHERE job_id IN (SELECT job_id FROM job_names WHERE namespace = $1)",
		"DELETE FROM jobs WHERE namespace = $1",
		"DELETE FROM job_successes WHERE job_id IN (SELECT job_id FROM job_names WHERE namespace = $1)",
		"DELETE FROM job_names WHERE namespace = $1",
	} {
		if err := b.exec(ctx, sql, b.ns); err != nil {
			return fmt.Errorf("delete the bench's jobs: %w", err)
		}
	}
	return nil
}

// exec runs a statement, again if Postgres aborted it as a deadlock
// victim: deleting many jobs locks them in another order than a firing
// transaction does.
func (b *bench) exec(ctx context.Context, sql string, args ...any) error {
	for attempt := 1; ; attempt++ {
		_, err := b.st.Pool().Exec(ctx, sql, args...)
		var pe *pgconn.PgError
		if err == nil || attempt == 10 || !errors.As(err, &pe) || (pe.Code != "40P01" && pe.Code != "40001") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}

// deleteExecutions deletes the run's executions and their attempts.
func (b *bench) deleteExecutions(ctx context.Context) error {
	for _, sql := range []string{
		`DELETE FROM attempts a USING executions e
			WHERE e.namespace = $1 AND a.execution_id = e.id AND a.scheduled_for = e.scheduled_for`,
		"DELETE FROM executions WHERE namespace = $1",
	} {
		if err := b.exec(ctx, sql, b.ns); err != nil {
			return fmt.Errorf("delete the bench's executions: %w", err)
		}
	}
	return nil
}

// notifyLabel is the label of the jobs under tockbench's notification
// rule (--notify-jobs).
const notifyLabel = "tockbench/notify"

// createRule puts the first --notify-jobs jobs under a notification rule
// that asks for every job and execution event, to a webhook channel. In
// a run where every execution succeeds on time, the rule sends nothing:
// what it costs is recording's checks and the silence sweeps.
func (b *bench) createRule(ctx context.Context) error {
	if b.NotifyJobs <= 0 {
		return nil
	}
	c, err := b.st.CreateChannel(ctx, model.Channel{Namespace: b.ns, Name: "tockbench", Type: model.ChannelWebhook,
		URL: "https://notify.invalid/tockbench"})
	if err != nil {
		return err
	}
	_, err = b.st.CreateRule(ctx, model.Rule{Namespace: b.ns, Name: "tockbench", Selector: notifyLabel + "=yes",
		Events: []string{domain.NotifyExecutionDead, domain.NotifyExecutionFailed, domain.NotifyJobFailing,
			domain.NotifyJobRecovered, domain.NotifyJobSilent, domain.NotifyExecutionLate, domain.NotifyExecutionSlow},
		Channels: []uuid.UUID{c.ID}, FailingAfter: 3, SilentGrace: time.Minute, LateAfter: time.Hour, SlowAfter: time.Hour,
		GroupInterval: time.Minute})
	if err == nil {
		b.say("%d jobs under a notification rule", min(b.NotifyJobs, b.Jobs))
	}
	return err
}
