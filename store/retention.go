package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Namespace is a namespace as GET /v1/namespaces shows it: its jobs and
// its settings.
type Namespace struct {
	Name string
	// Jobs counts its jobs, whatever their state.
	Jobs int64
	// Retention is its own retention; nil when the cluster's applies.
	Retention *time.Duration
}

// SetNamespaceRetention sets namespace ns's retention (0 removes it: the
// cluster's applies again) and returns the namespace.
func (s *Store) SetNamespaceRetention(ctx context.Context, ns string, d time.Duration) (*Namespace, error) {
	var ms *int64
	if d > 0 {
		v := d.Milliseconds()
		ms = &v
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO namespaces (name, retention_ms) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET retention_ms = excluded.retention_ms, updated_at = now()`, ns, ms)
	if err != nil {
		return nil, fmt.Errorf("store: set retention of namespace %s: %w", ns, err)
	}
	all, err := s.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range all {
		if n.Name == ns {
			return &n, nil
		}
	}
	return &Namespace{Name: ns}, nil
}

// ListNamespaces lists the namespaces that have jobs or settings, by
// name, with their job counts and settings.
func (s *Store) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT COALESCE(j.namespace, n.name), COALESCE(j.jobs, 0), n.retention_ms
		FROM (SELECT namespace, count(*) AS jobs FROM job_names GROUP BY namespace) j
		FULL JOIN namespaces n ON n.name = j.namespace
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Namespace, error) {
		var n Namespace
		var ms *int64
		err := r.Scan(&n.Name, &n.Jobs, &ms)
		if ms != nil {
			d := time.Duration(*ms) * time.Millisecond
			n.Retention = &d
		}
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	return out, nil
}

// RetentionResult is what ApplyRetention did.
type RetentionResult struct {
	// Dropped are the days (UTC midnight) whose executions and attempts
	// partitions were dropped.
	Dropped []time.Time
	// Kept are the days past the cluster's retention kept because a
	// namespace with rows in them keeps its history longer.
	Kept []time.Time
	// CompletedJobs counts the completed one-shot jobs deleted.
	CompletedJobs int64
	// SkippedRanges counts the skipped-run records deleted.
	SkippedRanges int64
}

// ApplyRetention drops history past its retention, as of now:
//
//   - A day's executions and attempts partitions are dropped, whole, once
//     the day has ended more than the retention ago of every namespace
//     with executions in it (its own, or def, the cluster's). So a
//     namespace with a longer retention keeps its rows, and those of the
//     namespaces sharing its days, until it is past; never a row-by-row
//     DELETE over a big table. The DEFAULT partitions are left alone.
//   - Skipped-run records are deleted past their namespace's retention.
//   - Completed one-shot jobs are deleted completedAfter (if above 0)
//     after they completed.
//
// Each partition is dropped in a short transaction that waits at most
// lock_timeout (5 s) for the tables' locks, so it never queues firing or
// recording behind it for long; a day it could not drop is dropped by a
// later pass. Concurrent passes are serialised by an advisory lock.
func (s *Store) ApplyRetention(ctx context.Context, now time.Time, def, completedAfter time.Duration) (RetentionResult, error) {
	var res RetentionResult
	retentions, err := s.namespaceRetentions(ctx)
	if err != nil {
		return res, err
	}
	shortest := def
	for _, d := range retentions {
		shortest = min(shortest, d)
	}
	days, err := s.historyDays(ctx)
	if err != nil {
		return res, err
	}
	for _, day := range days {
		end := day.Add(24 * time.Hour)
		if end.Add(shortest).After(now) {
			continue // younger than every retention
		}
		keep, err := s.dayKept(ctx, day, now, def, retentions)
		if err != nil {
			return res, err
		}
		if keep {
			res.Kept = append(res.Kept, day)
			continue
		}
		if err := s.dropDay(ctx, day); err != nil {
			return res, err
		}
		s.days.Delete(day)
		res.Dropped = append(res.Dropped, day)
	}
	if res.SkippedRanges, err = s.expireSkips(ctx, now, def); err != nil {
		return res, err
	}
	if completedAfter > 0 {
		tag, err := s.pool.Exec(ctx, `WITH gone AS (
				DELETE FROM jobs WHERE state = 'completed' AND schedule->>'cron' IS NULL AND updated_at < $1
				RETURNING id)
			DELETE FROM job_names WHERE job_id IN (SELECT id FROM gone)`, now.Add(-completedAfter))
		if err != nil {
			return res, fmt.Errorf("store: delete completed jobs: %w", err)
		}
		res.CompletedJobs = tag.RowsAffected()
	}
	return res, nil
}

// namespaceRetentions are the namespaces' own retentions.
func (s *Store) namespaceRetentions(ctx context.Context) (map[string]time.Duration, error) {
	rows, err := s.pool.Query(ctx, "SELECT name, retention_ms FROM namespaces WHERE retention_ms IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("store: namespace retentions: %w", err)
	}
	out := map[string]time.Duration{}
	var (
		name string
		ms   int64
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &ms}, func() error {
		out[name] = time.Duration(ms) * time.Millisecond
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: namespace retentions: %w", err)
	}
	return out, nil
}

// historyDays are the days of the executions table's day partitions,
// oldest first.
func (s *Store) historyDays(ctx context.Context) ([]time.Time, error) {
	have, err := partitionsOf(ctx, s.pool, "executions")
	if err != nil {
		return nil, fmt.Errorf("store: retention: %w", err)
	}
	var days []time.Time
	for name := range have {
		d, ok := strings.CutPrefix(name, "executions_")
		if !ok {
			continue
		}
		if t, err := time.Parse("20060102", d); err == nil {
			days = append(days, t)
		}
	}
	slices.SortFunc(days, func(a, b time.Time) int { return a.Compare(b) })
	return days, nil
}

// dayKept reports whether a namespace with executions on day keeps its
// history past now: its retention (or def) has not run out since the day
// ended. It asks the day's partition whether it holds a row of such a
// namespace, which stops at the first one found; a day that holds none
// is dropped, so it is not asked again.
func (s *Store) dayKept(ctx context.Context, day, now time.Time, def time.Duration, retentions map[string]time.Duration) (bool, error) {
	end := day.Add(24 * time.Hour)
	var keepers, expired []string
	for ns, ret := range retentions {
		if end.Add(ret).After(now) {
			keepers = append(keepers, ns)
		} else {
			expired = append(expired, ns)
		}
	}
	q := "SELECT EXISTS (SELECT 1 FROM " + dayPartition("executions", day) + " WHERE namespace = ANY($1))"
	arg := keepers
	if end.Add(def).After(now) {
		// The cluster's retention keeps the day for every namespace but
		// those whose own, shorter, retention ran out.
		q = "SELECT EXISTS (SELECT 1 FROM " + dayPartition("executions", day) + " WHERE namespace <> ALL($1))"
		arg = expired
	} else if len(keepers) == 0 {
		return false, nil
	}
	var kept bool
	if err := s.pool.QueryRow(ctx, q, arg).Scan(&kept); err != nil {
		return false, fmt.Errorf("store: retention: namespaces of %s: %w", day.Format(time.DateOnly), err)
	}
	return kept, nil
}

// dropDay drops day's partitions of executions and attempts, in two
// short transactions (lock_timeout 5 s each), each locking executions
// before attempts, the order the recorder's transactions take them (see
// dailyTables), so that it cannot deadlock with them. The first empties them with
// TRUNCATE, which locks only the partitions themselves: the commit that
// unlinks their files (168 ms for a day of 1,000,000 executions here)
// holds no lock on the parent tables, so firing, which inserts into
// today's partition, goes on. The second drops the empty tables, under
// the partitions' advisory lock: its commit, which takes the parents'
// locks, has almost nothing left to unlink.
func (s *Store) dropDay(ctx context.Context, day time.Time) error {
	step := func(sql string, advisory bool) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if advisory {
				if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockPartitions); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql)
			return err
		})
	}
	var names, present []string
	var err error
	for _, table := range dailyTables {
		name := dayPartition(table, day)
		names = append(names, name)
		var have map[string]bool
		if have, err = partitionsOf(ctx, s.pool, table); err != nil {
			break
		}
		if have[name] {
			present = append(present, name)
		}
	}
	if err == nil && len(present) > 0 {
		err = step("TRUNCATE "+strings.Join(present, ", "), false)
	}
	if err == nil {
		err = step("DROP TABLE IF EXISTS "+strings.Join(names, ", "), true)
	}
	if err != nil {
		return fmt.Errorf("store: drop the partitions of %s: %w", day.Format(time.DateOnly), err)
	}
	return nil
}

// expireSkips deletes skipped-run records past their namespace's
// retention (def when it has none).
func (s *Store) expireSkips(ctx context.Context, now time.Time, def time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM skipped_runs k
		WHERE k.last_at < $1::timestamptz - COALESCE((SELECT n.retention_ms FROM namespaces n WHERE n.name = k.namespace), $2::bigint) * interval '1 ms'`,
		now, def.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("store: expire skipped runs: %w", err)
	}
	return tag.RowsAffected(), nil
}
