// Command custom-executor is a minimal tock custom executor: it serves one
// custom handler (default "send-email") by logging each execution and
// returning an output, until SIGINT or SIGTERM.
//
// Create a job whose handler is {"type":"custom","name":"send-email"} and
// run:
//
//	go run ./examples/custom-executor -nats nats://127.0.0.1:4222
//
// Delivery is at-least-once: a real handler should use the execution id
// (the same on every attempt) to do its work only once. Retries, and
// executions deferred by the handler's circuit breaker, come back through
// tock; see docs/wire-protocol.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/executor"
)

func main() {
	defaultURL := os.Getenv("TOCK_NATS_URL") // set by `source .dev/env` after `make dev`
	if defaultURL == "" {
		defaultURL = "nats://127.0.0.1:4222"
	}
	url := flag.String("nats", defaultURL, "NATS server URL (default $TOCK_NATS_URL)")
	handler := flag.String("handler", "send-email", "custom handler name to serve")
	concurrency := flag.Int("concurrency", 4, "attempts run at once")
	flag.Parse()
	if err := run(*url, *handler, *concurrency); err != nil {
		slog.Error("custom executor", "err", err)
		os.Exit(1)
	}
}

func run(url, handler string, concurrency int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	nc, err := nats.Connect(url, nats.Name("tock custom executor "+handler))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()

	w, err := executor.New(executor.Config{NATS: nc, Concurrency: concurrency})
	if err != nil {
		return err
	}
	w.Handle(handler, func(ctx context.Context, e *executor.Execution) (string, error) {
		slog.Info("execution",
			"execution_id", e.ExecutionID, "job_id", e.JobID, "job", e.Namespace+"/"+e.JobName,
			"scheduled_for", e.ScheduledFor, "attempt", e.Attempt, "payload", string(e.Payload))
		// Return an error to have the attempt retried after the job's
		// backoff, executor.RetryAfter(err, d) to have it retried after d,
		// or executor.Permanent(err) to fail the execution now.
		//
		// ctx ends at the job's timeout, at shutdown, and when the
		// execution is cancelled through tock
		// (errors.Is(context.Cause(ctx), executor.ErrCancelled)): long work
		// should watch it and stop.
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		default:
		}
		return "handled by " + w.ID(), nil
	})
	slog.Info("serving", "handler", handler, "nats", url, "executor_id", w.ID())
	return w.Run(ctx)
}
