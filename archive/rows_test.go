package archive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// Rows writes one namespace's ended executions of a day, before a time,
// in order, a limited number at a time, with their attempts, to files
// named after the day, the namespace and the first free number; it
// returns their keys; it never replaces a file, and writes nothing for a
// selection without rows.
func TestRowsWritesANamespacesEndedExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 4)
	insert(t, st) // other namespaces' rows, and team-a's on the day after
	db := st.Pool()
	put := func(at time.Time, state string, attempts int) model.ExecutionKey {
		id := uuid.New()
		if _, err := db.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, attempts, handler, created_at) VALUES ($1, $2, 0, 'team.b', 'j', $3, $4, $5, '{"type":"nats","subject":"a"}', $3)`,
			id, uuid.New(), at, state, attempts); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= attempts; n++ {
			if _, err := db.Exec(ctx, `INSERT INTO attempts (execution_id, scheduled_for, number, outcome) VALUES ($1, $2, $3, 'failed')`,
				id, at, n); err != nil {
				t.Fatal(err)
			}
			// Each attempt logged a line.
			if _, err := db.Exec(ctx, `INSERT INTO execution_logs (execution_id, scheduled_for, attempt, seq, stream, "offset",
				bytes, at, lines) VALUES ($1, $2, $3, 1, 'stdout', 0, 3, $2, '[{"at":"2026-01-31T05:00:00Z","text":"hi\\n"}]')`,
				id, at, n); err != nil {
				t.Fatal(err)
			}
		}
		return model.ExecutionKey{ID: id, ScheduledFor: at}
	}
	var want []model.ExecutionKey
	for range 3 {
		want = append(want, put(at(3, 0, 0), "succeeded", 0))
	}
	want = append(want, put(at(4, 0, 0), "cancelled", 0), put(at(5, 0, 0), "dead", 2))
	slices.SortFunc(want[:3], func(a, b model.ExecutionKey) int { return slices.Compare(a.ID[:], b.ID[:]) })
	put(at(3, 30, 0), "running", 0)   // not ended
	put(at(3, 40, 0), "failed", 1)    // waiting for its retry
	put(at(20, 0, 0), "succeeded", 0) // after Before
	dir := t.TempDir()
	// A number taken in one table's directory is taken for both.
	if err := os.MkdirAll(filepath.Join(dir, "attempts"), 0o750); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(dir, "attempts", "2026-01-31.team.b.1.parquet")
	if err := os.WriteFile(taken, []byte("earlier"), 0o600); err != nil {
		t.Fatal(err)
	}

	sel := model.RowSelection{Day: day, Namespace: "team.b", Before: at(12, 0, 0), Limit: 4}
	var got []model.ExecutionKey
	for i, wantFiles := range []struct {
		name                string
		executions, attempt int64
	}{{"2026-01-31.team.b.2.parquet", 4, 0}, {"2026-01-31.team.b.3.parquet", 1, 2}} {
		// The logs of the executions written go with them: one chunk per
		// attempt.
		res, err := Rows(ctx, db, dir, sel)
		if err != nil {
			t.Fatal(err)
		}
		if res.Executions.Path != filepath.Join(dir, "executions", wantFiles.name) || res.Attempts.Path != filepath.Join(dir, "attempts", wantFiles.name) ||
			res.Executions.Rows != wantFiles.executions || res.Attempts.Rows != wantFiles.attempt {
			t.Errorf("call %d: wrote %+v and %+v; want %s with %d executions and %d attempts", i, res.Executions, res.Attempts,
				wantFiles.name, wantFiles.executions, wantFiles.attempt)
		}
		rows, err := parquet.ReadFile[Execution](res.Executions.Path)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range rows {
			if r.ID != res.Keys[k].ID.String() || !r.ScheduledFor.Equal(res.Keys[k].ScheduledFor) || r.Namespace != "team.b" {
				t.Errorf("call %d: row %d is %s at %s in %s; key %+v", i, k, r.ID, r.ScheduledFor, r.Namespace, res.Keys[k])
			}
		}
		if res.Logs.Path != filepath.Join(dir, "logs", wantFiles.name) || res.Logs.Rows != wantFiles.attempt {
			t.Errorf("call %d: logs %+v, want %s with %d chunks", i, res.Logs, wantFiles.name, wantFiles.attempt)
		}
		if fi, err := os.Stat(res.Attempts.Path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", res.Attempts.Path, fi, err)
		}
		got = append(got, res.Keys...)
		sel.After = res.Keys[len(res.Keys)-1]
	}
	if !slices.EqualFunc(got, want, func(a, b model.ExecutionKey) bool { return a.ID == b.ID && a.ScheduledFor.Equal(b.ScheduledFor) }) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if b, err := os.ReadFile(taken); err != nil || string(b) != "earlier" {
		t.Errorf("the file already there: %q, %v", b, err)
	}

	// Nothing more: nothing written.
	res, err := Rows(ctx, db, dir, sel)
	if err != nil || len(res.Keys) != 0 || res.Executions.Path != "" {
		t.Errorf("an empty selection: %+v, %v", res, err)
	}
	for table, n := range map[string]int{"executions": 2, "attempts": 3, "logs": 2} {
		if entries, _ := os.ReadDir(filepath.Join(dir, table)); len(entries) != n {
			t.Errorf("%s/ holds %v, want %d files (no temporary one)", table, entries, n)
		}
	}

	sel.Day = time.Date(2020, 2, 29, 0, 0, 0, 0, time.UTC)
	if _, err := Rows(ctx, db, dir, sel); !errors.Is(err, ErrNoPartition) {
		t.Errorf("a day without partitions: %v, want ErrNoPartition", err)
	}
}
