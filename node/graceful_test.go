package node_test

// Graceful stop: an executor that stops lets its running attempts finish
// for its shutdown grace and hands back, at once, what still runs then;
// a node that stops records what its executor reported before it exits.

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// stoppableWorker runs a custom executor for handler, like
// nodetest.Env.Worker, and returns a function that stops it (its
// context ends, it drains and closes its connection) and returns Run's
// error. It also stops at cleanup.
func stoppableWorker(t *testing.T, e *nodetest.Env, cfg executor.Config, handler string, fn executor.Func) func() error {
	t.Helper()
	nc, err := nats.Connect(e.NATS.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS = nc
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(handler, fn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			nc.Close()
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// marks records when things happened, by name.
type marks struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (m *marks) set(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	if _, ok := m.at[name]; !ok {
		m.at[name] = time.Now()
	}
}

func (m *marks) get(name string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[name]
	return at, ok
}

// An attempt longer than the stopping executor's grace is interrupted at
// the end of the grace and handed back: another executor starts it within
// about a second (far below the 30s ack wait), the execution succeeds
// there, and its first attempt is recorded as interrupted.
func TestGracefulStopHandsBackLongAttempt(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	var m marks
	const grace = time.Second
	stop1 := stoppableWorker(t, e, executor.Config{ExecutorID: "first", ShutdownTimeout: grace}, "long",
		func(ctx context.Context, x *executor.Execution) (string, error) {
			m.set("first started")
			<-ctx.Done() // longer than the grace
			m.set("first returned")
			return "", context.Cause(ctx)
		})
	id := n1.RunOnce(t, map[string]any{"name": "long", "handler": map[string]any{"type": "custom", "name": "long"}})
	nodetest.WaitFor(t, 30*time.Second, "the first executor starts the attempt", func() bool {
		_, ok := m.get("first started")
		return ok
	})
	stoppableWorker(t, e, executor.Config{ExecutorID: "second"}, "long",
		func(ctx context.Context, x *executor.Execution) (string, error) {
			m.set("second started")
			return "finished elsewhere", nil
		})

	stopAt := time.Now()
	if err := stop1(); err != nil {
		t.Fatalf("first executor: %v", err)
	}
	stopped := time.Since(stopAt)
	x := n1.WaitState(t, id, "succeeded", 20*time.Second)
	returned, _ := m.get("first returned")
	second, ok := m.get("second started")
	if !ok {
		t.Fatal("the second executor never ran the execution")
	}
	handBack := second.Sub(returned)
	t.Logf("first executor stopped in %s (grace %s); the second started the attempt %s after the hand-back",
		stopped.Round(time.Millisecond), grace, handBack.Round(time.Millisecond))
	if handBack > 5*time.Second {
		t.Errorf("the second executor started the attempt %s after the hand-back; want well below the 30s ack wait", handBack)
	}
	if stopped > grace+5*time.Second {
		t.Errorf("the first executor took %s to stop; want about its grace, %s", stopped, grace)
	}
	atts := nodetest.Attempts(x)
	if len(atts) != 2 {
		t.Fatalf("attempts %+v, want 2", atts)
	}
	first, last := atts[0], atts[1]
	if nodetest.Str(first.Outcome) != "failed" || !strings.Contains(nodetest.Str(first.Error), "interrupted by executor shutdown") ||
		nodetest.Str(first.ExecutorId) != "first" {
		t.Errorf("first attempt %+v (error %q): want failed, interrupted by executor shutdown, on the first executor",
			first, nodetest.Str(first.Error))
	}
	if nodetest.Str(last.Outcome) != "succeeded" || nodetest.Str(last.ExecutorId) != "second" {
		t.Errorf("second attempt %+v: want succeeded on the second executor", last)
	}
}

// An attempt shorter than the grace finishes on the stopping executor:
// nothing is handed back, and the executor pulls nothing new meanwhile.
func TestGracefulStopFinishesShortAttempt(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	var m marks
	var mu sync.Mutex
	var ran []string
	stop := stoppableWorker(t, e, executor.Config{ExecutorID: "only", ShutdownTimeout: 20 * time.Second}, "short",
		func(ctx context.Context, x *executor.Execution) (string, error) {
			mu.Lock()
			ran = append(ran, x.ExecutionID)
			mu.Unlock()
			m.set("started")
			select {
			case <-time.After(2 * time.Second):
				return "done", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		})
	id := n1.RunOnce(t, map[string]any{"name": "short", "handler": map[string]any{"type": "custom", "name": "short"}})
	nodetest.WaitFor(t, 30*time.Second, "the attempt starts", func() bool {
		_, ok := m.get("started")
		return ok
	})
	stopAt := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- stop() }()
	// Published while the executor stops: it must not be pulled.
	other := n1.RunOnce(t, map[string]any{"name": "other", "handler": map[string]any{"type": "custom", "name": "short"}})
	if err := <-stopErr; err != nil {
		t.Fatalf("executor: %v", err)
	}
	stopped := time.Since(stopAt)
	x := n1.WaitState(t, id, "succeeded", 20*time.Second)
	t.Logf("executor stopped in %s, after its attempt finished", stopped.Round(time.Millisecond))
	if stopped > 15*time.Second {
		t.Errorf("executor took %s to stop; want the attempt's 2s and a little", stopped)
	}
	if atts := nodetest.Attempts(x); len(atts) != 1 || nodetest.Str(atts[0].Outcome) != "succeeded" {
		t.Errorf("attempts %+v: want one, succeeded", atts)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(ran, other.String()) {
		t.Errorf("the stopping executor ran %s, published after its stop began", other)
	}
}
