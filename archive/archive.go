// Package archive writes a day of execution history out of PostgreSQL as
// Parquet files, so that retention can drop the day's partitions without
// losing it.
//
// Day writes the day's executions, attempts and execution logs
// partitions to
//
//	DIR/executions/YYYY-MM-DD.parquet
//	DIR/attempts/YYYY-MM-DD.parquet
//	DIR/logs/YYYY-MM-DD.parquet
//
// zstd-compressed, in row groups of at most 100,000 rows, with the
// columns of Execution, Attempt and Log. Rows writes the executions of one
// namespace that retention deletes from a day it keeps, beside them:
//
//	DIR/executions/YYYY-MM-DD.NAMESPACE.N.parquet
//	DIR/attempts/YYYY-MM-DD.NAMESPACE.N.parquet
//	DIR/logs/YYYY-MM-DD.NAMESPACE.N.parquet
//
// so that every row of a day is in exactly one of its files (barring a
// pass that failed between writing and deleting). DuckDB reads a range of
// days with read_parquet('DIR/executions/*.parquet'), pandas with
// pd.read_parquet('DIR/executions').
package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/tock-sched/tock/store"
)

// rowGroupRows is the most rows a row group holds. A writer keeps one row
// group in memory (its columns, compressed page by page) until it is
// full, so this bounds the memory archiving a day takes, whatever the
// day's size.
const rowGroupRows = 100_000

// ErrNoPartition is returned by Day for a day whose partitions do not
// exist: dropped already, or never created.
var ErrNoPartition = errors.New("no partition for the day")

// DB is the database Day reads: a *pgxpool.Pool or a *pgx.Conn.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Result is what Day wrote.
type Result struct {
	// Day is the day archived (UTC midnight).
	Day time.Time
	// Executions, Attempts and Logs are its files (Logs zero for a day
	// without a logs partition: one dropped before logs existed).
	Executions, Attempts, Logs File
}

// File is a Parquet file Day wrote.
type File struct {
	// Path is where it is.
	Path string
	// Rows counts the rows written to it.
	Rows int64
	// Bytes is its size.
	Bytes int64
}

// Day writes the executions and attempts of day (the UTC day of the time
// given) to DIR/executions/YYYY-MM-DD.parquet and
// DIR/attempts/YYYY-MM-DD.parquet, reading the day's partitions
// (store.DayPartition) in one read-only, repeatable-read transaction, so
// the two files are a consistent snapshot. Rows are streamed, ordered by
// scheduled_for then id (attempts: then number), so memory stays bounded
// by one row group however large the day.
//
// Each file is written to a hidden temporary file in its directory,
// synced, renamed into place and its directory synced: when Day returns
// nil, both files are complete and durable, and a reader never sees a
// partial one. A file already there (an earlier run) is replaced; if the
// attempts file fails after the executions file was replaced, the pair
// disagrees until the next call rewrites both. A day without partitions
// fails with ErrNoPartition and writes nothing.
func Day(ctx context.Context, db DB, dir string, day time.Time) (Result, error) {
	return writeDay(ctx, db, dir, day, rowGroupRows)
}

// writeDay is Day with row groups of at most groupRows rows.
func writeDay(ctx context.Context, db DB, dir string, day time.Time, groupRows int64) (Result, error) {
	day = day.UTC().Truncate(24 * time.Hour)
	res := Result{Day: day}
	date := day.Format(time.DateOnly)
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return res, fmt.Errorf("archive: %s: %w", date, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	execs, attempts := store.DayPartition("executions", day), store.DayPartition("attempts", day)
	for _, name := range []string{execs, attempts} {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
			return res, fmt.Errorf("archive: %s: %w", date, err)
		}
		if !exists {
			return res, fmt.Errorf("archive: %s: %w (%s: dropped already, or never created)", date, ErrNoPartition, name)
		}
	}
	w := fileWriter{dir: dir, date: date, groupRows: groupRows}
	res.Executions, err = writeTable[Execution](ctx, tx, w, "executions",
		"SELECT "+selectList[Execution](true)+" FROM "+execs+" x LEFT JOIN job_specs sp ON sp.id = x.spec_id"+
			" ORDER BY x.scheduled_for, x.id", nil)
	if err != nil {
		return res, err
	}
	res.Attempts, err = writeTable[Attempt](ctx, tx, w, "attempts",
		"SELECT "+selectList[Attempt](false)+" FROM "+attempts+" x ORDER BY x.scheduled_for, x.execution_id, x.number", nil)
	if err != nil {
		return res, err
	}
	logs := store.DayPartition("execution_logs", day)
	var hasLogs bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", logs).Scan(&hasLogs); err != nil || !hasLogs {
		return res, err
	}
	res.Logs, err = writeTable[Log](ctx, tx, w, "logs",
		"SELECT "+selectList[Log](false)+" FROM "+logs+" x ORDER BY x.scheduled_for, x.execution_id, x.attempt, x.seq", nil)
	return res, err
}

