package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without NATS: no error")
	}
	nc := &nats.Conn{}
	for name, cfg := range map[string]Config{
		"negative concurrency":     {NATS: nc, Concurrency: -1},
		"negative max per handler": {NATS: nc, MaxPerKey: -1},
		"failure rate above 1":     {NATS: nc, Breaker: BreakerConfig{FailureRate: 1.5}},
		"negative failure rate":    {NATS: nc, Breaker: BreakerConfig{FailureRate: -0.1}},
		"negative window":          {NATS: nc, Breaker: BreakerConfig{Window: -time.Second}},
		"negative open for":        {NATS: nc, Breaker: BreakerConfig{OpenFor: -time.Second}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New with %s: no error", name)
		}
	}
	w, err := New(Config{NATS: nc})
	if err != nil {
		t.Fatal(err)
	}
	want := BreakerConfig{FailureRate: 0.5, MinRequests: 10, Window: time.Minute, OpenFor: 30 * time.Second, HalfOpenRequests: 1}
	if w.cfg.Concurrency != DefaultConcurrency || w.cfg.ShutdownTimeout != DefaultShutdownTimeout || w.ID() == "" ||
		w.cfg.HeartbeatInterval != 10*time.Second || w.cfg.Breaker != want || w.cfg.MaxPerKey != 0 {
		t.Errorf("defaults not filled in: %+v", w.cfg)
	}
}

func TestHandlePanicsOnMisuse(t *testing.T) {
	w, err := New(Config{NATS: &nats.Conn{}})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *Execution) (string, error) { return "", nil }
	w.Handle("send-email", ok)
	for name, f := range map[string]func(){
		"bad name":  func() { w.Handle("a.b", ok) },
		"empty":     func() { w.Handle("", ok) },
		"nil func":  func() { w.Handle("x", nil) },
		"duplicate": func() { w.Handle("send-email", ok) },
		"negative concurrency": func() {
			w.HandleWith("y", ok, QueueOptions{Concurrency: -1})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestCustomHandlerSucceeds(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	got := make(chan *Execution, 1)
	w.Handle("send-email", func(ctx context.Context, x *Execution) (string, error) {
		got <- x
		return "sent " + string(x.Payload), nil
	})
	e.run(w)

	ex := execution("send-email")
	ex.TimeoutMS = 60_000
	e.publish(ex)

	x := recv(t, got)
	if x.Attempt != 1 || x.ExecutionID != ex.ExecutionID || x.JobID != ex.JobID || string(x.Payload) != string(ex.Payload) ||
		!x.ScheduledFor.Equal(ex.ScheduledFor) || !reflect.DeepEqual(x.Handler, ex.Handler) || x.TimeoutMS != 60_000 {
		t.Errorf("handler got %+v, want attempt 1 of %+v", x, ex)
	}
	started := evs.expect(ex, domain.EventStarted, 1, false)
	if started.ExecutorID != "exec-1" {
		t.Errorf("started.executor_id = %q, want exec-1", started.ExecutorID)
	}
	done := evs.expect(ex, domain.EventSucceeded, 1, false)
	if want := "sent " + string(ex.Payload); done.Output != want || done.Error != "" || done.ExecutorID != "exec-1" {
		t.Errorf("succeeded event = %+v, want output %q", done, want)
	}
	if done.At.Before(started.At) {
		t.Errorf("succeeded at %v before started at %v", done.At, started.At)
	}
	e.settled("send-email")
	evs.none(200 * time.Millisecond)
}

func TestOutputTruncated(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.Handle("big", func(ctx context.Context, x *Execution) (string, error) {
		return strings.Repeat("é", domain.MaxOutputBytes), nil
	})
	e.run(w)
	ex := execution("big")
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventSucceeded, 1, false)
	if len(ev.Output) != domain.MaxOutputBytes {
		t.Errorf("output is %d bytes, want %d", len(ev.Output), domain.MaxOutputBytes)
	}
}

// A retryable failure is handed back to tock: a failed event that says
// when to retry, per the retry policy, and an ack, so the execution holds
// no JetStream slot while it waits. tock's re-publish is the next attempt.
func TestRetriesGoBackThroughTock(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	var attempts []int
	var mu sync.Mutex
	w.Handle("flaky", func(ctx context.Context, x *Execution) (string, error) {
		mu.Lock()
		attempts = append(attempts, x.Attempt)
		mu.Unlock()
		if x.Attempt < 3 {
			return "partial", fmt.Errorf("boom %d", x.Attempt)
		}
		return "ok", nil
	})
	e.run(w)

	ex := execution("flaky")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 5, InitialBackoff: "10s", Multiplier: 3, Jitter: "none"}
	e.publish(ex)

	evs.expect(ex, domain.EventStarted, 1, false)
	f1 := evs.expect(ex, domain.EventFailed, 1, false)
	if f1.Error != "boom 1" || f1.Output != "partial" || f1.RetryInMS != 10_000 || f1.Dispatch != 0 || f1.TimedOut {
		t.Errorf("failed event 1 = %+v, want boom 1 with retry in 10s", f1)
	}
	// Acked: nothing waits in JetStream for the 10 s.
	e.settled("flaky")

	ex = e.republish(ex, f1)
	if s := evs.expect(ex, domain.EventStarted, 2, false); s.Dispatch != 1 {
		t.Errorf("attempt 2's started event has dispatch %d, want 1", s.Dispatch)
	}
	f2 := evs.expect(ex, domain.EventFailed, 2, false)
	if f2.RetryInMS != 30_000 || f2.Dispatch != 1 {
		t.Errorf("failed event 2 = %+v, want retry in 30s, dispatch 1", f2)
	}
	e.settled("flaky")

	ex = e.republish(ex, f2)
	evs.expect(ex, domain.EventStarted, 3, false)
	if s := evs.expect(ex, domain.EventSucceeded, 3, false); s.Dispatch != 2 || s.Output != "ok" {
		t.Errorf("succeeded event = %+v", s)
	}
	e.settled("flaky")
	evs.none(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Errorf("handler saw attempts %v, want [1 2 3]", attempts)
	}
}

