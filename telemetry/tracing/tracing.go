// Package tracing sets up OpenTelemetry's SDK in tockd: the tracer
// provider configured by the standard OTEL_* environment variables (off
// unless they name an exporter), with tock's sampler and ids (see package
// telemetry: one execution is one trace, whose id is the execution id).
package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tock-sched/tock/telemetry"
)

// Config configures tracing beyond the environment.
type Config struct {
	// Ratio is the share of traces started here that are sampled, 0 to 1;
	// a span with a parent follows its parent's decision.
	Ratio float64
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES set it; default "tockd".
	ServiceName string
	// InstanceID is the resource's service.instance.id (the node id).
	InstanceID string
	// Version is the resource's service.version, if known.
	Version string
}

// Tracing is a running tracer provider with its exporter.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is otlp,
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says
// otherwise. Without any of them tracing is off.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch os.Getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// FromEnv starts tracing as the OTEL_* environment variables say (see
// Enabled), or returns nil when they ask for none. The exporter is OTLP
// over gRPC or HTTP (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: grpc, or http/protobuf, the default); the
// exporters read their endpoint, headers, TLS, compression and timeout
// variables themselves, and the batch span processor its OTEL_BSP_*
// ones.
func FromEnv(ctx context.Context, cfg Config) (*Tracing, error) {
	if !Enabled() {
		return nil, nil
	}
	if cfg.Ratio < 0 || cfg.Ratio > 1 || math.IsNaN(cfg.Ratio) {
		return nil, fmt.Errorf("telemetry: sample ratio %v: want 0 to 1", cfg.Ratio)
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%s: tock exports traces with otlp only (or none)", e)
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Tracing{provider: NewProvider(cfg.Ratio, res, sdktrace.WithBatcher(exp))}, nil
}

// NewProvider is a tracer provider with tock's sampler (parent-based,
// ratio of the roots) and ids (an execution's trace id is its id),
// exporting through opts (sdktrace.WithBatcher or WithSyncer).
func NewProvider(ratio float64, res *resource.Resource, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	opts = append([]sdktrace.TracerProviderOption{
		sdktrace.WithSampler(Sampler(ratio)),
		sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithResource(res),
	}, opts...)
	return sdktrace.NewTracerProvider(opts...)
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "tockd"
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(name))}
	if cfg.InstanceID != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceInstanceID(cfg.InstanceID)))
	}
	if cfg.Version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.Version)))
	}
	// The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) wins.
	attrs = append(attrs, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Provider is the tracer provider, or a no-op one when t is nil.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Tracer is tock's tracer, or nil when t is nil: components skip their
// tracing work for a nil tracer.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.provider.Tracer(telemetry.ScopeName)
}

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// idGenerator gives a root span started with ForExecution's context the
// execution's trace id, and random ids otherwise.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := telemetry.ExecutionFrom(ctx); ok {
		return telemetry.TraceID(id), newSpanID()
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// Sampler samples the share ratio of root spans, by trace id, and
// follows the parent's decision otherwise. The decision reads the trace
// id's last 62 bits (an execution id's variant bits, the two before
// them, are fixed), so every process decides the same for one execution.
func Sampler(ratio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(ratioSampler{bound: uint64(max(0, min(1, ratio)) * (1 << 62)), ratio: ratio})
}

type ratioSampler struct {
	bound uint64
	ratio float64
}

func (s ratioSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	if binary.BigEndian.Uint64(p.TraceID[8:])&(1<<62-1) < s.bound || s.ratio >= 1 {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: ts}
}

func (s ratioSampler) Description() string { return fmt.Sprintf("TockTraceIDRatio{%g}", s.ratio) }

// ChildOnly is tp making spans only inside a trace: a span started from
// a context without one is the context's no-op span. Database spans
// (--trace-db) use it, so that a statement is traced inside the request
// or operation that ran it and background statements start no trace of
// their own.
func ChildOnly(tp trace.TracerProvider) trace.TracerProvider { return childOnly{tp: tp} }

type childOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p childOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type childOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, opts...)
}
