package telemetry

import (
	"context"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceparent and HeaderTracestate are the W3C Trace Context
// headers, written in lower case on NATS messages (NATS headers are
// case-sensitive; the W3C names are lower case).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// NATSCarrier carries trace context in a NATS message's headers.
type NATSCarrier nats.Header

// Get returns the header's value; it also accepts the canonical HTTP
// form (Traceparent) a bridge from HTTP may have written.
func (c NATSCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	if key == "" {
		return ""
	}
	return nats.Header(c).Get(strings.ToUpper(key[:1]) + key[1:])
}

// Set sets the header.
func (c NATSCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the headers.
func (c NATSCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's span context into h, if ctx holds a sampled span.
func Inject(ctx context.Context, h nats.Header) {
	if trace.SpanContextFromContext(ctx).IsSampled() {
		Propagator.Inject(ctx, NATSCarrier(h))
	}
}

// Extract returns ctx with the remote span context h carries, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return Propagator.Extract(ctx, NATSCarrier(h))
}

// Traceparent is sc as a W3C traceparent value, or "" unless sc is a
// sampled span's: an event carries it so that its recording joins the
// attempt's trace.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[HeaderTraceparent]
}

// ParseTraceparent reads a traceparent value; ok is false if it is not a
// valid one.
func ParseTraceparent(v string) (sc trace.SpanContext, ok bool) {
	if v == "" {
		return sc, false
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: v})
	sc = trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// LogAttrs are the trace_id and span_id attributes of sc, for a logger
// made before a context is at hand (slog.Logger.With); nil if sc is not
// valid.
func LogAttrs(sc trace.SpanContext) []any {
	if !sc.IsValid() {
		return nil
	}
	return []any{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

// LogHandler wraps h so that a record logged with a context holding a
// valid span (slog's ...Context methods) carries trace_id and span_id.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