// RetryAfter replaces the backoff with the handler's delay.
func TestRetryAfter(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.Handle("busy", func(ctx context.Context, x *Execution) (string, error) {
		return "", fmt.Errorf("call: %w", RetryAfter(errors.New("busy"), 1500*time.Millisecond))
	})
	e.run(w)
	ex := execution("busy")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 2, InitialBackoff: "1m", Jitter: "none"}
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	f1 := evs.expect(ex, domain.EventFailed, 1, false)
	if f1.RetryInMS != 1500 || f1.Error != "call: busy" {
		t.Errorf("failed event = %+v, want retry in 1500ms", f1)
	}
	// Still subject to MaxAttempts.
	ex = e.republish(ex, f1)
	evs.expect(ex, domain.EventStarted, 2, false)
	if f2 := evs.expect(ex, domain.EventFailed, 2, true); f2.RetryInMS != 0 {
		t.Errorf("final failed event has retry_in_ms %d", f2.RetryInMS)
	}
	e.settled("busy")
}

func TestLastAttemptIsFinal(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	var calls atomic.Int32
	w.Handle("broken", func(ctx context.Context, x *Execution) (string, error) {
		calls.Add(1)
		return "", errors.New("always")
	})
	e.run(w)

	ex := execution("broken")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 2, InitialBackoff: "10ms"}
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ex = e.republish(ex, evs.expect(ex, domain.EventFailed, 1, false))
	evs.expect(ex, domain.EventStarted, 2, false)
	evs.expect(ex, domain.EventFailed, 2, true)

	// Zero retry policy: one attempt only.
	one := execution("broken")
	e.publish(one)
	evs.expect(one, domain.EventStarted, 1, false)
	evs.expect(one, domain.EventFailed, 1, true)

	// A re-driven dead execution starts a new series of MaxAttempts.
	redriven := ex
	redriven.AttemptBase, redriven.SeriesBase, redriven.Dispatch = 2, 2, 2
	e.publish(redriven)
	evs.expect(redriven, domain.EventStarted, 3, false)
	if ev := evs.expect(redriven, domain.EventFailed, 3, false); ev.RetryInMS != 5 { // full jitter at 0.5 of 10ms
		t.Errorf("first retry of a new series in %dms, want 5ms", ev.RetryInMS)
	}

	e.settled("broken")
	evs.none(300 * time.Millisecond)
	if n := calls.Load(); n != 4 {
		t.Errorf("handler called %d times, want 4", n)
	}
}

func TestPermanentFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	deadCount := func() float64 {
		var m dto.Metric
		if err := w.m.attemptsTotal.WithLabelValues("picky", "dead").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	deadBefore := deadCount()
	var calls atomic.Int32
	w.Handle("picky", func(ctx context.Context, x *Execution) (string, error) {
		calls.Add(1)
		return "", fmt.Errorf("validate: %w", Permanent(errors.New("bad address")))
	})
	e.run(w)

	ex := execution("picky")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 10, InitialBackoff: "10ms"}
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, true)
	if ev.Error != "validate: bad address" {
		t.Errorf("error = %q", ev.Error)
	}
	e.settled("picky")
	evs.none(300 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}
	if n := deadCount() - deadBefore; n != 1 {
		t.Errorf("tock_executor_attempts_total{queue=picky,outcome=dead} grew by %v, want 1", n)
	}
}

func TestTimeoutCancelsHandler(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	ctxErr := make(chan error, 2)
	w.Handle("slow", func(ctx context.Context, x *Execution) (string, error) {
		select {
		case <-ctx.Done():
			ctxErr <- ctx.Err()
			return "", ctx.Err()
		case <-time.After(waitFor):
			ctxErr <- nil
			return "", nil
		}
	})
	e.run(w)

	ex := execution("slow")
	ex.TimeoutMS = 100
	ex.Retry = domain.RetryPolicy{MaxAttempts: 2, InitialBackoff: "2s", Jitter: "none"}
	e.publish(ex)
	if err := recv(t, ctxErr); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handler context ended with %v, want deadline exceeded", err)
	}
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, false)
	if !ev.TimedOut || !strings.Contains(ev.Error, "timed out after 100ms") || ev.RetryInMS != 2000 {
		t.Errorf("failed event = %+v, want a timeout retried in 2s", ev)
	}
	ex = e.republish(ex, ev)
	recv(t, ctxErr)
	evs.expect(ex, domain.EventStarted, 2, false)
	if ev := evs.expect(ex, domain.EventFailed, 2, true); !ev.TimedOut {
		t.Errorf("last failed event = %+v, want timed out", ev)
	}
	e.settled("slow")
}

func TestPanicIsRetryableFailure(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.Handle("panicky", func(ctx context.Context, x *Execution) (string, error) {
		if x.Attempt == 1 {
			panic("oops")
		}
		return "fine", nil
	})
	e.run(w)
	ex := execution("panicky")
	ex.Retry = domain.RetryPolicy{MaxAttempts: 2, InitialBackoff: "10ms"}
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, false)
	if !strings.Contains(ev.Error, "panicked: oops") {
		t.Errorf("error = %q", ev.Error)
	}
	ex = e.republish(ex, ev)
	evs.expect(ex, domain.EventStarted, 2, false)
	evs.expect(ex, domain.EventSucceeded, 2, false)
}

func TestMalformedExecutionIsTerminated(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.Handle("q", func(ctx context.Context, x *Execution) (string, error) { return "ok", nil })
	e.run(w)

	e.publishRaw(wire.ExecSubject("q", ""), []byte("{not json"), "garbage-1")
	e.publishRaw(wire.ExecSubject("q", ""), []byte(`{"job_id":"x"}`), "garbage-2")
	ex := execution("q")
	e.publish(ex)
	// Only the valid execution produces events; the others are gone.
	evs.expect(ex, domain.EventStarted, 1, false)
	evs.expect(ex, domain.EventSucceeded, 1, false)
	e.settled("q")
	evs.none(200 * time.Millisecond)
}

func TestConcurrencyLimit(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "exec-1")
	var running, peak atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	w.HandleWith("limited", func(ctx context.Context, x *Execution) (string, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		running.Add(-1)
		return "", nil
	}, QueueOptions{Concurrency: 2})
	e.run(w)
	for range 5 {
		e.publish(execution("limited"))
	}
	recv(t, entered)
	recv(t, entered)
	select {
	case <-entered:
		t.Fatal("a third attempt started with Concurrency 2")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for range 3 {
		recv(t, entered)
	}
	e.settled("limited")
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

func TestShutdownLetsAttemptsFinish(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	entered := make(chan struct{})
	release := make(chan struct{})
	w.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		close(entered)
		<-release
		return "finished", ctx.Err()
	})
	stop := e.run(w)
	ex := execution("q")
	e.publish(ex)
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while an attempt was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := recv(t, stopped); err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs.expect(ex, domain.EventStarted, 1, false)
	evs.expect(ex, domain.EventSucceeded, 1, false)
	e.settled("q")
}

