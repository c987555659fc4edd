package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// dailyTables are the tables partitioned by day of scheduled_for. Their
// parents are locked in this order, the order the recorder's transactions
// use them, so maintenance cannot deadlock with them.
var dailyTables = []string{"executions", "attempts", "execution_logs"}

// MaintainHistoryPartitions makes sure executions and attempts have a daily
// partition (executions_YYYYMMDD, attempts_YYYYMMDD; UTC days) for every
// day from the day before now through daysAhead days after it. Days
// already covered are left alone, so it is idempotent and cheap when
// nothing is missing; call it regularly (say hourly) with a few days of
// look-ahead so that partitions exist well before rows arrive.
//
// A row whose day had no partition when it was written lands in the
// DEFAULT partition. Creating that day's partition later would fail while
// such rows sit in the default, so MaintainHistoryPartitions moves them into the
// new partition in the same transaction. It holds the parents' locks only
// briefly and gives up (returning an error, to be retried later) rather
// than queue the firing path behind a long query for more than a few
// seconds. Concurrent calls are serialised by an advisory lock.
func (s *Store) MaintainHistoryPartitions(ctx context.Context, now time.Time, daysAhead int) error {
	if daysAhead < 0 {
		daysAhead = 0
	}
	today := now.UTC().Truncate(24 * time.Hour)
	var days []time.Time
	for d := -1; d <= daysAhead; d++ {
		days = append(days, today.AddDate(0, 0, d))
	}
	return s.ensureDays(ctx, days)
}

// EnsureHistoryPartitions makes sure the days (UTC) of times have their executions
// and attempts partitions, creating any that is missing (as
// MaintainHistoryPartitions does), so that executions scheduled on them — a
// backfill's, a late catch-up's — land in their own day, which retention
// drops like any other, rather than in the DEFAULT partition. Days it
// made sure of are remembered, so a later call for them costs nothing.
func (s *Store) EnsureHistoryPartitions(ctx context.Context, times ...time.Time) error {
	seen := map[time.Time]bool{}
	var days []time.Time
	for _, t := range times {
		d := t.UTC().Truncate(24 * time.Hour)
		if _, known := s.days.Load(d); !known && !seen[d] {
			seen[d] = true
			days = append(days, d)
		}
	}
	if len(days) == 0 {
		return nil
	}
	if err := s.ensureDays(ctx, days); err != nil {
		return err
	}
	for _, d := range days {
		s.days.Store(d, true)
	}
	return nil
}

// ensureDays creates the executions and attempts partitions of days that
// are missing.
func (s *Store) ensureDays(ctx context.Context, days []time.Time) error {
	missing := func(ctx context.Context, q querier) (map[string][]time.Time, error) {
		out := map[string][]time.Time{}
		for _, table := range dailyTables {
			have, err := partitionsOf(ctx, q, table)
			if err != nil {
				return nil, err
			}
			for _, d := range days {
				if !have[DayPartition(table, d)] {
					out[table] = append(out[table], d)
				}
			}
		}
		return out, nil
	}
	// Look first without locking anything: usually every day exists.
	todo, err := missing(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("store: maintain partitions: %w", err)
	}
	if len(todo) == 0 {
		return nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockPartitions); err != nil {
			return err
		}
		// Another node may have done the work while we waited.
		todo, err := missing(ctx, tx)
		if err != nil || len(todo) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return err
		}
		// CREATE TABLE ... PARTITION OF takes this lock anyway; taking it
		// first means no row can reach the default partition between
		// moving its rows out and creating the partition.
		for _, table := range dailyTables {
			if len(todo[table]) == 0 {
				continue
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return fmt.Errorf("lock %s: %w", table, err)
			}
		}
		for _, table := range dailyTables {
			for _, d := range todo[table] {
				if err := createDayPartition(ctx, tx, table, d); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: maintain partitions: %w", err)
	}
	return nil
}

// createDayPartition creates table's partition for day d, moving any rows
// of that day out of the default partition into it.
func createDayPartition(ctx context.Context, tx pgx.Tx, table string, d time.Time) error {
	name := DayPartition(table, d)
	from, to := d, d.AddDate(0, 0, 1)
	def := table + "_default"
	var stranded bool
	err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+def+
		" WHERE scheduled_for >= $1 AND scheduled_for < $2)", from, to).Scan(&stranded)
	if err != nil {
		return fmt.Errorf("create %s: look into %s: %w", name, def, err)
	}
	if stranded {
		if _, err := tx.Exec(ctx, "CREATE TEMP TABLE tock_moving (LIKE "+table+") ON COMMIT DROP"); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		_, err := tx.Exec(ctx, "WITH moved AS (DELETE FROM "+def+
			" WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *)"+
			" INSERT INTO tock_moving SELECT * FROM moved", from, to)
		if err != nil {
			return fmt.Errorf("create %s: move rows out of %s: %w", name, def, err)
		}
	}
	ddl := fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
		name, table, from.Format(time.RFC3339), to.Format(time.RFC3339))
	if _, err := tx.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if stranded {
		for _, q := range []string{
			"INSERT INTO " + name + " SELECT * FROM tock_moving",
			"DROP TABLE tock_moving",
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("create %s: move rows into it: %w", name, err)
			}
		}
	}
	return nil
}

// DayPartition is the name of table's (executions' or attempts')
// partition for the UTC day of d: executions_YYYYMMDD. Package archive
// reads the partitions by this name.
func DayPartition(table string, d time.Time) string {
	return table + "_" + d.UTC().Format("20060102")
}
