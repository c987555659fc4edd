package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

var sampled = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19}, SpanID: trace.SpanID{0xb7, 0xad}, TraceFlags: trace.FlagsSampled})

func TestTraceparentRoundTrips(t *testing.T) {
	v := Traceparent(sampled)
	if v != "00-0af76519000000000000000000000000-b7ad000000000000-01" {
		t.Fatalf("Traceparent = %q", v)
	}
	got, ok := ParseTraceparent(v)
	if !ok || got.TraceID() != sampled.TraceID() || got.SpanID() != sampled.SpanID() || !got.IsSampled() {
		t.Fatalf("ParseTraceparent(%q) = %v, %v", v, got, ok)
	}
	if Traceparent(sampled.WithTraceFlags(0)) != "" {
		t.Error("an unsampled span's traceparent is carried in events")
	}
	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-b7ad000000000000-01"} {
		if _, ok := ParseTraceparent(bad); ok {
			t.Errorf("ParseTraceparent(%q) accepted", bad)
		}
	}
}

func TestNATSHeadersCarryTheTrace(t *testing.T) {
	h := nats.Header{}
	Inject(trace.ContextWithSpanContext(context.Background(), sampled), h)
	if h.Get("traceparent") == "" {
		t.Fatalf("no lower-case traceparent: %v", h)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), h))
	if got.TraceID() != sampled.TraceID() || got.SpanID() != sampled.SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %v", got)
	}
	// Written by a bridge from HTTP, canonicalised.
	h = nats.Header{"Traceparent": []string{Traceparent(sampled)}}
	if got := trace.SpanContextFromContext(Extract(context.Background(), h)); got.SpanID() != sampled.SpanID() {
		t.Errorf("Traceparent (canonical) not read: %v", got)
	}
	h = nats.Header{}
	Inject(trace.ContextWithSpanContext(context.Background(), sampled.WithTraceFlags(0)), h)
	if len(h) != 0 {
		t.Errorf("an unsampled span was written into the message: %v", h)
	}
}

func TestLogLinesCarryTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("node", "n1")
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sampled), "traced")
	log.Info("untraced")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var a, b map[string]any
	if err := json.Unmarshal(lines[0], &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &b); err != nil {
		t.Fatal(err)
	}
	if a["trace_id"] != sampled.TraceID().String() || a["span_id"] != sampled.SpanID().String() || a["node"] != "n1" {
		t.Errorf("traced line: %v", a)
	}
	if _, ok := b["trace_id"]; ok {
		t.Errorf("untraced line has a trace_id: %v", b)
	}
	if got := LogAttrs(sampled); len(got) != 2 {
		t.Errorf("LogAttrs = %v", got)
	}
}