func TestShutdownInterruptsSlowAttempt(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.ShutdownTimeout = 100 * time.Millisecond
	entered := make(chan struct{})
	w.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		close(entered)
		<-ctx.Done()
		return "", ctx.Err()
	})
	stop := e.run(w)
	ex := execution("q")
	ex.Retry.MaxAttempts = 1 // an interrupted attempt is retried anyway
	e.publish(ex)
	<-entered
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs.expect(ex, domain.EventStarted, 1, false)
	ev := evs.expect(ex, domain.EventFailed, 1, false)
	if !strings.Contains(ev.Error, "shutdown") || ev.RetryInMS != 0 || ev.TimedOut {
		t.Errorf("failed event = %+v, want an interruption to retry at once", ev)
	}
	e.settled("q") // acked: tock publishes it again

	// Another executor takes it over, as attempt 2.
	w2 := e.worker(e.nc, "exec-2")
	w2.Handle("q", func(ctx context.Context, x *Execution) (string, error) { return "ok", nil })
	e.run(w2)
	ex = e.republish(ex, ev)
	if ev := evs.expect(ex, domain.EventStarted, 2, false); ev.ExecutorID != "exec-2" {
		t.Errorf("attempt 2 ran on %s", ev.ExecutorID)
	}
	evs.expect(ex, domain.EventSucceeded, 2, false)
	e.settled("q")
}

// A handler that ignores the cancellation of its context at shutdown is
// given up abandonAfter later: its message is handed back to JetStream
// unreported and at once, so that another executor runs it then, not
// after the consumer's ack wait (30s here).
func TestShutdownHandsBackIgnoredCancellation(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.ShutdownTimeout = 100 * time.Millisecond
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	w.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		close(entered)
		<-release // ignores ctx
		return "", nil
	})
	// Not e.run, whose cleanup fails the test on Run's error.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	ex := execution("q")
	e.publish(ex)
	<-entered
	stopAt := time.Now()
	cancel()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "1 handed back") {
		t.Fatalf("Run: %v, want an error saying the attempt was handed back", err)
	}
	w2 := e.worker(e.nc, "exec-2")
	w2.Handle("q", func(ctx context.Context, x *Execution) (string, error) { return "ok", nil })
	e.run(w2)
	evs.expect(ex, domain.EventStarted, 1, false)
	evs.expect(ex, domain.EventStarted, 2, false)
	ev := evs.expect(ex, domain.EventSucceeded, 2, false)
	if ev.ExecutorID != "exec-2" {
		t.Errorf("attempt 2 ran on %s", ev.ExecutorID)
	}
	took := time.Since(stopAt)
	t.Logf("attempt 2 finished on another executor %s after the stop began (grace 100ms, abandon wait %s)", took.Round(time.Millisecond), abandonAfter)
	if took > abandonAfter+10*time.Second {
		t.Errorf("attempt 2 finished %s after the stop began; want about the abandon wait, %s, far below the ack wait", took, abandonAfter)
	}
}

// An executor that stops heartbeating without settling its message (it
// died, or lost NATS) has its execution redelivered after AckWait.
func TestRedeliveryWhenExecutorDies(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	short := wire.ConsumerOptions{AckWait: time.Second}

	deadNC := e.connect()
	dead := e.worker(deadNC, "exec-dead")
	dead.consumerOpts = short
	dead.cfg.ShutdownTimeout = 10 * time.Millisecond
	entered := make(chan struct{})
	dead.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		close(entered)
		<-ctx.Done()
		return "", ctx.Err()
	})
	stopDead := e.run(dead)

	ex := execution("q")
	ex.Retry.MaxAttempts = 3
	e.publish(ex)
	<-entered
	evs.expect(ex, domain.EventStarted, 1, false)
	deadNC.Close() // no more heartbeats, no ack

	live := e.worker(e.nc, "exec-live")
	live.consumerOpts = short
	live.Handle("q", func(ctx context.Context, x *Execution) (string, error) { return "took over", nil })
	e.run(live)
	if ev := evs.expect(ex, domain.EventStarted, 2, false); ev.ExecutorID != "exec-live" {
		t.Errorf("attempt 2 ran on %s", ev.ExecutorID)
	}
	evs.expect(ex, domain.EventSucceeded, 2, false)
	e.settled("q")
	if err := stopDead(); err != nil {
		t.Errorf("dead executor's Run: %v", err)
	}
}

