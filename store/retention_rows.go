package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// finalStates selects the executions retention deletes from a kept day:
// those that have ended for good. A failed execution waits for its
// retry. The list implies the partial executions_namespace index's
// predicate (endedStates), so that a namespace's rows of a day are found
// through it.
const finalStates = "state IN ('succeeded', 'dead', 'cancelled')"

const (
	// deleteBatch is how many executions one transaction deletes when
	// RetentionPolicy.DeleteBatch is 0: a few tens of milliseconds of
	// row locks on rows nothing else writes.
	deleteBatch = 5000
	// archiveChunk is how many executions one RetentionPolicy.ArchiveRows
	// call writes, one file per table: the keys of the rows written are
	// kept in memory until they are deleted (about 40 bytes each).
	archiveChunk = 500_000
	// deleteLockWait is how long a delete's transaction waits for a lock
	// (a row a late event is recording, a partition being created)
	// before it gives up and tries again, deleteTries times.
	deleteLockWait = 500 * time.Millisecond
	deleteTries    = 5
)

// trimDay deletes from day, which is kept, the ended executions (and
// their attempts) of the namespaces past their retention in it: those
// whose retention is shorter than p.Default (model.ToTheRow) to the row,
// scheduled more than the retention before now; any other namespace's
// all, once the day has ended more than its retention ago (a day that
// a namespace with a longer retention keeps). See ApplyRetention.
func (s *Store) trimDay(ctx context.Context, day, now time.Time, p model.RetentionPolicy,
	retentions map[string]time.Duration, res *model.RetentionResult) (archiveErr, err error) {
	end := day.Add(24 * time.Hour)
	cuts := map[string]time.Time{} // namespace → the end of what goes
	for ns, r := range retentions {
		if model.ToTheRow(r, p.Default) && day.Add(r).Before(now) {
			cuts[ns] = minTime(now.Add(-r), end)
		}
	}
	if !end.Add(p.Default).After(now) {
		// Past the cluster's retention, so kept by a longer one: the
		// namespaces on the cluster's retention (or a longer one of
		// their own, past too) go.
		names, err := s.dayNamespaces(ctx, day)
		if err != nil {
			return nil, err
		}
		for _, ns := range names {
			r, own := retentions[ns]
			if !own {
				r = p.Default
			}
			if !model.ToTheRow(r, p.Default) && !end.Add(r).After(now) {
				cuts[ns] = end
			}
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(cuts)) {
		if archiveErr, err := s.deleteNamespaceRows(ctx, day, ns, cuts[ns], p, res); archiveErr != nil || err != nil {
			return archiveErr, err
		}
	}
	return nil, nil
}

// dayNamespaces are the namespaces with ended executions in day's
// partition, read from the executions_namespace index one namespace at
// a time (a loose index scan): one index descent per namespace, however
// many rows.
func (s *Store) dayNamespaces(ctx context.Context, day time.Time) ([]string, error) {
	part := DayPartition("executions", day)
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE ns (name) AS (
			(SELECT namespace FROM `+part+` WHERE `+endedStates+` ORDER BY namespace LIMIT 1)
			UNION ALL
			SELECT (SELECT namespace FROM `+part+` WHERE `+endedStates+` AND namespace > ns.name ORDER BY namespace LIMIT 1)
			FROM ns WHERE ns.name IS NOT NULL)
		SELECT name FROM ns WHERE name IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: retention: namespaces of %s: %w", day.Format(time.DateOnly), err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: retention: namespaces of %s: %w", day.Format(time.DateOnly), err)
	}
	return names, nil
}

