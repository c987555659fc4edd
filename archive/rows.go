package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// RowsResult is what Rows wrote.
type RowsResult struct {
	// Executions, Attempts and Logs are its files; all are zero when the
	// selection held no execution (nothing is written then).
	Executions, Attempts, Logs File
	// Keys are the executions written, in the file's order.
	Keys []model.ExecutionKey
}

// Rows writes the executions sel selects — namespace sel.Namespace's
// ended executions (succeeded, dead or cancelled) of sel.Day scheduled
// before sel.Before and after sel.After, in (scheduled time, id) order,
// the first sel.Limit — and their attempts, to
//
//	DIR/executions/YYYY-MM-DD.NAMESPACE.N.parquet
//	DIR/attempts/YYYY-MM-DD.NAMESPACE.N.parquet
//	DIR/logs/YYYY-MM-DD.NAMESPACE.N.parquet
//
// N being the first number (from 1) that neither table's directory has
// for the day and namespace yet: a file is never replaced. They are what
// retention deletes from a day it keeps (store.ApplyRetention), written
// before they are deleted; the day's own files (Day), written when the
// day is dropped, hold the rest. They are read in one read-only,
// repeatable-read transaction, so the two files agree, and written as
// Day writes its files: complete and durable when Rows returns nil. If
// the attempts file fails, the executions file is removed. A selection
// without rows writes nothing; a day without partitions fails with
// ErrNoPartition.
func Rows(ctx context.Context, db DB, dir string, sel model.RowSelection) (RowsResult, error) {
	return writeRows(ctx, db, dir, sel, rowGroupRows)
}

// writeRows is Rows with row groups of at most groupRows rows.
func writeRows(ctx context.Context, db DB, dir string, sel model.RowSelection, groupRows int64) (RowsResult, error) {
	var res RowsResult
	day := sel.Day.UTC().Truncate(24 * time.Hour)
	date := day.Format(time.DateOnly)
	fail := func(err error) (RowsResult, error) {
		return res, fmt.Errorf("archive: executions of %s on %s: %w", sel.Namespace, date, err)
	}
	if sel.Limit <= 0 {
		return fail(errors.New("no limit"))
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	execs, attempts := store.DayPartition("executions", day), store.DayPartition("attempts", day)
	for _, name := range []string{execs, attempts} {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
			return fail(err)
		}
		if !exists {
			return fail(fmt.Errorf("%w (%s: dropped already, or never created)", ErrNoPartition, name))
		}
	}
	after := sel.After
	if after.ScheduledFor.IsZero() {
		after = model.ExecutionKey{ScheduledFor: day.Add(-time.Microsecond)}
	}
	// The selection, as a WHERE clause of the executions partition
	// aliased x with its arguments; ordered and limited by the callers.
	// (The partial executions_namespace index holds these rows in
	// scheduled order: its range starts at After's time.)
	const where = ` WHERE x.namespace = $1 AND x.state IN ('succeeded', 'dead', 'cancelled')
		AND x.scheduled_for < $2 AND x.scheduled_for >= $3 AND (x.scheduled_for, x.id) > ($3, $4)`
	args := []any{sel.Namespace, sel.Before, after.ScheduledFor, after.ID, sel.Limit}
	var some bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+execs+" x"+where+")", args[:4]...).Scan(&some); err != nil {
		return fail(err)
	}
	if !some {
		return res, nil
	}
	n, err := freeNumber(dir, date, sel.Namespace)
	if err != nil {
		return fail(err)
	}
	w := fileWriter{dir: dir, date: date, groupRows: groupRows, name: date + "." + sel.Namespace + "." + strconv.Itoa(n)}
	keep := func(e *Execution) error {
		id, err := uuid.Parse(e.ID)
		res.Keys = append(res.Keys, model.ExecutionKey{ID: id, ScheduledFor: e.ScheduledFor})
		return err
	}
	res.Executions, err = writeTable(ctx, tx, w, "executions",
		"SELECT "+selectList[Execution](true)+" FROM "+execs+" x LEFT JOIN job_specs sp ON sp.id = x.spec_id"+where+
			" ORDER BY x.scheduled_for, x.id LIMIT $5", keep, args...)
	if err != nil {
		res.Keys = nil
		return res, err
	}
	res.Attempts, err = writeTable[Attempt](ctx, tx, w, "attempts",
		"SELECT "+selectList[Attempt](false)+" FROM "+attempts+" x WHERE (x.execution_id, x.scheduled_for) IN"+
			" (SELECT x.id, x.scheduled_for FROM "+execs+" x"+where+" ORDER BY x.scheduled_for, x.id LIMIT $5)"+
			" ORDER BY x.scheduled_for, x.execution_id, x.number", nil, args...)
	if err != nil {
		// Its rows stay in Postgres, to be written again: a lone
		// executions file would hold them twice.
		if rerr := os.Remove(res.Executions.Path); rerr == nil {
			_ = syncDir(filepath.Dir(res.Executions.Path))
		}
		res.Keys = nil
		return res, err
	}
	logs := store.DayPartition("execution_logs", day)
	var hasLogs bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", logs).Scan(&hasLogs); err != nil {
		return fail(err)
	}
	if hasLogs {
		res.Logs, err = writeTable[Log](ctx, tx, w, "logs",
			"SELECT "+selectList[Log](false)+" FROM "+logs+" x WHERE (x.execution_id, x.scheduled_for) IN"+
				" (SELECT x.id, x.scheduled_for FROM "+execs+" x"+where+" ORDER BY x.scheduled_for, x.id LIMIT $5)"+
				" ORDER BY x.scheduled_for, x.execution_id, x.attempt, x.seq", nil, args...)
		if err != nil {
			for _, path := range []string{res.Executions.Path, res.Attempts.Path} {
				if rerr := os.Remove(path); rerr == nil {
					_ = syncDir(filepath.Dir(path))
				}
			}
			res.Keys = nil
			return res, err
		}
	}
	return res, nil
}

// freeNumber is the first N from 1 for which no table's directory
// has a file DATE.NAMESPACE.N.parquet.
func freeNumber(dir, date, ns string) (int, error) {
	for n := 1; ; n++ {
		free := true
		for _, table := range []string{"executions", "attempts", "logs"} {
			_, err := os.Stat(filepath.Join(dir, table, date+"."+ns+"."+strconv.Itoa(n)+".parquet"))
			if err == nil {
				free = false
			} else if !errors.Is(err, os.ErrNotExist) {
				return 0, err
			}
		}
		if free {
			return n, nil
		}
	}
}
