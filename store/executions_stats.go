package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Ways to group execution statistics (StatsFilter.GroupBy).
const (
	GroupByJob       = "job"
	GroupByHandler   = "handler"
	GroupByNamespace = "namespace"
	GroupByHour      = "hour"
)

// GroupBys lists the ways to group execution statistics.
var GroupBys = []string{GroupByJob, GroupByHandler, GroupByNamespace, GroupByHour}

// maxStatGroups caps the groups one statistics query returns.
const maxStatGroups = 1000

// StatsFilter selects the executions ListExecutionStats counts: those
// scheduled in [Since, Until), of one namespace and one job when set,
// grouped by GroupBy.
type StatsFilter struct {
	Namespace    string
	JobID        *uuid.UUID
	Since, Until time.Time
	GroupBy      string
}

// statsKey is the SQL of each grouping's key, and of the job name.
var statsKey = map[string]string{
	GroupByJob:       `job_id::text COLLATE "C"`,
	GroupByHandler:   strings.ReplaceAll(handlerKey, "executions.", "x."),
	GroupByNamespace: "namespace",
	GroupByHour:      "date_trunc('hour', scheduled_for, 'UTC')",
}

// statsKeyText is each grouping's key as text, from the grouped key g.k:
// an hour is grouped as a timestamp (cheap per row) and formatted once
// per group.
var statsKeyText = map[string]string{
	GroupByJob:       "g.k",
	GroupByHandler:   "g.k",
	GroupByNamespace: "g.k",
	GroupByHour:      "to_char(g.k AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:00:00\"Z\"')",
}

// statsSQL computes the statistics of each group, in one pass over the
// day partitions in [since, until). For one namespace it reads only the
// covering executions_namespace index (when the day partitions are
// all-visible, as autovacuum leaves them), in parallel: the name of a
// job is looked up afterwards, once per group (jobNameSQL), rather than
// read from every row. A job's group key is its id as text in the "C"
// collation, which sorts fast and which no index is ordered by: grouping
// by the uuid with a LIMIT tempted the planner to walk every day's
// (job_id, scheduled_for) index in job order and fetch each row from the
// heap to test its namespace (9 s for a week of one namespace).
const statsSQL = `
SELECT %[1]s, g.queued, g.running, g.succeeded, g.failed, g.cancelled, g.dead, g.attempts, g.duration, g.lag, %[2]s FROM (
	SELECT k,
		count(*) FILTER (WHERE state = 'queued') AS queued, count(*) FILTER (WHERE state = 'running') AS running,
		count(*) FILTER (WHERE state = 'succeeded') AS succeeded, count(*) FILTER (WHERE state = 'failed') AS failed,
		count(*) FILTER (WHERE state = 'cancelled') AS cancelled, count(*) FILTER (WHERE state = 'dead') AS dead,
		avg(attempts) FILTER (WHERE state IN ('succeeded', 'dead', 'cancelled')) AS attempts,
		percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000)
			FILTER (WHERE finished_at IS NOT NULL AND started_at IS NOT NULL AND state IN ('succeeded', 'dead')) AS duration,
		percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - COALESCE(due_at, scheduled_for)) * 1000)
			FILTER (WHERE started_at IS NOT NULL) AS lag
	FROM (
		SELECT %[3]s AS k, state, attempts, started_at, finished_at, due_at, scheduled_for FROM executions x
		WHERE %[4]s AND ` + endedStates + `
		UNION ALL
		SELECT %[3]s AS k, state, attempts, started_at, finished_at, due_at, scheduled_for FROM executions x
		WHERE %[4]s AND state IN ('queued', 'running')) r
	GROUP BY k ORDER BY k LIMIT %[5]d) g`

// statsSettings run the statistics query without JIT compilation (its
// cost estimate over days of rows turns JIT on, which then spends 300 ms
// compiling a query that reads an index for a second) and with enough
// memory to sort a week of one namespace's executions by group in
// memory.
var statsSettings = []string{"SET LOCAL jit = off", "SET LOCAL work_mem = '64MB'"}

// jobNameSQL is a group's job name when grouping by job: the name of its
// newest execution in the range (the job may have been renamed or
// deleted since). $1 and $2 are the range, as in statsSQL.
const jobNameSQL = `COALESCE((SELECT e.job_name FROM executions e
	WHERE e.job_id = g.k::uuid AND e.scheduled_for >= $1 AND e.scheduled_for < $2
	ORDER BY e.scheduled_for DESC LIMIT 1), '')`

// ListExecutionStats computes statistics of the executions f selects, per
// group, in SQL over the day partitions of f's range (at most 1,000
// groups, in key order). It fails on an unknown GroupBy.
func (s *Store) ListExecutionStats(ctx context.Context, f StatsFilter) ([]model.ExecStats, error) {
	key, ok := statsKey[f.GroupBy]
	if !ok {
		return nil, fmt.Errorf("store: execution stats: unknown grouping %q, want one of %v", f.GroupBy, GroupBys)
	}
	var args sqlArgs
	arg := args.add
	where := []string{"scheduled_for >= " + arg(f.Since.UTC()), "scheduled_for < " + arg(f.Until.UTC())}
	if f.Namespace != "" {
		where = append(where, "namespace = "+arg(f.Namespace))
	}
	if f.JobID != nil {
		where = append(where, "job_id = "+arg(*f.JobID))
	}
	name := "''"
	if f.GroupBy == GroupByJob {
		name = jobNameSQL
	}
	sql := fmt.Sprintf(statsSQL, statsKeyText[f.GroupBy], name, key, strings.Join(where, " AND "), maxStatGroups)
	var out []model.ExecStats
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, strings.Join(statsSettings, "; "), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanStats)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: execution stats: %w", err)
	}
	return out, nil
}

// scanStats reads a row of statsSQL.
func scanStats(r pgx.CollectableRow) (model.ExecStats, error) {
	var (
		g                                   model.ExecStats
		queued, running, ok, failed, cx, dd int64
	)
	if err := r.Scan(&g.Key, &queued, &running, &ok, &failed, &cx, &dd, &g.AttemptsPerExecution,
		&g.Duration, &g.Lag, &g.JobName); err != nil {
		return g, err
	}
	g.Counts = map[domain.ExecState]int64{
		domain.ExecQueued: queued, domain.ExecRunning: running, domain.ExecSucceeded: ok,
		domain.ExecFailed: failed, domain.ExecCancelled: cx, domain.ExecDead: dd,
	}
	g.Total = queued + running + ok + failed + cx + dd
	if ok+dd > 0 {
		rate := float64(ok) / float64(ok+dd)
		g.SuccessRate = &rate
	}
	return g, nil
}
