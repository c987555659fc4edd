// Package wire is tock's execution wire protocol on NATS: the subjects,
// headers and JSON bodies that the dispatcher, executors (built-in or
// custom, in any language) and the recorder exchange, and the JetStream
// streams and consumers that carry them. Its only dependency is nats.go, so
// every side can share it; docs/wire-protocol.md is its description for
// non-Go executors.
package wire

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/domain"
)

// Streams and subjects.
const (
	// ExecStream holds fired executions waiting for an executor.
	ExecStream = "TOCK_EXEC"
	// ExecSubjectPrefix is followed by the handler's queue and the
	// execution's priority class: tock.exec.<queue>.<priority>.
	ExecSubjectPrefix = "tock.exec."
	// EventStream holds execution events on their way to the recorder.
	EventStream = "TOCK_EVENTS"
	// EventSubjectPrefix is followed by the event type:
	// tock.events.<type>, e.g. tock.events.started.
	EventSubjectPrefix = "tock.events."
	// EventBatchSubject carries several events in one message: a JSON
	// array of Event, published with a Nats-Msg-Id of the executor's
	// choosing (unique per batch, the same on a retried publish). tock's
	// executors send their events this way; one event per message on
	// tock.events.<type> is just as valid.
	EventBatchSubject = EventSubjectPrefix + "batch"
	// RecorderConsumer is the durable consumer of EventStream that the
	// recorder role reads.
	RecorderConsumer = "tock_recorder"
	// ChangeStream is the change feed (package changes): what happened to
	// executions and jobs, once committed, for live views. It keeps
	// ChangeMaxAge of changes, or ChangeMaxBytes.
	ChangeStream = "TOCK_CHANGES"
	// ChangeSubjectPrefix is followed by the namespace (each '.' written
	// as '~': NATS splits subjects at dots) and the kind of change:
	// tock.changes.<namespace>.<kind>, e.g. tock.changes.payments.execution.
	ChangeSubjectPrefix = "tock.changes."
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

// ExecSubject is the subject an execution for queue in priority class
// priority is published on: tock.exec.<queue>.<priority>. An empty
// priority means normal.
func ExecSubject(queue string, priority domain.Priority) string {
	return ExecSubjectPrefix + queue + "." + string(priority.OrNormal())
}

// ConsumerName is the durable pull consumer that serves queue's priority
// class: tock_<queue>_<priority>.
func ConsumerName(queue string, priority domain.Priority) string {
	return "tock_" + queue + "_" + string(priority)
}

// ExecMsgID is the Nats-Msg-Id of an execution's dispatch number dispatch
// (0 for the first publish, one more for each retry or deferral that
// sends it again): the execution id, then ":<dispatch>" after the first.
// JetStream drops a re-publish of the same dispatch within its duplicate
// window.
func ExecMsgID(executionID string, dispatch int) string {
	if dispatch == 0 {
		return executionID
	}
	return executionID + ":" + strconv.Itoa(dispatch)
}

// Execution is the JSON body of a message on tock.exec.<queue>.<priority>.
//
// Attempt numbers count across the execution's whole life: the attempt a
// delivery makes is AttemptBase + the message's JetStream delivery count.
// A retry is a new message (tock re-publishes it when the backoff has
// passed) whose AttemptBase is the attempts made so far; a redelivery of
// the same message (the executor holding it died) is the next attempt too.
// The attempt is the last of its series when attempt - SeriesBase reaches
// Retry.MaxAttempts; a re-drive of a dead execution starts a new series.
type Execution struct {
	ExecutionID  string             `json:"execution_id"`
	JobID        string             `json:"job_id"`
	Namespace    string             `json:"namespace"`
	JobName      string             `json:"job_name"`
	ScheduledFor time.Time          `json:"scheduled_for"`
	Handler      domain.Handler     `json:"handler"`
	Payload      json.RawMessage    `json:"payload,omitempty"`
	TimeoutMS    int64              `json:"timeout_ms,omitempty"`
	Retry        domain.RetryPolicy `json:"retry,omitempty"`
	// Priority is the execution's class; "" means normal.
	Priority domain.Priority `json:"priority,omitempty"`
	// AttemptBase is the number of attempts made before this message.
	AttemptBase int `json:"attempt_base,omitempty"`
	// SeriesBase is the number of attempts made before the current series
	// (0 until the execution is re-driven after it died).
	SeriesBase int `json:"series_base,omitempty"`
	// Dispatch numbers the publishes of the execution, from 0; events
	// carry it back.
	Dispatch int `json:"dispatch,omitempty"`
	// Traceparent is, on a member of a batch message, the W3C traceparent
	// of tock's publish span of this member (one execution per message
	// carries it in the message's header instead). Optional.
	Traceparent string `json:"traceparent,omitempty"`
}

// Body is the execution's JSON, the body of its own message or a member
// of a batch message.
func (e *Execution) Body() ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode execution %s: %w", e.ExecutionID, err)
	}
	return body, nil
}