// fileWriter says where and how a day's files are written.
type fileWriter struct {
	dir, date string
	groupRows int64
	// name is the files' name (without .parquet) when it is not the
	// date; such a file is new: one already there is not replaced.
	name string
}

// writeTable writes the rows of query, of type T, to table's file of the
// day, calling seen (if not nil) with each.
func writeTable[T any](ctx context.Context, tx pgx.Tx, w fileWriter, table, query string, seen func(*T) error, args ...any) (File, error) {
	name, replace := w.name, false
	if name == "" {
		name, replace = w.date, true
	}
	f := File{Path: filepath.Join(w.dir, table, name+".parquet")}
	var err error
	f.Rows, f.Bytes, err = writeAtomically(f.Path, replace, func(out *os.File) (int64, error) {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		pw := parquet.NewGenericWriter[T](out,
			parquet.Compression(&zstd.Codec{}),
			parquet.MaxRowsPerRowGroup(w.groupRows),
			parquet.KeyValueMetadata("tock.table", table),
			parquet.KeyValueMetadata("tock.day", w.date))
		n, err := copyRows(rows, pw, seen)
		if err != nil {
			return n, err
		}
		return n, pw.Close()
	})
	if err != nil {
		return f, fmt.Errorf("archive: %s of %s to %s: %w", table, w.date, f.Path, err)
	}
	return f, nil
}

// copyRows writes rows to pw in batches, calling seen (if not nil) with
// each, and returns how many.
func copyRows[T any](rows pgx.Rows, pw *parquet.GenericWriter[T], seen func(*T) error) (int64, error) {
	const batch = 1000
	var n int64
	buf := make([]T, 0, batch)
	flush := func() error {
		_, err := pw.Write(buf)
		n += int64(len(buf))
		buf = buf[:0]
		return err
	}
	for rows.Next() {
		r, err := pgx.RowToStructByPos[T](rows)
		if err != nil {
			return n, err
		}
		if seen != nil {
			if err := seen(&r); err != nil {
				return n, err
			}
		}
		if buf = append(buf, r); len(buf) == batch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// writeAtomically makes the file path with write, through a hidden
// temporary file in the same directory: written, synced, closed, renamed
// over path (with replace; without it, linked to path, which fails if
// path exists, then removed), and the directory synced, so that path is
// either its old self or the whole new file, also after a crash. It
// returns what write returned and the file's size. The file is readable
// by its owner only (0600): it holds the executions' payloads and
// outputs.
func writeAtomically(path string, replace bool, write func(*os.File) (int64, error)) (n, size int64, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, 0, err
	}
	// The directory may be new: make its own entry durable too.
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return 0, 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if n, err = write(tmp); err != nil {
		return n, 0, err
	}
	if err = tmp.Sync(); err != nil {
		return n, 0, err
	}
	st, err := tmp.Stat()
	if err != nil {
		return n, 0, err
	}
	if err = tmp.Close(); err != nil {
		return n, 0, err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else if err = os.Link(tmp.Name(), path); err == nil {
		err = os.Remove(tmp.Name())
	}
	if err != nil {
		return n, 0, err
	}
	return n, st.Size(), syncDir(dir)
}

// CheckDir makes dir if it is missing and checks that a file can be
// written in it, so that a node configured to archive fails at start
// rather than at its first retention pass.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("archive: directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".tock-check-*")
	if err != nil {
		return fmt.Errorf("archive: directory %s is not writable: %w", dir, err)
	}
	_ = f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("archive: directory %s: %w", dir, err)
	}
	return nil
}

// syncDir fsyncs directory dir, making the entries created or renamed in
// it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
