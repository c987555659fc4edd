package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tock-sched/tock/store/model"
)

// Maintenance runs fn (a maintenance pass: partitions ahead, retention,
// archival) while this node holds the cluster's maintenance lock, a
// session advisory lock on a connection of its own, so that one node at
// a time does the work. With wait false it returns ran false at once
// when another node holds the lock (every node tries every few minutes;
// one of them does it); with wait true it waits for the lock. The lock
// goes with its connection if the node dies; a connection whose unlock
// failed is closed rather than returned to the pool still holding it.
func (s *Store) Maintenance(ctx context.Context, wait bool, fn func(context.Context) error) (ran bool, err error) {
	return s.sessionLocked(ctx, "maintenance", lockMaintenance, wait, fn)
}

// SilenceSweep runs fn (a sweep for silent jobs, package notify) while
// this node holds the cluster's silence lock, as Maintenance does with
// its own: ran is false when another node's sweep is under way.
func (s *Store) SilenceSweep(ctx context.Context, fn func(context.Context) error) (ran bool, err error) {
	return s.sessionLocked(ctx, "silence", lockSilence, false, fn)
}

// sessionLocked runs fn under the session advisory lock key (named what)
// on a connection of its own; see Maintenance.
func (s *Store) sessionLocked(ctx context.Context, what string, key int64, wait bool, fn func(context.Context) error) (ran bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("store: %s lock: %w", what, err)
	}
	got := true
	if wait {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
	} else {
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got)
	}
	if err != nil || !got {
		conn.Release()
		if err != nil {
			return false, fmt.Errorf("store: %s lock: %w", what, err)
		}
		return false, nil
	}
	err = fn(ctx)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, uerr := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", key); uerr != nil {
		_ = conn.Hijack().Close(uctx)
		return true, err
	}
	conn.Release()
	return true, err
}

// ApplyRetention deletes history past its retention, as of now. A
// namespace's retention is its own, or p.Default, the cluster's.
//
//   - A day's executions and attempts partitions are dropped, whole, once
//     the day has ended more than the retention ago of every namespace
//     with executions in it: the cheap common path, never a row-by-row
//     DELETE over a big table. The DEFAULT partitions are left alone.
//   - From a day that is kept, because another namespace with rows in it
//     keeps its history longer (or has not reached its retention yet),
//     a namespace's ended executions (succeeded, dead or cancelled) are
//     deleted, with their attempts, once past its retention: to the row
//     (scheduled more than the retention ago) for a namespace whose
//     retention is shorter than p.Default (model.ToTheRow), with its day
//     (the day ended more than the retention ago) for any other, as the
//     day's drop would have. An execution still queued, running or
//     failed (waiting for its retry) is kept until it ends. They are
//     deleted in batches of p.DeleteBatch, each a short transaction of
//     its own that locks only the rows it deletes, with a pause between
//     them (deleteRows): firing inserts into today's partition and
//     recording updates executions that have not ended, so neither waits
//     for them.
//   - Skipped-run records are deleted past their namespace's retention,
//     and so are notifications (sent or given up) and their events.
//   - Completed one-shot jobs are deleted p.CompletedJobs (if above 0)
//     after they completed, with their last successes.
//
// With p.Archive set, each day is archived before it is dropped, and with
// p.ArchiveRows a namespace's executions before they are deleted from a
// kept day, oldest day first. A day or rows whose archiving fails are
// neither dropped nor deleted, nor is anything of a later day in this
// pass (the next pass tries again from there); the rest of the pass goes
// on, and ApplyRetention returns the archiving error at the end.
//
// Each day is dropped as dropDay says: its partitions emptied, then the
// empty tables dropped with short lock waits, so that it never queues
// firing or recording behind it for long; a day it could not drop is
// dropped by a later pass. tockd runs passes under Maintenance, one at a
// time in the cluster.
func (s *Store) ApplyRetention(ctx context.Context, now time.Time, p model.RetentionPolicy) (model.RetentionResult, error) {
	var res model.RetentionResult
	archiveErr, err := s.dropDays(ctx, now, p, &res)
	if err != nil {
		return res, err
	}
	if res.SkippedRanges, err = s.expireSkips(ctx, now, p.Default); err != nil {
		return res, err
	}
	if res.Notifications, err = s.expireNotifications(ctx, now, p.Default); err != nil {
		return res, err
	}
	if err = s.expireNotes(ctx, now, p.Default); err != nil {
		return res, err
	}
	if err = s.expireUpstreamLinks(ctx); err != nil {
		return res, err
	}
	if p.CompletedJobs > 0 {
		// The jobs, then their names and last successes, each table's
		// rows locked in key order (store/doc.go, Lock order): as they
		// were met, the last successes deadlocked with recorders moving
		// them (a late success of a one-shot job).
		const completed = `state = 'completed' AND schedule->>'cron' IS NULL AND updated_at < $1`
		tag, err := s.pool.Exec(ctx, `WITH gone AS (
				DELETE FROM jobs WHERE (bucket, id) IN (SELECT bucket, id FROM jobs WHERE `+completed+`
					ORDER BY bucket, id FOR UPDATE) AND `+completed+`
				RETURNING id
			), successes AS (
				DELETE FROM job_successes WHERE job_id IN (SELECT job_id FROM job_successes
					WHERE job_id IN (SELECT id FROM gone) ORDER BY job_id FOR UPDATE))
			DELETE FROM job_names WHERE job_id IN (SELECT id FROM gone)`, now.Add(-p.CompletedJobs))
		if err != nil {
			return res, fmt.Errorf("store: delete completed jobs: %w", err)
		}
		res.CompletedJobs = tag.RowsAffected()
	}
	return res, archiveErr
}

