package tracing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/otlpsink"
	"github.com/tock-sched/tock/telemetry"
)

func TestEnabledReadsTheStandardVariables(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, false},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(k, tc.env[k])
		}
		if got := Enabled(); got != tc.want {
			t.Errorf("Enabled() with %v = %v, want %v", tc.env, got, tc.want)
		}
		tr, err := FromEnv(context.Background(), Config{Ratio: 1})
		if err != nil || (tr != nil) != tc.want {
			t.Errorf("FromEnv with %v = %v, %v; want tracing %v", tc.env, tr, err, tc.want)
		}
		_ = tr.Shutdown(context.Background())
	}
}

func TestFromEnvRefusesWhatItCannotDo(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, tc := range []struct {
		env   [2]string
		ratio float64
		want  string
	}{
		{[2]string{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, 1, "want grpc or http/protobuf"},
		{[2]string{"OTEL_TRACES_EXPORTER", "zipkin"}, 1, "otlp only"},
		{[2]string{"OTEL_TRACES_EXPORTER", ""}, 1.5, "want 0 to 1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Setenv(tc.env[0], tc.env[1])
			if _, err := FromEnv(context.Background(), Config{Ratio: tc.ratio}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromEnv(%v, ratio %v) = %v, want an error saying %q", tc.env, tc.ratio, err, tc.want)
			}
		})
	}
}

// The default protocol (http/protobuf) reaches a receiver, and a span
// about an execution is in the execution's trace.
func TestFromEnvExportsOverHTTP(t *testing.T) {
	sink, err := otlpsink.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+sink.HTTPAddr)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	tr, err := FromEnv(context.Background(), Config{Ratio: 1, InstanceID: "n1"})
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v", tr, err)
	}
	id := domain.ExecutionID(uuid.New(), time.Now())
	_, span := tr.Tracer().Start(telemetry.ForExecution(context.Background(), id), telemetry.SpanFire)
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := sink.Spans()
	if len(spans) != 1 || spans[0].TraceID != strings.ReplaceAll(id.String(), "-", "") || spans[0].Service != "tockd" {
		t.Fatalf("received %+v, want one tockd span in trace %s", spans, id)
	}
}

// Sampling is decided by the trace id: the same for an execution in every
// process, the ratio's share over many executions, and a child follows
// its parent.
func TestSamplerDecidesByTraceID(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := NewProvider(0.1, nil, sdktrace.WithSpanProcessor(rec))
	other := NewProvider(0.1, nil)
	tracer, otherTracer := tp.Tracer("t"), other.Tracer("t")
	job := uuid.New()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sampled := 0
	const n = 20000
	for i := range n {
		id := domain.ExecutionID(job, start.Add(time.Duration(i)*time.Second))
		ctx := telemetry.ForExecution(context.Background(), id)
		cctx, a := tracer.Start(ctx, "a")
		_, b := otherTracer.Start(ctx, "b")
		if a.SpanContext().IsSampled() != b.SpanContext().IsSampled() {
			t.Fatalf("execution %s: two processes decided differently", id)
		}
		if a.SpanContext().TraceID() != telemetry.TraceID(id) {
			t.Fatalf("trace id %s, want the execution's %s", a.SpanContext().TraceID(), id)
		}
		_, child := tracer.Start(cctx, "child")
		if child.SpanContext().IsSampled() != a.SpanContext().IsSampled() {
			t.Fatal("a child decided otherwise than its parent")
		}
		if a.SpanContext().IsSampled() {
			sampled++
		}
		child.End()
		a.End()
	}
	if share := float64(sampled) / n; share < 0.08 || share > 0.12 {
		t.Errorf("sampled %.3f of executions at ratio 0.1", share)
	}
	for _, r := range []float64{0, 1} {
		tp := NewProvider(r, nil)
		_, s := tp.Tracer("t").Start(context.Background(), "x")
		if s.SpanContext().IsSampled() != (r == 1) {
			t.Errorf("ratio %v: sampled %v", r, s.SpanContext().IsSampled())
		}
	}
}

func TestChildOnlyTracesInsideATraceOnly(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := NewProvider(1, nil, sdktrace.WithSpanProcessor(rec))
	child := ChildOnly(tp).Tracer("db")
	_, s := child.Start(context.Background(), "SELECT")
	s.End()
	if len(rec.Ended()) != 0 || s.SpanContext().IsValid() {
		t.Fatalf("a span outside any trace was made: %v", rec.Ended())
	}
	ctx, parent := tp.Tracer("t").Start(context.Background(), "request")
	_, s = child.Start(ctx, "SELECT")
	s.End()
	parent.End()
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("inside a trace: %v", ended)
	}
}
