package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// day is the day the tests archive; next is the day after it.
var (
	day  = time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	next = day.AddDate(0, 0, 1)
)

// at is a time on day with microseconds, which must survive the trip.
func at(h, m int, micros int) time.Time {
	return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(micros)*time.Microsecond)
}

func ptr[T any](v T) *T { return &v }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// text is a JSON column's value as a query argument: nil for NULL.
func text(j json.RawMessage) *string {
	if j == nil {
		return nil
	}
	return ptr(string(j))
}

// fixture is what the tests insert, and what the files must hold.
type fixture struct {
	executions []Execution
	attempts   []Attempt
	logs       []Log
}

// insert puts executions and attempts of day (and one of each on the
// day after, which must not be archived) into a fresh store, with every
// column given: non-default values, NULLs in nullable columns, and one
// execution whose handler, payload, retry and timeout come from its job
// spec.
func insert(t *testing.T, st *store.Store) fixture {
	t.Helper()
	ctx := context.Background()
	if err := st.EnsureHistoryPartitions(ctx, day, next); err != nil {
		t.Fatal(err)
	}
	db := st.Pool()
	spec := uuid.New()
	if _, err := db.Exec(ctx, `INSERT INTO job_specs (id, handler, payload, retry, timeout_ms)
		VALUES ($1, '{"type":"http","url":"https://example.com/hook","method":"POST"}', '{"n":1}', '{"max_attempts":5}', 2500)`,
		spec); err != nil {
		t.Fatal(err)
	}
	own := Execution{ // fired before job specs: its own handler; every nullable column set
		ID: uuid.NewString(), JobID: uuid.NewString(), Bucket: 3, Namespace: "team-a", JobName: "nightly",
		ScheduledFor: at(2, 0, 0), Manual: true, State: "dead", Attempts: 1,
		Handler: raw(`{"subject": "jobs.run", "type": "nats"}`), Payload: raw(`{"tags": ["a", "b"], "x": 1.5}`),
		Retry: raw(`{"max_attempts": 1}`), TimeoutMS: ptr(int64(30000)),
		DispatchedAt: ptr(at(2, 0, 1)), StartedAt: ptr(at(2, 0, 250001)), FinishedAt: ptr(at(2, 1, 999999)),
		ExecutorID: "exec-7", Error: "exit 3", Output: "line 1\nline 2 ünïcode", CreatedAt: at(1, 59, 999000),
		FiredBy: "node-2", Priority: "high", NextAttemptAt: ptr(at(2, 5, 0)), SeriesBase: 2, Dispatches: 4,
		AttemptExecutor: ptr("exec-7"), AttemptStartedAt: ptr(at(2, 0, 250001)), AttemptHeartbeatAt: ptr(at(2, 0, 900000)),
		AttemptFinishedAt: ptr(at(2, 1, 999999)), AttemptOutcome: ptr("timed_out"), AttemptError: ptr("deadline"),
		AttemptOutput: ptr("partial"), SpecID: nil, DueAt: ptr(at(2, 0, 3)), Backfill: true, Buffered: true,
		Batch: ptr(uuid.NewString()),
	}
	specd := Execution{ // by its job spec; nullable columns NULL
		ID: uuid.NewString(), JobID: uuid.NewString(), Bucket: 0, Namespace: "default", JobName: "every-minute",
		ScheduledFor: at(1, 0, 0), State: "failed", Attempts: 2,
		Handler: raw(`{"method": "POST", "type": "http", "url": "https://example.com/hook"}`), Payload: raw(`{"n": 1}`),
		Retry: raw(`{"max_attempts": 5}`), TimeoutMS: ptr(int64(2500)),
		CreatedAt: at(1, 0, 0), Priority: "normal", SpecID: ptr(spec.String()),
	}
	empty := Execution{ // its own handler, and no payload
		ID: uuid.NewString(), JobID: specd.JobID, Bucket: 0, Namespace: "default", JobName: "every-minute",
		ScheduledFor: at(23, 59, 999999), State: "queued",
		Handler: raw(`{"subject": "s", "type": "nats"}`), Retry: raw(`{}`), TimeoutMS: ptr(int64(0)),
		CreatedAt: at(23, 59, 0), Priority: "low",
	}
	later := Execution{ID: uuid.NewString(), JobID: own.JobID, Namespace: "team-a", JobName: "nightly",
		ScheduledFor: next.Add(time.Hour), State: "queued", Handler: own.Handler, CreatedAt: next, Priority: "normal"}
	for _, x := range []Execution{own, specd, empty, later} {
		handler, payload, retry, timeout := text(x.Handler), text(x.Payload), text(x.Retry), x.TimeoutMS
		if x.SpecID != nil {
			handler, payload, retry, timeout = nil, nil, nil, nil
		}
		if _, err := db.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual,
			state, attempts, handler, payload, retry, timeout_ms, dispatched_at, started_at, finished_at, executor_id,
			error, output, created_at, fired_by, priority, next_attempt_at, series_base, dispatches, attempt_executor,
			attempt_started_at, attempt_heartbeat_at, attempt_finished_at, attempt_outcome, attempt_error,
			attempt_output, spec_id, due_at, backfill, buffered, batch)
			VALUES ($1::text::uuid, $2::text::uuid, $3, $4, $5, $6, $7, $8, $9, $10::text::jsonb, $11::text::jsonb,
			$12::text::jsonb, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30,
			$31, $32, $33::text::uuid, $34, $35, $36, $37::text::uuid)`,
			x.ID, x.JobID, x.Bucket, x.Namespace, x.JobName, x.ScheduledFor, x.Manual, x.State, x.Attempts,
			handler, payload, retry, timeout, x.DispatchedAt, x.StartedAt, x.FinishedAt, x.ExecutorID,
			x.Error, x.Output, x.CreatedAt, x.FiredBy, x.Priority, x.NextAttemptAt, x.SeriesBase, x.Dispatches,
			x.AttemptExecutor, x.AttemptStartedAt, x.AttemptHeartbeatAt, x.AttemptFinishedAt, x.AttemptOutcome,
			x.AttemptError, x.AttemptOutput, x.SpecID, x.DueAt, x.Backfill, x.Buffered, x.Batch); err != nil {
			t.Fatal(err)
		}
	}
	attempts := []Attempt{
		{ExecutionID: specd.ID, ScheduledFor: specd.ScheduledFor, Number: 1, ExecutorID: "exec-1",
			StartedAt: ptr(at(1, 0, 10)), FinishedAt: ptr(at(1, 0, 20)), Outcome: "lost", Error: "executor vanished",
			Output: "", HeartbeatAt: ptr(at(1, 0, 15))},
		{ExecutionID: specd.ID, ScheduledFor: specd.ScheduledFor, Number: 2, Outcome: "",
			Error: "", Output: "still waiting"},
	}
	laterAttempt := Attempt{ExecutionID: later.ID, ScheduledFor: later.ScheduledFor, Number: 1}
	for _, a := range append(attempts, laterAttempt) {
		if _, err := db.Exec(ctx, `INSERT INTO attempts (execution_id, scheduled_for, number, executor_id, started_at,
			finished_at, outcome, error, output, heartbeat_at) VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.ExecutionID, a.ScheduledFor, a.Number, a.ExecutorID, a.StartedAt, a.FinishedAt, a.Outcome, a.Error,
			a.Output, a.HeartbeatAt); err != nil {
			t.Fatal(err)
		}
	}
	logs := []Log{
		{ExecutionID: specd.ID, ScheduledFor: specd.ScheduledFor, Attempt: 1, Seq: 1, Stream: "stdout", Offset: 0, Bytes: 6,
			At: at(1, 0, 11), Lines: raw(`[{"at": "2026-01-31T01:00:00.000011Z", "text": "hello\n"}]`), RecordedAt: at(1, 0, 12)},
		{ExecutionID: specd.ID, ScheduledFor: specd.ScheduledFor, Attempt: 2, Seq: 3, Stream: "stderr", Offset: 40, Bytes: 3,
			At: at(1, 0, 30), Lines: raw(`[{"at": "2026-01-31T01:00:00.00003Z", "text": "ünï", "split": true}]`),
			TrimFrom: ptr(int64(10)), TrimBefore: ptr(int64(30)), Ends: true, RecordedAt: at(1, 0, 31)},
	}
	laterLog := Log{ExecutionID: later.ID, ScheduledFor: later.ScheduledFor, Attempt: 1, Seq: 1, Stream: "stdout",
		At: later.ScheduledFor, Lines: raw(`[]`), Ends: true, RecordedAt: later.ScheduledFor}
	for _, l := range append(logs, laterLog) {
		if _, err := db.Exec(ctx, `INSERT INTO execution_logs (execution_id, scheduled_for, attempt, seq, stream, "offset",
			bytes, at, lines, trim_from, trim_before, ends, recorded_at)
			VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7, $8, $9::text::jsonb, $10, $11, $12, $13)`,
			l.ExecutionID, l.ScheduledFor, l.Attempt, l.Seq, l.Stream, l.Offset, l.Bytes, l.At, string(l.Lines),
			l.TrimFrom, l.TrimBefore, l.Ends, l.RecordedAt); err != nil {
			t.Fatal(err)
		}
	}
	// The files are ordered by scheduled time.
	return fixture{executions: []Execution{specd, own, empty}, attempts: attempts, logs: logs}
}

