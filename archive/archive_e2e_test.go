package archive_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/store"
)

// tockd archive --day writes a day's files on demand and says what it
// wrote; a bad day or a dropped one is a clear error. tockd maintain
// --archive-dir archives the day it drops.
func TestArchiveCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, st, now := nodetest.MigratedStore(t)
	at := now.AddDate(0, 0, -60).UTC().Truncate(time.Hour)
	day := at.Format(time.DateOnly)
	if err := st.EnsureHistoryPartitions(ctx, at); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := st.Pool().Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
		state, handler, created_at) VALUES ($1, $2, 0, 'n', 'j', $3, 'succeeded', '{"type":"nats","subject":"a"}', $3)`,
		id, uuid.New(), at); err != nil {
		t.Fatal(err)
	}
	tockd := func(args ...string) (string, error) {
		cmd := nodetest.Command(t, args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	executions := func(dir string) []archive.Execution {
		t.Helper()
		rows, err := parquet.ReadFile[archive.Execution](filepath.Join(dir, "executions", day+".parquet"))
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	dir := t.TempDir()
	out, err := tockd("archive", "--postgres-url", pg, "--day", day, "--dir", dir)
	if err != nil {
		t.Fatalf("tockd archive: %v\n%s", err, out)
	}
	if !strings.Contains(out, "archived "+day) || !strings.Contains(out, filepath.Join(dir, "executions", day+".parquet")) {
		t.Errorf("tockd archive printed\n%s", out)
	}
	if rows := executions(dir); len(rows) != 1 || rows[0].ID != id.String() {
		t.Errorf("the day's file holds %+v, want execution %s", rows, id)
	}

	for _, c := range []struct{ day, want string }{
		{"2026-02-30", `--day: "2026-02-30" is not a day such as 2026-01-31`},
		{"2001-01-01", "no partition for the day"},
	} {
		out, err := tockd("archive", "--postgres-url", pg, "--day", c.day, "--dir", dir)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("tockd archive --day %s: %v\n%s\nwant an error saying %q", c.day, err, out, c.want)
		}
	}

	// Retention archives the day, then drops it.
	kept := t.TempDir()
	out, err = tockd("maintain", "--postgres-url", pg, "--once", "--retention", "30d", "--archive-dir", kept, "--log-level", "warn")
	if err != nil {
		t.Fatalf("tockd maintain --once --archive-dir: %v\n%s", err, out)
	}
	if rows := executions(kept); len(rows) != 1 || rows[0].ID != id.String() {
		t.Errorf("maintain archived %+v, want execution %s", rows, id)
	}
	var exists bool
	if err := st.Pool().QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", store.DayPartition("executions", at)).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("maintain archived %s but did not drop it", day)
	}
}
