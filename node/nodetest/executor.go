package nodetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/executor"
)

// Worker runs a custom executor for handler with the SDK, as a user's
// program would, until the test ends. cfg's NATS connection and logger
// are the harness's; its ExecutorID defaults to "e2e-" + handler.
func (e *Env) Worker(t testing.TB, cfg executor.Config, handler string, fn executor.Func) {
	t.Helper()
	e.StoppableWorker(t, cfg, handler, fn)
}

// StoppableWorker is Worker, and returns a function that stops the
// executor (its context ends: it drains, then its connection closes)
// and returns Run's error. It stops at cleanup too.
func (e *Env) StoppableWorker(t testing.TB, cfg executor.Config, handler string, fn executor.Func) func() error {
	t.Helper()
	nc, err := nats.Connect(e.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS = nc
	if cfg.ExecutorID == "" {
		cfg.ExecutorID = "e2e-" + handler
	}
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

// Serve serves handler with fn through the SDK (Worker with its
// defaults).
func (e *Env) Serve(t testing.TB, handler string, fn executor.Func) {
	t.Helper()
	e.Worker(t, executor.Config{}, handler, fn)
}

// Echo serves handler with an executor that answers "done <execution
// id>", and returns the execution ids it saw, in order.
func (e *Env) Echo(t testing.TB, handler string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	e.Serve(t, handler, func(ctx context.Context, x *executor.Execution) (string, error) {
		mu.Lock()
		seen = append(seen, x.ExecutionID)
		mu.Unlock()
		return "done " + x.ExecutionID, nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// EverySecondJobs creates n jobs firing every second on the custom
// handler, named handler-000 and on.
func (n *Node) EverySecondJobs(t testing.TB, handler string, count int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, count)
	for i := range ids {
		ids[i] = n.CreateJob(t, map[string]any{
			"name":     fmt.Sprintf("%s-%03d", handler, i),
			"schedule": map[string]any{"cron": "* * * * * *"},
			"handler":  map[string]any{"type": "custom", "name": handler},
		}).Id
	}
	return ids
}
