// Package otlpsink is an OpenTelemetry trace receiver: OTLP over gRPC and
// over HTTP (protobuf), keeping the spans it receives (tests) or only
// counting them (tockbench). It stands in for a collector where tock's
// exports are checked or measured.
package otlpsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int32
	Service                       string
	Attrs                         map[string]string
	// StatusError is set on a span whose status is Error.
	StatusError bool
	Start, End  uint64 // Unix nanoseconds
}

// Sink receives spans until Close.
type Sink struct {
	// GRPCAddr and HTTPAddr are where it listens (host:port); HTTP takes
	// POST /v1/traces.
	GRPCAddr, HTTPAddr string

	keep  bool
	mu    sync.Mutex
	spans []Span
	count int64

	grpc *grpc.Server
	http *http.Server
}

// Start listens on loopback ports of its own. keep says whether spans are
// kept (Spans) or only counted (Count).
func Start(keep bool) (*Sink, error) { return StartOn("127.0.0.1:0", "127.0.0.1:0", keep) }

// StartOn is Start listening on the addresses given (host:port).
func StartOn(grpcAddr, httpAddr string, keep bool) (*Sink, error) {
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		gl.Close()
		return nil, err
	}
	s := &Sink{GRPCAddr: gl.Addr().String(), HTTPAddr: hl.Addr().String(), keep: keep}
	s.grpc = grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(s.grpc, traceService{s: s})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.serveHTTP)
	s.http = &http.Server{Handler: mux}
	go func() { _ = s.grpc.Serve(gl) }()
	go func() { _ = s.http.Serve(hl) }()
	return s, nil
}

// Close stops both listeners.
func (s *Sink) Close() {
	s.grpc.Stop()
	_ = s.http.Close()
}

// Spans are the spans received so far (with keep).
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// Count is how many spans were received.
func (s *Sink) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

type traceService struct {
	collectorpb.UnimplementedTraceServiceServer
	s *Sink
}

func (t traceService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	t.s.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (s *Sink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.add(&req)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

func (s *Sink) add(req *collectorpb.ExportTraceServiceRequest) {
	var got []Span
	var n int64
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = value(kv.Value)
			}
		}
		for _, ss := range rs.ScopeSpans {
			n += int64(len(ss.Spans))
			if !s.keep {
				continue
			}
			for _, sp := range ss.Spans {
				attrs := make(map[string]string, len(sp.Attributes))
				for _, kv := range sp.Attributes {
					attrs[kv.Key] = value(kv.Value)
				}
				got = append(got, Span{TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					ParentSpanID: hex.EncodeToString(sp.ParentSpanId), Name: sp.Name, Kind: int32(sp.Kind),
					Service: service, Attrs: attrs, StatusError: sp.GetStatus().GetCode() == 2,
					Start: sp.StartTimeUnixNano, End: sp.EndTimeUnixNano})
			}
		}
	}
	s.mu.Lock()
	s.spans = append(s.spans, got...)
	s.count += n
	s.mu.Unlock()
}

// value is an attribute's value as text.
func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	}
	return v.String()
}