// Subject is the subject the execution is published on:
// ExecSubject(handler queue, priority).
func (e *Execution) Subject() string { return ExecSubject(e.Handler.Queue(), e.Priority) }

// Msg is the whole NATS message for the execution's dispatch
// e.Dispatch: the JSON body on ExecSubject(handler queue, priority), with
// the execution's headers. Publish it with Nats-Msg-Id e.MsgID().
func (e *Execution) Msg() (*nats.Msg, error) {
	body, err := e.Body()
	if err != nil {
		return nil, err
	}
	return e.MsgWithBody(body), nil
}

// MsgWithBody is Msg with the body already encoded (Body).
func (e *Execution) MsgWithBody(body []byte) *nats.Msg {
	msg := nats.NewMsg(e.Subject())
	msg.Data = body
	msg.Header.Set(HeaderExecutionID, e.ExecutionID)
	msg.Header.Set(HeaderJobID, e.JobID)
	msg.Header.Set(HeaderScheduledFor, FormatTime(e.ScheduledFor))
	return msg
}

// MsgID is the Nats-Msg-Id of the execution's message: ExecMsgID of its
// id and dispatch.
func (e *Execution) MsgID() string { return ExecMsgID(e.ExecutionID, e.Dispatch) }

// Attempt is the attempt number the delivery number delivered (from 1) of
// this message makes.
func (e *Execution) Attempt(delivered int) int { return e.AttemptBase + delivered }

// LastAttempt reports whether attempt is the last its retry policy allows
// in the current series.
func (e *Execution) LastAttempt(attempt int) bool {
	return attempt-e.SeriesBase >= e.Retry.Attempts()
}

// Event is the JSON body of a message on tock.events.<type>, published by
// an executor to the EventStream with Nats-Msg-Id MsgID(), so that a
// retried publish is dropped. Attempt is the attempt the delivery makes
// (Execution.Attempt); on a deferred event it is the attempt the delivery
// would have made, and tock publishes the execution again with the same
// AttemptBase, since a deferred delivery is no attempt.
type Event struct {
	Type         domain.EventType `json:"type"`
	ExecutionID  string           `json:"execution_id"`
	ScheduledFor time.Time        `json:"scheduled_for"`
	Attempt      int              `json:"attempt"`
	ExecutorID   string           `json:"executor_id"`
	At           time.Time        `json:"at"`
	// Error and Output are set on finished events, cut to domain.MaxOutputBytes.
	Error  string `json:"error,omitempty"`
	Output string `json:"output,omitempty"`
	// StartedAt is set on a finished event whose attempt was not reported
	// by a started event (executors report the start of a quick attempt
	// with its end, to halve the events): the attempt's start time.
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Final is set on a failed event when no further attempt will follow
	// (the last attempt, or a permanent failure): the execution is dead.
	// A failed event without it means a retry follows after RetryInMS.
	Final bool `json:"final,omitempty"`
	// TimedOut is set on a failed event whose attempt was cut at the
	// job's timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// RetryInMS is, on a failed event without Final and on a deferred
	// event, how long tock waits before publishing the execution again.
	RetryInMS int64 `json:"retry_in_ms,omitempty"`
	// Dispatch is the Execution.Dispatch of the message the event is
	// about.
	Dispatch int `json:"dispatch,omitempty"`
	// Seq tells an attempt's heartbeat events apart (1, 2, ...).
	Seq int `json:"seq,omitempty"`
	// Handler is the handler key (Handler.Key) on deferred events.
	Handler string `json:"handler,omitempty"`
	// PublishedAt is when JetStream stored the execution message the
	// delivery came from (its metadata timestamp): tock records it as the
	// execution's dispatch time. Optional.
	PublishedAt *time.Time `json:"published_at,omitempty"`
	// Namespace and JobID are the execution's (Execution.Namespace and
	// JobID), for the change feed the recorder publishes once the event
	// is recorded. Optional: an event without them is recorded all the
	// same and left out of the feed.
	Namespace string `json:"namespace,omitempty"`
	JobID     string `json:"job_id,omitempty"`
	// Traceparent is the W3C traceparent of the attempt's span, when it is
	// sampled: the recorder's span of the event's recording is its child.
	// Optional; heartbeats leave it out.
	Traceparent string `json:"traceparent,omitempty"`
}

// Subject is the subject an event is published on on its own:
// tock.events.<type>.
func (e Event) Subject() string { return EventSubjectPrefix + string(e.Type) }

// MsgID is the Nats-Msg-Id an event is published with:
// "<execution_id>:<dispatch>:<attempt>:<type>", plus ":<seq>" for a
// heartbeat, so that a re-publish of the same event is dropped and
// different events never are.
func (e Event) MsgID() string {
	id := e.ExecutionID + ":" + strconv.Itoa(e.Dispatch) + ":" + strconv.Itoa(e.Attempt) + ":" + string(e.Type)
	if e.Type == domain.EventHeartbeat {
		id += ":" + strconv.Itoa(e.Seq)
	}
	return id
}
