package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// A custom executor built on the SDK joins tock's trace: its attempt span
// is a child of the publish span named in the message's traceparent
// header, the handler's own span a child of the attempt, and the events
// carry the attempt's span so that tock's recording joins it too.
func TestCustomExecutorSpansJoinTheExecutionsTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	w, err := New(Config{NATS: e.nc, ExecutorID: "traced", Concurrency: 1, StartReportDelay: -1,
		Logger: testLogger(t), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	handlerSpan := make(chan sdktrace.ReadOnlySpan, 1)
	w.Handle("traced", func(ctx context.Context, _ *Execution) (string, error) {
		// What a user's handler does: its own span, from the ctx it gets.
		_, span := tp.Tracer("user").Start(ctx, "send-email")
		span.End()
		handlerSpan <- span.(sdktrace.ReadOnlySpan)
		return "sent", nil
	})
	e.run(w)

	// tock's publish span, as the dispatcher writes it into the message.
	ex := execution("traced")
	publish := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled})
	data, _ := json.Marshal(ex)
	msg := nats.NewMsg(wire.ExecSubject(ex.Handler.Queue(), ex.Priority))
	msg.Data = data
	telemetry.Inject(trace.ContextWithSpanContext(context.Background(), publish), msg.Header)
	if msg.Header.Get("traceparent") == "" {
		t.Fatalf("no lower-case traceparent header written: %v", msg.Header)
	}
	if _, err := e.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(wire.ExecMsgID(ex.ExecutionID, 0))); err != nil {
		t.Fatal(err)
	}
	evs := e.events()
	ev := evs.expect(ex, domain.EventStarted, 1, false)
	done := evs.expect(ex, domain.EventSucceeded, 1, false)

	user := recv(t, handlerSpan)
	var attempt sdktrace.ReadOnlySpan
	waitUntil(func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == telemetry.SpanAttempt {
				attempt = s
			}
		}
		return attempt != nil
	})
	if attempt == nil {
		t.Fatal("no attempt span ended")
	}
	if attempt.Parent().SpanID() != publish.SpanID() || attempt.SpanContext().TraceID() != publish.TraceID() {
		t.Errorf("attempt span's parent = %v, want tock's publish span %v", attempt.Parent(), publish)
	}
	if attempt.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("attempt span kind = %v, want consumer", attempt.SpanKind())
	}
	if user.Parent().SpanID() != attempt.SpanContext().SpanID() || user.SpanContext().TraceID() != publish.TraceID() {
		t.Errorf("the handler's span's parent = %v, want the attempt span %v", user.Parent(), attempt.SpanContext())
	}
	want := telemetry.Traceparent(attempt.SpanContext())
	for _, got := range []wire.Event{ev, done} {
		if got.Traceparent != want {
			t.Errorf("%s event traceparent = %q, want the attempt's %q", got.Type, got.Traceparent, want)
		}
	}
	attrs := map[string]string{}
	for _, kv := range attempt.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs[telemetry.AttrExecutionID] != ex.ExecutionID || attrs[telemetry.AttrOutcome] != "succeeded" {
		t.Errorf("attempt span attributes = %v, want execution id %s and outcome succeeded", attrs, ex.ExecutionID)
	}
}
