package tracing_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/internal/otlpsink"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/telemetry"
)

// A real tockd, with tracing turned on by the OTEL_* environment only,
// traces one execution end to end into an OTLP receiver: one trace whose
// id is the execution id, holding the firing, each publish, each attempt,
// the handler's call and each recording, linked parent to child; the HTTP
// target gets the handler span in traceparent; the API request's span is
// a child of the caller's traceparent; and the JSON log line of the failed
// attempt carries the attempt's trace_id and span_id.
func TestTockdTracesAnExecutionEndToEnd(t *testing.T) {
	t.Parallel()
	sink, err := otlpsink.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)

	var mu sync.Mutex
	var traceparents []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		first := len(traceparents) == 1
		mu.Unlock()
		if first {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(target.Close)

	e := nodetest.New(t)
	logs := &nodetest.SyncBuffer{}
	n := e.StartProcessEnv(t, "traced", []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.GRPCAddr,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=tockd-under-test",
	}, logs, "--log-format", "json", "--log-level", "info", "--trace-db")

	// The API request, with the caller's own trace.
	caller := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body, _ := json.Marshal(map[string]any{"name": "traced",
		"handler": map[string]any{"type": "http", "url": target.URL + "/hook?token=hidden"},
		"retry":   map[string]any{"max_attempts": 3, "initial_backoff": "1s", "jitter": "none"}})
	req, _ := http.NewRequest(http.MethodPost, n.URL+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID uuid.UUID }
	if err := json.NewDecoder(resp.Body).Decode(&job); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create job: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	var execID uuid.UUID
	nodetest.WaitFor(t, 15*time.Second, "the job's execution", func() bool {
		if xs := n.Executions(t, job.ID); len(xs) > 0 {
			execID = xs[0].Id
		}
		return execID != uuid.Nil
	})
	n.WaitState(t, execID, "succeeded", 30*time.Second)
	traceID := strings.ReplaceAll(execID.String(), "-", "")

	// Every span of the execution: 1 fire, 2 publishes, 2 attempts, 2
	// handler calls, a recording per event (at least the two outcomes).
	byName := map[string][]otlpsink.Span{}
	nodetest.WaitFor(t, 20*time.Second, "the execution's spans", func() bool {
		byName = map[string][]otlpsink.Span{}
		for _, s := range sink.Spans() {
			if s.TraceID == traceID {
				byName[s.Name] = append(byName[s.Name], s)
			}
		}
		return len(byName[telemetry.SpanFire]) == 1 && len(byName[telemetry.SpanPublish]) == 2 &&
			len(byName[telemetry.SpanAttempt]) == 2 && len(byName[telemetry.SpanHandler]) == 2 &&
			len(byName[telemetry.SpanRecord]) >= 2
	})
	ids := map[string]otlpsink.Span{}
	for _, ss := range byName {
		for _, s := range ss {
			ids[s.SpanID] = s
			if s.Service != "tockd-under-test" {
				t.Errorf("span %s: service %q, want OTEL_SERVICE_NAME's", s.Name, s.Service)
			}
		}
	}
	fire := byName[telemetry.SpanFire][0]
	if fire.ParentSpanID != "" || fire.Attrs[telemetry.AttrExecutionID] != execID.String() || fire.Attrs[telemetry.AttrJobID] != job.ID.String() {
		t.Errorf("fire span: parent %q, attributes %v", fire.ParentSpanID, fire.Attrs)
	}
	parentName := func(s otlpsink.Span) string { return ids[s.ParentSpanID].Name }
	for _, p := range byName[telemetry.SpanPublish] {
		// The first dispatch is the firing's child; the retry's publish,
		// from Postgres, starts in the same trace.
		switch p.Attrs[telemetry.AttrDispatch] {
		case "0":
			if p.ParentSpanID != fire.SpanID {
				t.Errorf("first publish's parent = %q (%s), want the fire span", p.ParentSpanID, parentName(p))
			}
		case "1":
		default:
			t.Errorf("publish span with dispatch %q", p.Attrs[telemetry.AttrDispatch])
		}
	}
	var failedAttempt otlpsink.Span
	for _, a := range byName[telemetry.SpanAttempt] {
		if parentName(a) != telemetry.SpanPublish {
			t.Errorf("attempt %s's parent is %q, want a publish span", a.Attrs[telemetry.AttrAttempt], parentName(a))
		}
		if ids[a.ParentSpanID].Attrs[telemetry.AttrDispatch] != a.Attrs[telemetry.AttrDispatch] {
			t.Errorf("attempt %s: parent publish of dispatch %s, attempt of dispatch %s", a.Attrs[telemetry.AttrAttempt],
				ids[a.ParentSpanID].Attrs[telemetry.AttrDispatch], a.Attrs[telemetry.AttrDispatch])
		}
		if a.Attrs[telemetry.AttrAttempt] == "1" {
			failedAttempt = a
			if !a.StatusError || a.Attrs[telemetry.AttrOutcome] != "retry" {
				t.Errorf("first attempt: error status %v, outcome %q; want an error, retry", a.StatusError, a.Attrs[telemetry.AttrOutcome])
			}
		}
	}
	for _, h := range byName[telemetry.SpanHandler] {
		if parentName(h) != telemetry.SpanAttempt {
			t.Errorf("handler span's parent is %q, want an attempt", parentName(h))
		}
		for k, v := range h.Attrs {
			if strings.Contains(v, "hidden") {
				t.Errorf("handler span attribute %s = %q shows the URL's query", k, v)
			}
		}
	}
	for _, r := range byName[telemetry.SpanRecord] {
		if parentName(r) != telemetry.SpanAttempt {
			t.Errorf("record span (%s) parent is %q, want an attempt", r.Attrs[telemetry.AttrEvent], parentName(r))
		}
	}
	// The target saw the handler spans in traceparent.
	mu.Lock()
	got := append([]string(nil), traceparents...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("target called %d times, want 2", len(got))
	}
	for _, tp := range got {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID || ids[parts[2]].Name != telemetry.SpanHandler || parts[3] != "01" {
			t.Errorf("target's traceparent %q: want trace %s and a handler span, sampled", tp, traceID)
		}
	}
	// The API request's span continued the caller's trace, and with
	// --trace-db its statements are its children; background statements
	// (firing, recording) start no trace of their own.
	var apiSpan otlpsink.Span
	all := sink.Spans()
	for _, s := range all {
		if s.Name == "POST /v1/jobs" && s.TraceID == "0af7651916cd43dd8448eb211c80319c" && s.ParentSpanID == "b7ad6b7169203331" &&
			s.Attrs["http.response.status_code"] == "201" {
			apiSpan = s
		}
	}
	if apiSpan.SpanID == "" {
		t.Error(`no server span "POST /v1/jobs" (status 201) in the caller's trace`)
	}
	statements := 0
	for _, s := range all {
		if s.Attrs["db.system.name"] == "" && s.Attrs["db.system"] == "" {
			continue
		}
		if s.ParentSpanID == "" {
			t.Errorf("database span %q has no parent: a background statement started a trace", s.Name)
		}
		if s.ParentSpanID == apiSpan.SpanID {
			statements++
		}
	}
	if statements == 0 {
		t.Error("--trace-db: no database span under the API request's span")
	}

	// Every log line is one JSON object; the failed attempt's carries its
	// trace and span.
	logged := false
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		if k := duplicateKey(sc.Bytes()); k != "" {
			t.Errorf("log line has key %q twice: %s", k, sc.Text())
		}
		if line["execution_id"] == execID.String() && line["level"] == "INFO" {
			logged = line["trace_id"] == traceID && line["span_id"] == failedAttempt.SpanID
		}
	}
	if !logged {
		t.Errorf("no INFO log line of the failed attempt with trace_id %s and span_id %s:\n%s", traceID, failedAttempt.SpanID, logs.String())
	}
}

// duplicateKey is a top-level key that a JSON object line has twice
// (which many log pipelines reject or lose), or "".
func duplicateKey(line []byte) string {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
	}
	return ""
}
