package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The recorder's statements on jobs' rows (job_successes, job_failures)
// meet them in job id order, the order of their sorted arrays, whatever
// the batch's size and the tables' statistics: their plans are nested
// loops over the array probing the primary key, and they do return (so
// update or delete) the rows in that order. The rows are stored in
// another order (random ids), as a table that rows come and go in is.
func TestJobRowsLockedInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.pool.Exec(ctx, `INSERT INTO job_successes (job_id) SELECT gen_random_uuid() FROM generate_series(1, 2000);
		INSERT INTO job_failures (job_id, consecutive, last_dead_at) SELECT job_id, 1, now() FROM job_successes`); err != nil {
		t.Fatal(err)
	}
	var all []uuid.UUID
	rows, err := s.pool.Query(ctx, "SELECT job_id FROM job_successes")
	if err == nil {
		all, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	}
	if err != nil {
		t.Fatal(err)
	}
	byBytes := func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := s.pool.Exec(ctx, "ANALYZE job_successes; ANALYZE job_failures"); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []int{3, 40, 300, 1500} {
			jobs := slices.SortedFunc(slices.Values(all[:n]), byBytes)
			at, execs := make([]time.Time, n), make([]uuid.UUID, n)
			for i := range n {
				at[i], execs[i] = time.Now(), uuid.New()
			}
			ones, zeros, holds := make([]int, n), make([]int, n), make([]bool, n)
			for i := range n {
				ones[i], holds[i] = 1, i%2 == 0
			}
			for _, st := range []struct {
				table, sql string
				args       []any
				// loop: a nested loop over the array probing the table's
				// primary key; else an insert from the array as it is.
				loop bool
			}{
				{"job_successes", updateSuccessesSQL + " RETURNING s.job_id", []any{jobs, at, execs}, true},
				{"job_failures", endStreaksSQL, []any{jobs}, true},
				{"job_failures", addDeadsSQL, []any{jobs, ones, at}, false},
				{"job_failures", holdStreaksSQL, []any{jobs, zeros, at, holds}, false},
			} {
				err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
					// As after the fast statements (fastReset), or the lock
					// read (recordSettings): the same settings.
					if err := keyedPlans(ctx, tx, recordSettings...); err != nil {
						return err
					}
					rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+st.sql, st.args...)
					if err != nil {
						return err
					}
					lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
					if err != nil {
						return err
					}
					plan := strings.Join(lines, "\n")
					loop, fn, probe := strings.Index(plan, "Nested Loop"), strings.Index(plan, "Function Scan on u"),
						strings.Index(plan, "Index Scan using "+st.table+"_pkey")
					switch {
					case st.loop && (loop < 0 || fn < loop || probe < fn || strings.Contains(plan, "Seq Scan")):
						t.Errorf("%s, %d jobs, analyzed %v: plan\n%s\nwant a nested loop over the array probing %s_pkey",
							st.table, n, analyzed, plan, st.table)
					case !st.loop && (!strings.HasPrefix(plan, "Insert on "+st.table) || strings.Contains(plan, "Sort") ||
						strings.Contains(plan, "Hash") || !strings.Contains(plan, "Function Scan on ")):
						t.Errorf("%s, %d jobs, analyzed %v: plan\n%s\nwant an insert from the array as it is", st.table, n, analyzed, plan)
					}
					rows, err = tx.Query(ctx, st.sql, st.args...)
					if err != nil {
						return err
					}
					got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
						var id uuid.UUID
						dst := []any{&id}
						for range len(row.FieldDescriptions()) - 1 {
							dst = append(dst, nil)
						}
						return id, row.Scan(dst...)
					})
					if err != nil {
						return err
					}
					if !slices.Equal(got, jobs) {
						t.Errorf("%s, %d jobs, analyzed %v: rows met out of job id order", st.table, n, analyzed)
					}
					return errors.New("roll back")
				})
				if err != nil && err.Error() != "roll back" {
					t.Fatal(err)
				}
			}
		}
	}
}
