package executor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/wire"
)

func httpExecution(url string) *Execution {
	ex := execution("http")
	ex.Handler = domain.Handler{Type: domain.HandlerHTTP, URL: url, Headers: map[string]string{"Authorization": "Bearer t"}}
	return &Execution{Execution: ex, Attempt: 2}
}

func TestHTTPHandlerRequest(t *testing.T) {
	type seen struct {
		method, body string
		header       http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, string(b), r.Header.Clone()}
		_, _ = io.WriteString(w, "accepted")
	}))
	defer srv.Close()

	x := httpExecution(srv.URL + "/hook?token=secret")
	out, err := HTTPHandler(srv.Client())(context.Background(), x)
	if err != nil || out != "accepted" {
		t.Fatalf("HTTPHandler = %q, %v; want accepted", out, err)
	}
	s := <-got
	if s.method != http.MethodPost || s.body != string(x.Payload) {
		t.Errorf("request %s with body %q, want POST with the payload", s.method, s.body)
	}
	for k, want := range map[string]string{
		"Idempotency-Key":    x.ExecutionID,
		"Tock-Execution-Id":  x.ExecutionID,
		"Tock-Job-Id":        x.JobID,
		"Tock-Scheduled-For": "2030-01-02T03:04:05.006Z",
		"Tock-Attempt":       "2",
		"Authorization":      "Bearer t",
		"Content-Type":       "application/json",
	} {
		if got := s.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}

	x.Handler.Method = http.MethodPut
	x.Payload = nil
	if _, err := HTTPHandler(srv.Client())(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.method != http.MethodPut || s.body != "" {
		t.Errorf("request %s with body %q, want PUT without body", s.method, s.body)
	}
}

func TestHTTPHandlerStatus(t *testing.T) {
	tests := []struct {
		status    int
		wantErr   bool
		permanent bool
	}{
		{200, false, false},
		{204, false, false},
		{400, true, true},
		{404, true, true},
		{408, true, false},
		{429, true, false},
		{500, true, false},
		{503, true, false},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "body")
			}))
			defer srv.Close()
			out, err := HTTPHandler(nil)(context.Background(), httpExecution(srv.URL+"/?token=secret"))
			if (err != nil) != tt.wantErr || IsPermanent(err) != tt.permanent {
				t.Fatalf("status %d: err %v (permanent %v), want error %v permanent %v", tt.status, err, IsPermanent(err), tt.wantErr, tt.permanent)
			}
			if tt.status != 204 && out != "body" {
				t.Errorf("output %q, want body", out)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the query string", err)
			}
		})
	}
}

func TestHTTPHandlerFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Once the body is read, the server notices the client going away.
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(waitFor):
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := HTTPHandler(nil)(ctx, httpExecution(srv.URL))
	if err == nil || IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timed out request: %v, want a retryable deadline error", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := HTTPHandler(nil)(context.Background(), httpExecution(closed.URL)); err == nil || IsPermanent(err) {
		t.Errorf("refused connection: %v, want a retryable error", err)
	}

	for _, url := range []string{"", "::not a url"} {
		if _, err := HTTPHandler(nil)(context.Background(), httpExecution(url)); !IsPermanent(err) {
			t.Errorf("url %q: %v, want a permanent error", url, err)
		}
	}
}

// A call the egress policy refuses fails for good, saying why, and the
// target never hears of it.
func TestHTTPHandlerRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	p, err := egress.New(context.Background(), egress.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	h := HTTPHandler(p.Client())
	for url, want := range map[string]string{
		srv.URL + "/?token=secret":      "refused: 127.0.0.1 is a loopback address (allow it with --http-allow)",
		"http://10.0.0.5/hook":          "POST http://10.0.0.5/hook: refused: 10.0.0.5 is a private address",
		"http://169.254.169.254/latest": "refused: 169.254.169.254 is a cloud metadata address",
		"http://u:secret@example.com/":  "refused: the URL carries credentials",
	} {
		_, err := h(context.Background(), httpExecution(url))
		if !IsPermanent(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a permanent %q", url, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error %q shows the secret", url, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}
}

// The http handler runs end to end through a Worker: a 503 with
// Retry-After: 1, then a 200; and a 400, which is final.
func TestHTTPHandlerThroughWorker(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			http.Error(w, "no such thing", http.StatusBadRequest)
			return
		}
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	w := e.worker(e.nc, "exec-1")
	w.Handle(domain.HandlerHTTP, HTTPHandler(srv.Client()))
	e.run(w)

	ex := httpExecution(srv.URL).Execution
	ex.Retry = domain.RetryPolicy{MaxAttempts: 3, InitialBackoff: "1m", Jitter: "none"}
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, false)
	if !strings.Contains(ev.Error, "503") || ev.Output != "try later\n" || ev.RetryInMS != 1000 {
		t.Errorf("failed event: error %q output %q retry in %dms, want 503 retried in 1000ms", ev.Error, ev.Output, ev.RetryInMS)
	}
	ex = e.republish(ex, ev)
	evs.expect(ex, domain.EventStarted, 2, false)
	if ev := evs.expect(ex, domain.EventSucceeded, 2, false); ev.Output != "ok" {
		t.Errorf("output %q", ev.Output)
	}

	bad := httpExecution(srv.URL + "/bad").Execution
	bad.Retry = domain.RetryPolicy{MaxAttempts: 3}
	e.publish(bad)
	evs.expect(bad, domain.EventStarted, 1, false)
	if ev := evs.expect(bad, domain.EventFailed, 1, true); !strings.Contains(ev.Error, "400") {
		t.Errorf("error %q, want the 400", ev.Error)
	}
	e.settled(domain.HandlerHTTP)
}