// A day's files hold every row of its partitions, column for column, read
// back with parquet-go's reader; they are zstd-compressed and carry their
// table and day.
func TestDayWritesEveryRowAndColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 4)
	want := insert(t, st)
	dir := t.TempDir()

	res, err := Day(ctx, st.Pool(), dir, day.Add(13*time.Hour)) // any time of the day
	if err != nil {
		t.Fatal(err)
	}
	if res.Executions.Rows != 3 || res.Attempts.Rows != 2 || !res.Day.Equal(day) {
		t.Errorf("result %+v: want 3 executions and 2 attempts of %s", res, day.Format(time.DateOnly))
	}
	for path, f := range map[string]File{"executions/2026-01-31.parquet": res.Executions, "attempts/2026-01-31.parquet": res.Attempts} {
		if f.Path != filepath.Join(dir, path) {
			t.Errorf("wrote %s, want %s", f.Path, filepath.Join(dir, path))
		}
		if fi, err := os.Stat(f.Path); err != nil || fi.Size() != f.Bytes || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want %d bytes, mode 0600", f.Path, fi, err, f.Bytes)
		}
	}

	execs, err := parquet.ReadFile[Execution](res.Executions.Path)
	if err != nil {
		t.Fatal(err)
	}
	compareRows(t, "executions", want.executions, execs)
	attempts, err := parquet.ReadFile[Attempt](res.Attempts.Path)
	if err != nil {
		t.Fatal(err)
	}
	compareRows(t, "attempts", want.attempts, attempts)
	if res.Logs.Path != filepath.Join(dir, "logs/2026-01-31.parquet") || res.Logs.Rows != 2 {
		t.Errorf("logs file %+v, want logs/2026-01-31.parquet with 2 chunks", res.Logs)
	}
	logs, err := parquet.ReadFile[Log](res.Logs.Path)
	if err != nil {
		t.Fatal(err)
	}
	compareRows(t, "logs", want.logs, logs)

	for table, f := range map[string]File{"executions": res.Executions, "attempts": res.Attempts, "logs": res.Logs} {
		pf := open(t, f.Path)
		for _, rg := range pf.Metadata().RowGroups {
			for _, c := range rg.Columns {
				if c.MetaData.Codec != format.Zstd {
					t.Errorf("%s: column %v compressed with %s, want ZSTD", f.Path, c.MetaData.PathInSchema, c.MetaData.Codec)
				}
			}
		}
		if v, _ := pf.Lookup("tock.table"); v != table {
			t.Errorf("%s: tock.table %q", f.Path, v)
		}
		if v, _ := pf.Lookup("tock.day"); v != "2026-01-31" {
			t.Errorf("%s: tock.day %q", f.Path, v)
		}
	}
}

