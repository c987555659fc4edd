package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// logChunks reads the log stream from its start until the end chunk of
// execution id's attempt, and returns that attempt's chunks in sequence
// order.
func (e *env) logChunks(id string, attempt int) []wire.LogChunk {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := e.js.OrderedConsumer(ctx, wire.LogStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	it, err := c.Messages()
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Stop()
	bySeq := map[int]wire.LogChunk{}
	last := 0
	for last == 0 || len(bySeq) < last {
		m, err := it.Next(jetstream.NextMaxWait(waitFor))
		if err != nil {
			e.t.Fatalf("log chunks of %s: %v (have %d, last %d)", id, err, len(bySeq), last)
		}
		if m.Subject() != wire.LogSubject {
			e.t.Errorf("log message on %s, want %s", m.Subject(), wire.LogSubject)
		}
		if m.Headers().Get(jetstream.MsgIDHeader) == "" {
			e.t.Error("log message without a Nats-Msg-Id")
		}
		var cs []wire.LogChunk
		if err := json.Unmarshal(m.Data(), &cs); err != nil {
			e.t.Fatalf("decode log message: %v", err)
		}
		for _, c := range cs {
			if c.ExecutionID != id || c.Attempt != attempt {
				continue
			}
			if err := c.Validate(); err != nil {
				e.t.Errorf("chunk %d: %v", c.Seq, err)
			}
			if _, dup := bySeq[c.Seq]; dup {
				e.t.Errorf("chunk %d sent twice", c.Seq)
			}
			bySeq[c.Seq] = c
			if c.End {
				last = c.Seq
			}
		}
	}
	out := make([]wire.LogChunk, 0, last)
	for s := 1; s <= last; s++ {
		c, ok := bySeq[s]
		if !ok {
			e.t.Fatalf("chunk %d of %d missing", s, last)
		}
		out = append(out, c)
	}
	return out
}

// texts joins the chunks' text per stream, and checks that each chunk
// begins where the one before it ended (no gap).
func texts(t *testing.T, chunks []wire.LogChunk, gapless bool) map[string]string {
	t.Helper()
	out := map[string]*strings.Builder{}
	var end int64
	for _, c := range chunks {
		if gapless && c.Offset != end {
			t.Errorf("chunk %d at offset %d, want %d (no gap)", c.Seq, c.Offset, end)
		}
		b := out[c.Stream]
		if b == nil {
			b = &strings.Builder{}
			out[c.Stream] = b
		}
		for _, l := range c.Lines {
			b.WriteString(l.Text)
		}
		end = c.Offset + int64(c.Bytes())
	}
	m := map[string]string{}
	for s, b := range out {
		m[s] = b.String()
	}
	return m
}

func TestLogKeepsWhatTheHandlerWroteInOrder(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "ex-1")
	var stdout, stderr bytes.Buffer
	w.Handle("logs", func(ctx context.Context, ex *Execution) (string, error) {
		out, errw := Log(ctx), LogStream(ctx, wire.LogStderr)
		write := func(to *bytes.Buffer, wr interface{ Write([]byte) (int, error) }, s string) {
			to.WriteString(s)
			if _, err := wr.Write([]byte(s)); err != nil {
				t.Error(err)
			}
		}
		write(&stdout, out, "starting\n")
		write(&stderr, errw, "a warning\n")
		// A line written in pieces, a character split between writes.
		write(&stdout, out, "half a line ")
		write(&stdout, out, "caf\xc3")
		write(&stdout, out, "\xa9 and the rest\n")
		// A pause longer than a flush: the unfinished line goes out as
		// a piece, the rest follows.
		write(&stdout, out, "before a pause, ")
		time.Sleep(3 * logFlushEvery)
		write(&stdout, out, "after it\n")
		// A line of 150 KiB: cut into pieces of 64 KiB, marked.
		write(&stdout, out, strings.Repeat("x", 150<<10)+"\n")
		// Invalid UTF-8 and a NUL byte: replaced.
		out.Write([]byte("bad \xff\xfe byte and \x00 nul\n"))
		stdout.WriteString("bad \uFFFD byte and \uFFFD nul\n")
		Logger(ctx, nil).Info("done", "files", 3)
		write(&stdout, out, "no newline at the end")
		return "ok", nil
	})
	e.run(w)
	ex := execution("logs")
	ev := e.events()
	e.publish(ex)
	ev.expect(ex, domain.EventStarted, 1, false)
	ev.expect(ex, domain.EventSucceeded, 1, false)

	chunks := e.logChunks(ex.ExecutionID, 1)
	got := texts(t, chunks, true)
	if got[wire.LogStdout] != stdout.String() {
		t.Errorf("stdout differs: got %d bytes, want %d; got starts %q", len(got[wire.LogStdout]), stdout.Len(), trunc(got[wire.LogStdout]))
	}
	if !strings.HasPrefix(got[wire.LogStderr], stderr.String()) || !strings.Contains(got[wire.LogStderr], "msg=done files=3\n") {
		t.Errorf("stderr %q, want %q then the slog line", got[wire.LogStderr], stderr.String())
	}
	splits, pieces := 0, 0
	for _, c := range chunks {
		for _, l := range c.Lines {
			pieces++
			if l.Split {
				splits++
			}
			if len(l.Text) > wire.MaxLogLineBytes {
				t.Errorf("a line of %d bytes", len(l.Text))
			}
		}
		if c.ExecutionID != ex.ExecutionID || c.Namespace != ex.Namespace || !c.ScheduledFor.Equal(ex.ScheduledFor) {
			t.Errorf("chunk %d names %s/%s at %s", c.Seq, c.Namespace, c.ExecutionID, c.ScheduledFor)
		}
	}
	if splits != 2 {
		t.Errorf("%d pieces marked split, want 2 (150 KiB in 64 KiB pieces)", splits)
	}
	if !chunks[len(chunks)-1].End {
		t.Error("the last chunk is not marked end")
	}
}