// deleteNamespaceRows deletes namespace ns's ended executions of day
// scheduled before before, with their attempts, in batches (deleteRows).
// With p.ArchiveRows set, they are archived first, archiveChunk at a
// time, and only the executions archived are deleted: one that ends
// meanwhile waits for the next pass. An archiving error is returned as
// archiveErr, and the rows it was about are not deleted.
func (s *Store) deleteNamespaceRows(ctx context.Context, day time.Time, ns string, before time.Time,
	p model.RetentionPolicy, res *model.RetentionResult) (archiveErr, err error) {
	execs, atts, logs := DayPartition("executions", day), DayPartition("attempts", day), DayPartition("execution_logs", day)
	date := day.Format(time.DateOnly)
	batch := cmp.Or(p.DeleteBatch, deleteBatch)
	if p.Archive != nil && p.ArchiveRows == nil {
		// Days are archived: rows are not deleted unwritten.
		return fmt.Errorf("store: retention: the executions of %s on %s not deleted: days are archived, rows cannot be", ns, date), nil
	}
	// The attempts of the executions deleted, which share their day's
	// partition (both are partitioned by the execution's scheduled time).
	// Their logs likewise (locked after the attempts, store/doc.go).
	const attemptsOf = `, att AS (DELETE FROM %s a USING gone WHERE a.execution_id = gone.id AND a.scheduled_for = gone.scheduled_for RETURNING 1)` +
		`, lg AS (DELETE FROM %s l USING gone WHERE l.execution_id = gone.id AND l.scheduled_for = gone.scheduled_for RETURNING 1)`
	if p.ArchiveRows == nil {
		// A batch: the next batch's executions in the namespace index's
		// order, from the last one's scheduled time on (the rows deleted
		// before it are dead by then; those at the same time are read
		// again), locked in id order (store/doc.go, Lock order: in the
		// TID scan's order, the partition's, a batch deadlocked with
		// recorders writing late events of its executions), then
		// deleted, both by their row addresses (a TID scan: no index
		// descent, nor a join the planner could make a scan of the
		// partition). A row updated meanwhile has moved and is left
		// (locked, not deleted).
		q := `WITH k AS MATERIALIZED (SELECT ctid, scheduled_for FROM ` + execs + ` WHERE namespace = $1 AND ` + finalStates + `
				AND scheduled_for >= $2 AND scheduled_for < $3 ORDER BY scheduled_for LIMIT $4),
			l AS MATERIALIZED (SELECT x.ctid FROM ` + execs + ` x WHERE x.ctid = ANY (ARRAY(SELECT ctid FROM k))
				AND x.` + finalStates + ` ORDER BY x.id FOR UPDATE),
			gone AS (DELETE FROM ` + execs + ` x WHERE x.ctid = ANY (ARRAY(SELECT ctid FROM l))
				AND x.` + finalStates + ` RETURNING x.id, x.scheduled_for)` + fmt.Sprintf(attemptsOf, atts, logs) + `
			SELECT (SELECT count(*) FROM k), (SELECT max(scheduled_for) FROM k), (SELECT count(*) FROM gone), (SELECT count(*) FROM att),
				(SELECT count(*) FROM lg)`
		from := day
		for {
			var selected, n, a, l int64
			var last *time.Time
			took, err := s.deleteRows(ctx, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, q, ns, from, before, batch).Scan(&selected, &last, &n, &a, &l)
			})
			if err != nil {
				return nil, fmt.Errorf("store: retention: delete the executions of %s on %s: %w", ns, date, err)
			}
			res.Deleted, res.DeletedAttempts, res.DeletedLogChunks = res.Deleted+n, res.DeletedAttempts+a, res.DeletedLogChunks+l
			if selected < int64(batch) || last == nil {
				return nil, nil
			}
			from = *last
			if err := pauseAfter(ctx, p, took); err != nil {
				return nil, err
			}
		}
	}
	// Ask before archiving: usually there is nothing to archive.
	var some bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+execs+` WHERE namespace = $1 AND `+finalStates+`
			AND scheduled_for < $2)`, ns, before).Scan(&some); err != nil {
		return nil, fmt.Errorf("store: retention: executions of %s on %s: %w", ns, date, err)
	}
	if !some {
		return nil, nil
	}
	// By the primary key's index (an execution's id is unique on its
	// own), locked in id order first (store/doc.go, Lock order: the
	// delete alone may meet them in a bitmap scan's order, the
	// partition's).
	q := `WITH l AS MATERIALIZED (SELECT id FROM ` + execs + ` WHERE id = ANY ($1::uuid[]) AND ` + finalStates + `
			ORDER BY id FOR UPDATE),
		gone AS (DELETE FROM ` + execs + ` x WHERE x.id = ANY (ARRAY(SELECT id FROM l)) AND x.` + finalStates + `
			RETURNING x.id, x.scheduled_for)` +
		fmt.Sprintf(attemptsOf, atts, logs) + `
		SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM att), (SELECT count(*) FROM lg)`
	sel := model.RowSelection{Day: day, Namespace: ns, Before: before, Limit: archiveChunk}
	for {
		keys, err := p.ArchiveRows(ctx, sel)
		if err != nil {
			return fmt.Errorf("store: retention: archive the executions of %s on %s (not deleted): %w", ns, date, err), nil
		}
		res.ArchivedRows += int64(len(keys))
		for chunk := range slices.Chunk(keys, batch) {
			ids := make([]uuid.UUID, len(chunk))
			for i, k := range chunk {
				ids[i] = k.ID
			}
			var n, a, l int64
			took, err := s.deleteRows(ctx, func(tx pgx.Tx) error { return tx.QueryRow(ctx, q, ids).Scan(&n, &a, &l) })
			if err != nil {
				return nil, fmt.Errorf("store: retention: delete the archived executions of %s on %s: %w", ns, date, err)
			}
			res.Deleted, res.DeletedAttempts, res.DeletedLogChunks = res.Deleted+n, res.DeletedAttempts+a, res.DeletedLogChunks+l
			if err := pauseAfter(ctx, p, took); err != nil {
				return nil, err
			}
		}
		if len(keys) < sel.Limit {
			return nil, nil
		}
		sel.After = keys[len(keys)-1]
	}
}

// deleteRows runs one batch of a delete (fn) in a transaction of its
// own that waits at most deleteLockWait for a lock, trying again after a
// pause when it did (deleteTries in all), and returns how long it took.
// A batch's DELETE takes the day partition's ROW EXCLUSIVE lock, which
// firing and recording take too and which conflicts with neither, and
// the locks of the rows it deletes, in id order, then their attempts'
// (store/doc.go, Lock order): ended executions, which recording writes
// only for a late or repeated event (which waits for the batch's commit,
// a few tens of milliseconds), and firing never.
func (s *Store) deleteRows(ctx context.Context, fn func(pgx.Tx) error) (time.Duration, error) {
	began := time.Now()
	var err error
	for try := 1; ; try++ {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", deleteLockWait.Milliseconds())); err != nil {
				return err
			}
			// A batch's rows are found by their keys, or their addresses,
			// a few thousand in a large partition: by the primary keys'
			// indexes, never by scanning a partition nor by hashing one
			// (the planner cannot tell a CTE's or an array's size).
			if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '60s'; SET LOCAL enable_seqscan = off; "+
				"SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off"); err != nil {
				return err
			}
			return fn(tx)
		})
		if !isLockTimeout(err) || try == deleteTries {
			break
		}
		if err := sleep(ctx, time.Duration(try)*200*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return time.Since(began), err
}

// pauseAfter pauses between two batches as p says: p.DeletePause, or as
// long as the batch took (took) when it is 0.
func pauseAfter(ctx context.Context, p model.RetentionPolicy, took time.Duration) error {
	pause := p.DeletePause
	if pause == 0 {
		pause = took
	}
	return sleep(ctx, pause)
}

// sleep waits d (nothing when it is 0 or less), or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
