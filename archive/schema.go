package archive

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// The rows of the files, one Go type per table. Each field is a column of
// the table, in the table's order, named as in the table; the parquet
// tags give the Parquet types:
//
//	uuid        → STRING (the canonical 36-character form)
//	text        → STRING
//	jsonb       → BYTE_ARRAY annotated JSON (the value's text, as Postgres prints it)
//	timestamptz → INT64 TIMESTAMP(MICROS, adjusted to UTC)
//	integer     → INT32, bigint → INT64, boolean → BOOLEAN
//
// A column that can be NULL in the table is OPTIONAL in the file (a
// pointer here, or a json.RawMessage, nil for NULL), any other REQUIRED. The archive's tests compare these
// types with the tables' columns in information_schema, so a column added
// to a table without being added here fails them.

// Execution is one row of an executions file: a row of the executions
// table. What the execution runs (handler, payload, retry, timeout_ms) is
// filled in from its job spec when it references one (spec_id), as the
// API shows it, so that a file stands alone; spec_id is kept too.
type Execution struct {
	ID           string          `parquet:"id"`
	JobID        string          `parquet:"job_id"`
	Bucket       int32           `parquet:"bucket"`
	Namespace    string          `parquet:"namespace,dict"`
	JobName      string          `parquet:"job_name,dict"`
	ScheduledFor time.Time       `parquet:"scheduled_for,timestamp(microsecond)"`
	Manual       bool            `parquet:"manual"`
	State        string          `parquet:"state,dict"`
	Attempts     int32           `parquet:"attempts"`
	Handler      json.RawMessage `parquet:"handler,optional,json"`
	Payload      json.RawMessage `parquet:"payload,optional,json"`
	Retry        json.RawMessage `parquet:"retry,optional,json"`
	TimeoutMS    *int64          `parquet:"timeout_ms,optional"`
	DispatchedAt *time.Time      `parquet:"dispatched_at,optional,timestamp(microsecond)"`
	StartedAt    *time.Time      `parquet:"started_at,optional,timestamp(microsecond)"`
	FinishedAt   *time.Time      `parquet:"finished_at,optional,timestamp(microsecond)"`
	ExecutorID   string          `parquet:"executor_id,dict"`
	Error        string          `parquet:"error"`
	Output       string          `parquet:"output"`
	CreatedAt    time.Time       `parquet:"created_at,timestamp(microsecond)"`
	FiredBy      string          `parquet:"fired_by,dict"`
	Priority     string          `parquet:"priority,dict"`
	// NextAttemptAt is when the outbox was to publish the execution next.
	NextAttemptAt      *time.Time `parquet:"next_attempt_at,optional,timestamp(microsecond)"`
	SeriesBase         int32      `parquet:"series_base"`
	Dispatches         int32      `parquet:"dispatches"`
	AttemptExecutor    *string    `parquet:"attempt_executor,optional"`
	AttemptStartedAt   *time.Time `parquet:"attempt_started_at,optional,timestamp(microsecond)"`
	AttemptHeartbeatAt *time.Time `parquet:"attempt_heartbeat_at,optional,timestamp(microsecond)"`
	AttemptFinishedAt  *time.Time `parquet:"attempt_finished_at,optional,timestamp(microsecond)"`
	AttemptOutcome     *string    `parquet:"attempt_outcome,optional,dict"`
	AttemptError       *string    `parquet:"attempt_error,optional"`
	AttemptOutput      *string    `parquet:"attempt_output,optional"`
	SpecID             *string    `parquet:"spec_id,optional"`
	DueAt              *time.Time `parquet:"due_at,optional,timestamp(microsecond)"`
	Backfill           bool       `parquet:"backfill"`
	Buffered           bool       `parquet:"buffered"`
	// Batch is the batch the execution was fired in (published with the
	// rest of it in one message), if any.
	Batch *string `parquet:"batch,optional"`
	// SlotKey, SlotLimit and SlotOnLimit are the concurrency key the
	// execution held a slot of, and its job's limit and on_limit;
	// RateLimit its job's rate limit (issue 43).
	SlotKey     *string         `parquet:"slot_key,optional,dict"`
	SlotLimit   *int32          `parquet:"slot_limit,optional"`
	SlotOnLimit *string         `parquet:"slot_on_limit,optional,dict"`
	RateLimit   json.RawMessage `parquet:"rate_limit,optional,json"`
}

// Attempt is one row of an attempts file: a row of the attempts table.
// (An execution's only attempt lives in the execution's attempt_*
// columns; attempts holds every attempt of executions that had more.)
type Attempt struct {
	ExecutionID  string     `parquet:"execution_id"`
	ScheduledFor time.Time  `parquet:"scheduled_for,timestamp(microsecond)"`
	Number       int32      `parquet:"number"`
	ExecutorID   string     `parquet:"executor_id,dict"`
	StartedAt    *time.Time `parquet:"started_at,optional,timestamp(microsecond)"`
	FinishedAt   *time.Time `parquet:"finished_at,optional,timestamp(microsecond)"`
	Outcome      string     `parquet:"outcome,dict"`
	Error        string     `parquet:"error"`
	Output       string     `parquet:"output"`
	HeartbeatAt  *time.Time `parquet:"heartbeat_at,optional,timestamp(microsecond)"`
}

// Log is one row of a logs file: a row of the execution_logs table, one
// chunk of an attempt's log (issue 38). lines is the chunk's lines as
// JSON ([{"at","text","split"}]).
type Log struct {
	ExecutionID  string          `parquet:"execution_id"`
	ScheduledFor time.Time       `parquet:"scheduled_for,timestamp(microsecond)"`
	Attempt      int32           `parquet:"attempt"`
	Seq          int32           `parquet:"seq"`
	Stream       string          `parquet:"stream,dict"`
	Offset       int64           `parquet:"offset"`
	Bytes        int32           `parquet:"bytes"`
	At           time.Time       `parquet:"at,timestamp(microsecond)"`
	Lines        json.RawMessage `parquet:"lines,json"`
	TrimFrom     *int64          `parquet:"trim_from,optional"`
	TrimBefore   *int64          `parquet:"trim_before,optional"`
	Ends         bool            `parquet:"ends"`
	RecordedAt   time.Time       `parquet:"recorded_at,timestamp(microsecond)"`
}

// specColumns are the executions columns filled in from the job spec.
var specColumns = map[string]bool{"handler": true, "payload": true, "retry": true, "timeout_ms": true}

// columns are the column names of row type T, in its fields' order.
func columns[T any]() []string {
	t := reflect.TypeFor[T]()
	out := make([]string, t.NumField())
	for i := range out {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("parquet"), ",")
		out[i] = name
	}
	return out
}

// selectList is the SELECT list reading T's columns from the partition
// aliased x (and, for executions, its job spec, aliased sp), in T's field
// order: strings are read as text (uuid and jsonb included), what comes
// from a job spec from it when the row has none of its own.
func selectList[T any](spec bool) string {
	t := reflect.TypeFor[T]()
	cols := columns[T]()
	for i, c := range cols {
		expr := "x." + c
		if spec && specColumns[c] {
			expr = "COALESCE(x." + c + ", sp." + c + ")"
		}
		if k := t.Field(i).Type; k.Kind() == reflect.String || (k.Kind() == reflect.Pointer && k.Elem().Kind() == reflect.String) {
			expr += "::text"
		}
		cols[i] = expr
	}
	return strings.Join(cols, ", ")
}
