// Package wire is tock's execution wire protocol on NATS: the subjects,
// headers and JSON bodies that the dispatcher, executors (built-in or
// custom, in any language) and the recorder exchange, and the JetStream
// streams and consumers that carry them. Its only dependency is nats.go, so
// every side can share it; docs/wire-protocol.md is its description for
// non-Go executors.
package wire

import (
	"encoding/json"
	"strconv"
	"time"
)

// Streams and subjects.
const (
	// ExecStream holds fired executions waiting for an executor.
	ExecStream = "TOCK_EXEC"
	// ExecSubjectPrefix is followed by the handler name: tock.exec.<handler>.
	ExecSubjectPrefix = "tock.exec."
	// EventStream holds execution events on their way to the recorder.
	EventStream = "TOCK_EVENTS"
	// EventSubjectPrefix is followed by the event type:
	// tock.events.<type>, e.g. tock.events.started.
	EventSubjectPrefix = "tock.events."
	// RecorderConsumer is the durable consumer of EventStream that the
	// recorder role reads.
	RecorderConsumer = "tock_recorder"
)

// Headers set on every execution message (besides Nats-Msg-Id, which is
// the execution id so that JetStream drops a re-published duplicate).
const (
	HeaderExecutionID  = "Tock-Execution-Id"
	HeaderJobID        = "Tock-Job-Id"
	HeaderScheduledFor = "Tock-Scheduled-For" // RFC 3339 with milliseconds
	// HeaderIdempotencyKey is sent by the built-in http handler to the
	// target; it equals the execution id.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderAttempt is sent by the built-in handlers to the target: the
	// 1-based attempt number, so a target can tell a retry apart.
	HeaderAttempt = "Tock-Attempt"
)

// Built-in handler types. A custom handler's subject token is its name.
const (
	HandlerHTTP   = "http"
	HandlerNATS   = "nats"
	HandlerCustom = "custom"
)

// Handler says who runs a job's executions.
type Handler struct {
	// Type is http, nats or custom.
	Type string `json:"type"`
	// Name is the custom handler's name (a NATS subject token:
	// letters, digits, '-' and '_'), for Type custom.
	Name string `json:"name,omitempty"`
	// URL, Method and Headers describe the request, for Type http.
	// Method defaults to POST. The body sent is the job's payload.
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Subject is where the payload is published, for Type nats; with
	// WaitReply the handler waits for a reply and records it as output.
	Subject   string `json:"subject,omitempty"`
	WaitReply bool   `json:"wait_reply,omitempty"`
}

// Queue is the handler's queue name: the last token of its execution
// subject and the name of its durable consumer (tock_<queue>).
func (h Handler) Queue() string {
	if h.Type == HandlerCustom {
		return h.Name
	}
	return h.Type
}

// ExecSubject is the subject an execution for h is published on.
func (h Handler) ExecSubject() string { return ExecSubjectPrefix + h.Queue() }

// ConsumerName is the durable pull consumer that serves queue.
func ConsumerName(queue string) string { return "tock_" + queue }

// RetryPolicy says how often and how soon a failed execution is tried
// again. The zero value means one attempt only.
type RetryPolicy struct {
	MaxAttempts    int     `json:"max_attempts,omitempty"`
	InitialBackoff string  `json:"initial_backoff,omitempty"` // Go duration
	MaxBackoff     string  `json:"max_backoff,omitempty"`     // Go duration
	Multiplier     float64 `json:"multiplier,omitempty"`
	Jitter         string  `json:"jitter,omitempty"` // "full", "equal" or "none"
}

// Execution is the JSON body of a message on tock.exec.<queue>.
type Execution struct {
	ExecutionID  string          `json:"execution_id"`
	JobID        string          `json:"job_id"`
	Namespace    string          `json:"namespace"`
	JobName      string          `json:"job_name"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Handler      Handler         `json:"handler"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	TimeoutMS    int64           `json:"timeout_ms,omitempty"`
	Retry        RetryPolicy     `json:"retry,omitempty"`
}

// Event types an executor reports.
const (
	EventStarted   = "started"
	EventHeartbeat = "heartbeat"
	EventSucceeded = "succeeded"
	EventFailed    = "failed"
)

// MaxOutputBytes is how much of a handler's output or error message is
// kept; longer text is cut to this size.
const MaxOutputBytes = 4096

// Event is the JSON body of a message on tock.events.<type>, published by
// an executor to the EventStream with Nats-Msg-Id
// "<execution_id>:<attempt>:<type>" so that a retried publish is dropped.
type Event struct {
	Type         string    `json:"type"`
	ExecutionID  string    `json:"execution_id"`
	ScheduledFor time.Time `json:"scheduled_for"`
	Attempt      int       `json:"attempt"`
	ExecutorID   string    `json:"executor_id"`
	At           time.Time `json:"at"`
	// Error and Output are set on finished events, cut to MaxOutputBytes.
	Error  string `json:"error,omitempty"`
	Output string `json:"output,omitempty"`
	// StartedAt is set on a finished event whose attempt was not reported
	// by a started event (executors report the start of a quick attempt
	// with its end, to halve the events): the attempt's start time.
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Final is set on a failed event when no further attempt will follow
	// (the last attempt, or a permanent failure): the execution is dead.
	// A failed event without it means a retry is on its way.
	Final bool `json:"final,omitempty"`
}

// MsgID is the Nats-Msg-Id an event is published with.
func (e Event) MsgID() string {
	return e.ExecutionID + ":" + strconv.Itoa(e.Attempt) + ":" + e.Type
}

// Truncate cuts s to MaxOutputBytes without splitting a UTF-8 sequence.
func Truncate(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	cut := MaxOutputBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