// A long attempt keeps its message with heartbeats: no redelivery although
// it outlasts AckWait several times.
func TestHeartbeatKeepsLongAttempt(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.consumerOpts = wire.ConsumerOptions{AckWait: 300 * time.Millisecond}
	var calls atomic.Int32
	w.Handle("long", func(ctx context.Context, x *Execution) (string, error) {
		calls.Add(1)
		time.Sleep(1500 * time.Millisecond) // the work itself, 5 AckWaits
		return "done", nil
	})
	e.run(w)
	ex := execution("long")
	ex.Retry.MaxAttempts = 5
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	evs.expect(ex, domain.EventSucceeded, 1, false)
	e.settled("long")
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}
}

func TestRunWithoutHandlers(t *testing.T) {
	w, err := New(Config{NATS: &nats.Conn{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("Run without handlers: no error")
	}
}

// With a start report delay, a quick attempt is reported by its end alone
// (carrying its start time), and a slow one by a started event first.
func TestQuickAttemptsReportTheirStartWithTheirEnd(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-q")
	w.cfg.StartReportDelay = 300 * time.Millisecond
	w.Handle("quick-or-slow", func(ctx context.Context, x *Execution) (string, error) {
		if string(x.Payload) == `"slow"` {
			time.Sleep(700 * time.Millisecond)
		}
		return "ok", nil
	})
	e.run(w)

	quick := execution("quick-or-slow")
	quick.Payload = json.RawMessage(`"quick"`)
	e.publish(quick)
	done := evs.expect(quick, domain.EventSucceeded, 1, false)
	if done.StartedAt == nil || done.StartedAt.After(done.At) {
		t.Fatalf("quick attempt's succeeded event has started_at %v (at %v), want its start", done.StartedAt, done.At)
	}
	e.settled("quick-or-slow")

	slow := execution("quick-or-slow")
	slow.Payload = json.RawMessage(`"slow"`)
	e.publish(slow)
	started := evs.expect(slow, domain.EventStarted, 1, false)
	done = evs.expect(slow, domain.EventSucceeded, 1, false)
	if done.StartedAt != nil {
		t.Errorf("slow attempt's end repeats its start (%v); its started event (%v) reported it", done.StartedAt, started.At)
	}
	e.settled("quick-or-slow")
	evs.none(200 * time.Millisecond)
}

// Importing the package, or making a Worker without a Registerer,
// registers no metric anywhere; a Registerer gets the Worker's metrics,
// and Workers sharing one share them.
func TestMetricsOnlyWhereRegistered(t *testing.T) {
	if _, err := New(Config{NATS: &nats.Conn{}}); err != nil {
		t.Fatal(err)
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "tock_") {
			t.Errorf("metric %s is on the default registry", f.GetName())
		}
	}

	reg := prometheus.NewRegistry()
	w1, err := New(Config{NATS: &nats.Conn{}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := New(Config{NATS: &nats.Conn{}, Registerer: reg})
	if err != nil {
		t.Fatalf("a second Worker on the same registerer: %v", err)
	}
	w1.m.attemptsTotal.WithLabelValues("q", "succeeded").Inc()
	w2.m.attemptsTotal.WithLabelValues("q", "succeeded").Inc()
	w1.m.queueDepth.WithLabelValues("q", "normal").Set(3)
	if n := testutil.ToFloat64(w1.m.attemptsTotal.WithLabelValues("q", "succeeded")); n != 2 {
		t.Errorf("two Workers' attempts counted %v on their shared registry, want 2", n)
	}
	if n, err := testutil.GatherAndCount(reg, "tock_executor_attempts_total", "tock_queue_depth"); err != nil || n != 2 {
		t.Errorf("registry holds %d of the series, %v; want 2", n, err)
	}
}