func TestLogOfAnAttemptThatWritesNothingIsNothing(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "ex-1")
	w.Handle("quiet", func(ctx context.Context, ex *Execution) (string, error) { return "", nil })
	e.run(w)
	ex := execution("quiet")
	ev := e.events()
	e.publish(ex)
	ev.expect(ex, domain.EventStarted, 1, false)
	ev.expect(ex, domain.EventSucceeded, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s, err := e.js.Stream(ctx, wire.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d log messages for an attempt that wrote nothing", n)
	}
}

func TestLogCapPolicies(t *testing.T) {
	const capB = 4 << 10
	line := strings.Repeat("y", 99) + "\n" // 100 bytes
	for _, tc := range []struct {
		policy string
		lines  int
	}{
		{domain.LogHead, 100},
		{domain.LogHeadTail, 100},
		{domain.LogFail, 100},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			e := newEnv(t)
			w := e.worker(e.nc, "ex-1")
			var wrote atomic.Int64
			w.Handle("capped", func(ctx context.Context, ex *Execution) (string, error) {
				for i := range tc.lines {
					if ctx.Err() != nil {
						return "", ctx.Err()
					}
					fmt.Fprintf(Log(ctx), "%03d%s", i, line[3:])
					wrote.Add(int64(len(line)))
					if i%10 == 0 {
						time.Sleep(2 * logFlushEvery / 3) // several chunks
					}
				}
				return "", nil
			})
			e.run(w)
			ex := execution("capped")
			ex.Handler.Log = &domain.LogPolicy{CapBytes: capB, Policy: tc.policy}
			ex.Retry = domain.RetryPolicy{MaxAttempts: 1}
			ev := e.events()
			e.publish(ex)
			ev.expect(ex, domain.EventStarted, 1, false)
			if tc.policy == domain.LogFail {
				end := ev.expect(ex, domain.EventFailed, 1, true)
				if !strings.Contains(end.Error, "log over its cap") || !strings.Contains(end.Error, "4096") {
					t.Errorf("error %q, want one naming the cap", end.Error)
				}
				if wrote.Load() >= int64(tc.lines*len(line)) {
					t.Errorf("the handler wrote all %d bytes: its context was not cancelled at the cap", wrote.Load())
				}
				return
			}
			ev.expect(ex, domain.EventSucceeded, 1, false)
			chunks := e.logChunks(ex.ExecutionID, 1)
			last := chunks[len(chunks)-1]
			if total := last.Offset + int64(last.Bytes()); total != wrote.Load() {
				t.Errorf("log ends at %d, want %d (everything written, kept or not)", total, wrote.Load())
			}
			kept := texts(t, chunks, false)[wire.LogStdout]
			switch tc.policy {
			case domain.LogHead:
				if int64(len(kept)) > capB || !strings.HasPrefix(kept, "000") || len(kept) < capB-len(line) {
					t.Errorf("head kept %d bytes starting %q; want the first %d", len(kept), trunc(kept), capB)
				}
			case domain.LogHeadTail:
				// Every chunk was sent; the trims say which ones the
				// recorder deletes: what is left is the head and a tail.
				var trimFrom, trimBefore int64
				for _, c := range chunks {
					if c.TrimBefore > trimBefore {
						trimFrom, trimBefore = c.TrimFrom, c.TrimBefore
					}
				}
				var left strings.Builder
				for _, c := range chunks {
					if trimBefore > 0 && c.Offset >= trimFrom && c.Offset+int64(c.Bytes()) <= trimBefore && !c.End {
						continue
					}
					for _, l := range c.Lines {
						left.WriteString(l.Text)
					}
				}
				s := left.String()
				if !strings.HasPrefix(s, "000") || !strings.HasSuffix(s, fmt.Sprintf("%03d%s", tc.lines-1, line[3:])) {
					t.Errorf("head and tail %q…, want the first and last lines", trunc(s))
				}
				if n := int64(len(s)); n > capB+int64(logChunkBytes) || n >= wrote.Load() {
					t.Errorf("head and tail keep %d of %d bytes; want about the cap, %d", n, wrote.Load(), capB)
				}
				if trimBefore == 0 {
					t.Error("no trim: the middle was kept")
				}
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

// The built-in http handler logs what a user checks first: the request
// line (without its query), the status and how long it took, then the
// whole response body, beyond the 4 KiB the output keeps.
func TestHTTPHandlerLogsTheExchange(t *testing.T) {
	e := newEnv(t)
	body := strings.Repeat("0123456789abcde\n", 1024) // 16 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	w := e.worker(e.nc, "exec-1")
	w.Handle(domain.HandlerHTTP, HTTPHandler(srv.Client()))
	e.run(w)
	ex := httpExecution(srv.URL + "/hook?token=secret").Execution
	ex.Retry = domain.RetryPolicy{MaxAttempts: 1}
	evs := e.events()
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, true)
	if len(ev.Output) != domain.MaxOutputBytes {
		t.Errorf("output of %d bytes, want the first %d", len(ev.Output), domain.MaxOutputBytes)
	}
	log := texts(t, e.logChunks(ex.ExecutionID, 1), true)[wire.LogStdout]
	first, rest, _ := strings.Cut(log, "\n")
	second, got, _ := strings.Cut(rest, "\n")
	if first != "> POST "+srv.URL+"/hook" {
		t.Errorf("request line %q, want the method and the URL without its query", first)
	}
	if !strings.HasPrefix(second, "< 503 Service Unavailable in ") || !strings.HasSuffix(second, ", 16384 bytes") {
		t.Errorf("status line %q", second)
	}
	if got != body {
		t.Errorf("logged body of %d bytes, want the %d answered", len(got), len(body))
	}
	if strings.Contains(log, "secret") {
		t.Error("the log holds the URL's query")
	}
}

// A handler's panic: the execution's error says it in one line, the
// attempt's log (stderr) holds the stack.
func TestPanicStackInTheLog(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "ex-1")
	w.Handle("panics", func(ctx context.Context, ex *Execution) (string, error) {
		panic(fmt.Sprintf("boom in %s", ex.ExecutionID[:8]))
	})
	e.run(w)
	ex := execution("panics")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 1}
	ev := e.events()
	e.publish(ex)
	ev.expect(ex, domain.EventStarted, 1, false)
	end := ev.expect(ex, domain.EventFailed, 1, true)
	if strings.Contains(end.Error, "\n") || !strings.Contains(end.Error, "handler panicked") {
		t.Errorf("error %q, want one line saying the handler panicked", end.Error)
	}
	stderr := texts(t, e.logChunks(ex.ExecutionID, 1), true)[wire.LogStderr]
	if !strings.HasPrefix(stderr, "handler panicked: boom in "+ex.ExecutionID[:8]+"\n") || !strings.Contains(stderr, "logs_test.go") {
		t.Errorf("stderr %q…, want the panic and its stack", trunc(stderr))
	}
}