// dateIn3s stands, in TestHTTPHandlerRetryAfter's table, for an HTTP date
// three seconds after the answer.
const dateIn3s = "date in 3s"

func TestHTTPHandlerRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		status     int
		retryAfter string
		want       time.Duration // 0: no RetryAfter
	}{
		{503, "1", time.Second},
		{429, "120", 2 * time.Minute},
		{408, "0", 0},
		{503, dateIn3s, 3 * time.Second},          // an HTTP date 3 s after the answer
		{503, "Wed, 21 Oct 2015 07:28:00 GMT", 0}, // in the past: at once
		{503, "soon", -1},
		{503, "-5", -1},
		{503, "", -1},
		{503, "999999999999", MaxRetryAfter},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case tt.retryAfter == dateIn3s:
				// Written as the answer goes, not when the table was
				// made: on a loaded machine the earlier cases can take
				// a second.
				w.Header().Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
			case tt.retryAfter != "":
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			w.WriteHeader(tt.status)
		}))
		_, err := HTTPHandler(nil)(context.Background(), httpExecution(srv.URL))
		srv.Close()
		if err == nil || IsPermanent(err) {
			t.Errorf("%d with Retry-After %q: %v, want a retryable error", tt.status, tt.retryAfter, err)
			continue
		}
		d, ok := retryAfter(err)
		switch {
		case tt.want < 0 && ok:
			t.Errorf("%d with Retry-After %q: asks for a retry in %v, want the backoff", tt.status, tt.retryAfter, d)
		case tt.want >= 0 && !ok:
			t.Errorf("%d with Retry-After %q: no RetryAfter, want %v", tt.status, tt.retryAfter, tt.want)
		case tt.want >= 0 && (d > tt.want || d < tt.want-time.Second):
			// An HTTP date has a resolution of a second.
			t.Errorf("%d with Retry-After %q: retry in %v, want %v", tt.status, tt.retryAfter, d, tt.want)
		}
	}
}

func natsExecution(subject string, wait bool) *Execution {
	ex := execution("nats")
	ex.Handler = domain.Handler{Type: domain.HandlerNATS, Subject: subject, WaitReply: wait}
	return &Execution{Execution: ex, Attempt: 1}
}

func TestNATSHandlerPublish(t *testing.T) {
	e := newEnv(t)
	sub, err := e.nc.SubscribeSync("jobs.email")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	x := natsExecution("jobs.email", false)
	out, err := NATSHandler(e.nc)(context.Background(), x)
	if err != nil || out != "" {
		t.Fatalf("NATSHandler = %q, %v", out, err)
	}
	m, err := sub.NextMsg(waitFor)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != string(x.Payload) {
		t.Errorf("data %q, want the payload", m.Data)
	}
	for k, want := range map[string]string{
		"Idempotency-Key":    x.ExecutionID,
		"Tock-Execution-Id":  x.ExecutionID,
		"Tock-Job-Id":        x.JobID,
		"Tock-Scheduled-For": "2030-01-02T03:04:05.006Z",
		"Tock-Attempt":       "1",
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	for _, subject := range []string{"", "tock.exec.http", "tock.events.succeeded", "$JS.API.STREAM.DELETE.TOCK_EXEC"} {
		if _, err := NATSHandler(e.nc)(context.Background(), natsExecution(subject, false)); !IsPermanent(err) {
			t.Errorf("subject %q: %v, want a permanent error", subject, err)
		}
	}
}

func TestNATSHandlerRequest(t *testing.T) {
	e := newEnv(t)
	sub, err := e.nc.Subscribe("svc.echo", func(m *nats.Msg) {
		var p map[string]string
		_ = json.Unmarshal(m.Data, &p)
		_ = m.Respond([]byte("hello " + p["to"] + " " + m.Header.Get(wire.HeaderExecutionID)))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	failing, err := e.nc.Subscribe("svc.fail.*", func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Nats-Service-Error", "nope")
		r.Header.Set("Nats-Service-Error-Code", strings.TrimPrefix(m.Subject, "svc.fail."))
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Unsubscribe()

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	x := natsExecution("svc.echo", true)
	out, err := NATSHandler(e.nc)(ctx, x)
	if want := "hello a@example.com " + x.ExecutionID; err != nil || out != want {
		t.Errorf("request = %q, %v; want %q", out, err, want)
	}

	_, err = NATSHandler(e.nc)(ctx, natsExecution("svc.nobody", true))
	if !errors.Is(err, nats.ErrNoResponders) || IsPermanent(err) {
		t.Errorf("no responders: %v, want a retryable ErrNoResponders", err)
	}
	for code, permanent := range map[string]bool{"400": true, "429": false, "500": false} {
		_, err := NATSHandler(e.nc)(ctx, natsExecution("svc.fail."+code, true))
		if err == nil || IsPermanent(err) != permanent {
			t.Errorf("service error %s: %v, want permanent %v", code, err, permanent)
		}
	}
}