// expireUpstreamLinks deletes the dependency links (execution_upstreams)
// of executions whose day is gone: those scheduled before the oldest day
// partition left. (Links of executions a namespace's retention deleted
// from a kept day go with that day.)
func (s *Store) expireUpstreamLinks(ctx context.Context) error {
	days, err := s.ListHistoryDays(ctx)
	if err != nil || len(days) == 0 {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM execution_upstreams WHERE scheduled_for < $1`, days[0]); err != nil {
		return fmt.Errorf("store: retention: dependency links: %w", err)
	}
	return nil
}

// dropDays drops (archiving first, if p says so) the days past
// retention, and deletes the rows past retention from the days it keeps
// (trimDay), oldest day first, recording what it did in res. It stops at
// the first day or rows it could not archive and returns that error as
// archiveErr, apart from the errors that end the pass.
func (s *Store) dropDays(ctx context.Context, now time.Time, p model.RetentionPolicy, res *model.RetentionResult) (archiveErr, err error) {
	retentions, err := s.namespaceRetentions(ctx)
	if err != nil {
		return nil, err
	}
	shortest := p.Default
	for _, d := range retentions {
		shortest = min(shortest, d)
	}
	days, err := s.ListHistoryDays(ctx)
	if err != nil {
		return nil, err
	}
	for _, day := range days {
		end := day.Add(24 * time.Hour)
		if !day.Add(shortest).Before(now) {
			continue // none of its rows is past any retention
		}
		if !end.Add(shortest).After(now) {
			keep, err := s.dayKept(ctx, day, now, p.Default, retentions)
			if err != nil {
				return nil, err
			}
			if !keep {
				if archiveErr, err := s.archiveAndDrop(ctx, day, p, res); archiveErr != nil || err != nil {
					return archiveErr, err
				}
				continue
			}
			if !end.Add(p.Default).After(now) {
				res.Kept = append(res.Kept, day)
			}
		}
		if archiveErr, err := s.trimDay(ctx, day, now, p, retentions, res); archiveErr != nil || err != nil {
			return archiveErr, err
		}
	}
	return nil, nil
}

// archiveAndDrop drops day (archiving it first, if p says so), recording
// it in res. A day it could not archive is left, and the error returned
// as archiveErr.
func (s *Store) archiveAndDrop(ctx context.Context, day time.Time, p model.RetentionPolicy, res *model.RetentionResult) (archiveErr, err error) {
	if p.Archive != nil {
		// A day emptied by an earlier pass (its drop did not get the
		// lock) was archived then: archiving it again would replace its
		// files with empty ones. So would archiving a day whose rows
		// were all deleted, archived, by trimDay.
		empty, err := s.dayEmpty(ctx, day)
		if err != nil {
			return nil, err
		}
		if !empty {
			if err := p.Archive(ctx, day); err != nil {
				return fmt.Errorf("store: retention: archive %s (not dropped): %w", day.Format(time.DateOnly), err), nil
			}
			res.Archived = append(res.Archived, day)
		}
	}
	if err := s.dropDay(ctx, day); err != nil {
		return nil, err
	}
	s.days.Delete(day)
	res.Dropped = append(res.Dropped, day)
	return nil, nil
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

// ListHistoryDays are the days of the executions table's day partitions,
// oldest first.
func (s *Store) ListHistoryDays(ctx context.Context) ([]time.Time, error) {
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
	q := "SELECT EXISTS (SELECT 1 FROM " + DayPartition("executions", day) + " WHERE namespace = ANY($1))"
	arg := keepers
	if end.Add(def).After(now) {
		// The cluster's retention keeps the day for every namespace but
		// those whose own, shorter, retention ran out.
		q = "SELECT EXISTS (SELECT 1 FROM " + DayPartition("executions", day) + " WHERE namespace <> ALL($1))"
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

// Waiting for the parent tables' lock when dropping a day's empty
// partitions (dropDay).
const (
	// dropLockWait is how long one try waits for the lock: while it
	// waits, every statement on executions queues behind it, firing
	// included.
	dropLockWait = 50 * time.Millisecond
	// dropTries is how many tries a pass makes, backing off from 100 ms
	// to 2 s between them (about half a minute in all).
	dropTries = 20
)

// dropDay drops day's partitions of executions and attempts, in two
// steps, each locking executions before attempts, the order the
// recorder's transactions take them (see dailyTables), so that it
// cannot deadlock with them.
//
// The first empties them with TRUNCATE, which locks only the partitions
// themselves: the commit that unlinks their files (168 ms for a day of
// 1,000,000 executions here) holds no lock on the parent tables, so
// firing, which inserts into today's partition, goes on. It takes their
// locks with NOWAIT, tried as often as the drop (below): a transaction
// that waited for them would queue behind it a recorder asking for the
// partition in the middle of its transaction (the fast statements lock
// a day's partition when they reach it, holding rows of earlier days),
// while another recorder that holds the partition (a lock read plans
// every day it reads) waits for that one's rows: a cycle (store/doc.go,
// Lock order), rare as events of a day past retention are.
//
// The second drops the empty tables, under the partitions' advisory
// lock. DROP TABLE of a partition takes the parent's ACCESS EXCLUSIVE
// lock, and a lock request that waits queues every later statement on
// the table behind it: behind an ANALYZE of executions (which holds a
// lock that conflicts) firing stalled for 366 ms, and the drop took 2 s.
// So each try waits at most dropLockWait (50 ms) and gives up, and the
// next try comes after a pause; once it has the lock, dropping empty
// tables takes a few milliseconds. A day whose empty partitions could not
// be dropped after dropTries is left for the next pass, which finds it
// empty.
func (s *Store) dropDay(ctx context.Context, day time.Time) error {
	step := func(advisory bool, wait time.Duration, sqls ...string) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if advisory {
				if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockPartitions); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", wait.Milliseconds())); err != nil {
				return err
			}
			for _, sql := range sqls {
				if _, err := tx.Exec(ctx, sql); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// tries runs a step until it gets its locks, dropTries times at
	// most, with a growing pause between tries.
	tries := func(step func() error) error {
		pause := 100 * time.Millisecond
		for try := 1; ; try++ {
			err := step()
			if !isLockTimeout(err) || try == dropTries {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, 2*time.Second)
		}
	}
	var names, present []string
	var err error
	for _, table := range dailyTables {
		name := DayPartition(table, day)
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
		list := strings.Join(present, ", ")
		err = tries(func() error {
			return step(false, 5*time.Second, "LOCK TABLE "+list+" IN ACCESS EXCLUSIVE MODE NOWAIT", "TRUNCATE "+list)
		})
	}
	if err == nil {
		err = tries(func() error { return step(true, dropLockWait, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")) })
	}
	if err != nil {
		return fmt.Errorf("store: drop the partitions of %s: %w", day.Format(time.DateOnly), err)
	}
	return nil
}

// isLockTimeout reports whether err is a lock_not_available (55P03):
// lock_timeout ran out.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// dayEmpty reports whether day's executions and attempts partitions
// hold no row (a day emptied by a pass whose drop did not get its lock).
func (s *Store) dayEmpty(ctx context.Context, day time.Time) (bool, error) {
	var empty bool
	err := s.pool.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM "+DayPartition("executions", day)+
		") AND NOT EXISTS (SELECT 1 FROM "+DayPartition("attempts", day)+")").Scan(&empty)
	if err != nil {
		return false, fmt.Errorf("store: retention: is %s empty: %w", day.Format(time.DateOnly), err)
	}
	return empty, nil
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

// expireNotifications deletes the notifications that are over (sent or
// failed) past their namespace's retention (def when it has none), and
// the events they were made of.
func (s *Store) expireNotifications(ctx context.Context, now time.Time, def time.Duration) (int64, error) {
	const past = `$1::timestamptz - COALESCE((SELECT n.retention_ms FROM namespaces n WHERE n.name = x.namespace), $2::bigint) * interval '1 ms'`
	tag, err := s.pool.Exec(ctx, `DELETE FROM notifications x WHERE x.state <> 'pending' AND x.created_at < `+past,
		now, def.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("store: expire notifications: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM notification_events x WHERE x.grouped_at IS NOT NULL AND x.at < `+past,
		now, def.Milliseconds()); err != nil {
		return 0, fmt.Errorf("store: expire notification events: %w", err)
	}
	return tag.RowsAffected(), nil
}
