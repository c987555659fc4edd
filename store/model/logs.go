package model

import (
	"time"

	"github.com/google/uuid"
)

// LogChunk is one stored piece of an attempt's log (wire.LogChunk).
type LogChunk struct {
	ExecutionID  uuid.UUID
	ScheduledFor time.Time
	Namespace    string // the executor's word, checked against the execution's
	Attempt      int
	Seq          int
	Stream       string
	Offset       int64
	Bytes        int
	At           time.Time // the first line's
	Lines        []LogLine
	// TrimFrom and TrimBefore (both 0: none): the attempt's chunks lying
	// wholly in [TrimFrom, TrimBefore) are cut.
	TrimFrom, TrimBefore int64
	End                  bool
	// Young, on a chunk read back: it was recorded less than
	// LogFilter.Young ago.
	Young bool
}

// LogLine is a line of a chunk, or a piece of a line (see wire.LogLine).
type LogLine struct {
	At    time.Time `json:"at"`
	Text  string    `json:"text"`
	Split bool      `json:"split,omitempty"`
}

// What became of a chunk given to Store.RecordLogChunks.
const (
	LogStored    = "stored"
	LogDuplicate = "duplicate"          // stored before (a redelivery)
	LogUnknown   = "unknown_execution"  // no such execution
	LogForeign   = "foreign_namespace"  // the execution is another namespace's
	LogFinished  = "finished_execution" // the execution ended longer ago than the grace
)