// The files' columns are the tables' columns, in their order, each of the
// Parquet type the package documents for its Postgres type, and OPTIONAL
// exactly when the column is nullable: a column added to a table without
// being archived fails this test.
func TestFileSchemaIsTheTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 4)
	insert(t, st)
	res, err := Day(ctx, st.Pool(), t.TempDir(), day)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{
		"uuid":                     "BYTE_ARRAY STRING",
		"text":                     "BYTE_ARRAY STRING",
		"jsonb":                    "BYTE_ARRAY JSON",
		"timestamp with time zone": "INT64 TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)",
		"integer":                  "INT32 INT(32,true)",
		"bigint":                   "INT64 INT(64,true)",
		"boolean":                  "BOOLEAN -",
	}
	for table, path := range map[string]string{"executions": res.Executions.Path, "attempts": res.Attempts.Path, "execution_logs": res.Logs.Path} {
		rows, err := st.Pool().Query(ctx, `SELECT column_name, data_type, is_nullable = 'YES'
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1
			ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		var (
			name, typ string
			null      bool
		)
		for rows.Next() {
			if err := rows.Scan(&name, &typ, &null); err != nil {
				t.Fatal(err)
			}
			pt, ok := types[typ]
			if !ok {
				t.Errorf("%s.%s: Postgres type %s has no documented Parquet type", table, name, typ)
			}
			want = append(want, fmt.Sprintf("%s %s optional=%t", name, pt, null))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range open(t, path).Schema().Fields() {
			logical := "-"
			if lt := f.Type().LogicalType(); lt != nil {
				logical = lt.String()
			}
			got = append(got, fmt.Sprintf("%s %s %s optional=%t", f.Name(), f.Type().Kind(), logical, f.Optional()))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the file's columns\n\t%s\nare not the table's\n\t%s", table,
				strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
}

// Archiving a day again rewrites its files whole, and leaves no
// temporary file behind; row groups are bounded.
func TestDayRewritesInBoundedRowGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 4)
	want := insert(t, st)
	dir := t.TempDir()
	if _, err := Day(ctx, st.Pool(), dir, day); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "DELETE FROM executions WHERE state = 'queued'"); err != nil {
		t.Fatal(err)
	}
	res, err := writeDay(ctx, st.Pool(), dir, day, 1)
	if err != nil {
		t.Fatal(err)
	}
	execs, err := parquet.ReadFile[Execution](res.Executions.Path)
	if err != nil {
		t.Fatal(err)
	}
	compareRows(t, "executions", want.executions[:2], execs)
	if n := len(open(t, res.Executions.Path).RowGroups()); n != 2 {
		t.Errorf("%d row groups of at most 1 row for 2 executions", n)
	}
	for _, table := range []string{"executions", "attempts"} {
		entries, err := os.ReadDir(filepath.Join(dir, table))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "2026-01-31.parquet" {
			t.Errorf("%s/ holds %v, want the day's file alone", table, entries)
		}
	}
}

// A day without partitions fails with ErrNoPartition and writes nothing.
func TestDayWithoutPartitions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, 4)
	dir := t.TempDir()
	_, err := Day(context.Background(), st.Pool(), dir, time.Date(2020, 2, 29, 0, 0, 0, 0, time.UTC))
	if !errors.Is(err, ErrNoPartition) || !strings.Contains(err.Error(), "2020-02-29") {
		t.Errorf("got %v, want ErrNoPartition naming the day", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
}

// open opens the Parquet file at path.
func open(t *testing.T, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// compareRows reports every column of every row where got differs from
// want: times by instant, JSON by value.
func compareRows[T any](t *testing.T, table string, want, got []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", table, len(got), len(want))
	}
	typ := reflect.TypeFor[T]()
	for i := range min(len(got), len(want)) {
		w, g := reflect.ValueOf(want[i]), reflect.ValueOf(got[i])
		for f := range typ.NumField() {
			if a, b := show(w.Field(f)), show(g.Field(f)); a != b {
				t.Errorf("%s row %d, %s: got %s, want %s", table, i, typ.Field(f).Name, b, a)
			}
		}
	}
}

// show renders a column's value for comparison: times in UTC to the
// microsecond, JSON re-encoded (key order and spacing are Postgres's).
func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice {
		if v.IsNil() {
			return "NULL"
		}
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000000Z")
	case json.RawMessage:
		var j any
		if err := json.Unmarshal(x, &j); err != nil {
			return "invalid JSON " + string(x)
		}
		b, _ := json.Marshal(j)
		return string(b)
	case string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v.Interface())
}
