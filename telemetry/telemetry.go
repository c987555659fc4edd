// Package telemetry is what tock's components and the Go SDK share of
// OpenTelemetry tracing, with the API only (no SDK): span and attribute
// names, an execution's trace id, the trace context carried in NATS
// headers and events, and the log handler that adds trace_id and span_id
// to log lines. telemetry/tracing sets up the SDK in tockd.
//
// One execution is one trace, whose id is the execution id (its 16 bytes),
// whatever component starts a span about it: the firing, each publish (a
// retry's too), each attempt, the handler call and each recording. So an
// operator finds an execution's trace from its id, and a retry published
// an hour later from Postgres joins the trace without tock storing any
// trace context. Sampling is decided from the trace id, the same way in
// every process, so an execution is traced whole or not at all.
package telemetry

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span tock makes.
const ScopeName = "github.com/tock-sched/tock"

// Span names. One execution's trace holds, in order: Fire (the scheduler
// node's firing transaction), Publish (to JetStream, once per dispatch),
// Attempt (the executor's handling of one delivery), Handler (the
// built-in http or nats handler's call; a custom handler's own spans are
// children of Attempt) and Record (the recorder's write of each event).
const (
	SpanFire    = "tock.fire"
	SpanPublish = "tock.publish"
	SpanAttempt = "tock.attempt"
	SpanHandler = "tock.handler"
	SpanRecord  = "tock.record"
)

// Attribute keys tock sets on its spans (besides OpenTelemetry's semantic
// conventions).
const (
	AttrExecutionID = "tock.execution_id"
	AttrJobID       = "tock.job_id"
	AttrNamespace   = "tock.namespace"
	AttrBucket      = "tock.bucket"
	AttrAttempt     = "tock.attempt"
	AttrDispatch    = "tock.dispatch"
	AttrQueue       = "tock.queue"
	AttrBatchSize   = "tock.batch_size"
	AttrEvent       = "tock.event"
	AttrOutcome     = "tock.outcome"
)

// Propagator is the W3C Trace Context propagator tock reads and writes:
// the traceparent (and tracestate) header of HTTP requests, NATS messages
// and events.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// ForExecution returns ctx marked so that a span started from it without
// a parent gets the execution's trace id (see the package comment).
func ForExecution(ctx context.Context, id uuid.UUID) context.Context {
	return context.WithValue(ctx, executionKey{}, id)
}

type executionKey struct{}

// ExecutionFrom is the execution id ForExecution put in ctx.
func ExecutionFrom(ctx context.Context) (uuid.UUID, bool) {
	id, ok := ctx.Value(executionKey{}).(uuid.UUID)
	return id, ok
}

// TraceID is the trace id of an execution's trace.
func TraceID(id uuid.UUID) trace.TraceID { return trace.TraceID(id) }
