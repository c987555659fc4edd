// Command custom-executor is a minimal tock custom executor: it serves one
// custom handler (default "send-email") by logging each execution and
// returning an output, until SIGINT or SIGTERM.
//
// Create a job whose handler is {"type":"custom","name":"send-email"} and
// run:
//
//	go run ./examples/custom-executor -nats nats://127.0.0.1:4222
//
// On a NATS server with authentication or TLS, give its credentials in
// the environment: NATS_USER and NATS_PASSWORD, NATS_NKEY_SEED (a seed
// file) or NATS_CREDS (a .creds file); NATS_CA to trust a private CA,
// NATS_CERT and NATS_KEY for a client certificate; and NATS_INBOX_PREFIX
// (e.g. _INBOX_send-email) for a user whose permissions allow replies on
// its own inbox prefix only, as deploy/nats/custom-executor.conf does.
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

	opts, err := natsOptions()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("tock custom executor "+handler),
		// A refused publish or subscription is reported here only.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { slog.Warn("NATS", "err", err) }))...)
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
		// What the attempt prints goes to its log in tock (GET
		// /v1/executions/{id}/logs, tockctl executions logs -f, the
		// dashboard), live: executor.Log(ctx) is its stdout,
		// executor.LogStream(ctx, "stderr") another stream,
		// executor.Logger(ctx, nil) a slog.Logger writing to it.
		fmt.Fprintf(executor.Log(ctx), "sending %s\n", e.Payload)
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

// natsOptions reads the connection's credentials and TLS files from the
// environment (see the package comment).
func natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if user := os.Getenv("NATS_USER"); user != "" {
		opts = append(opts, nats.UserInfo(user, os.Getenv("NATS_PASSWORD")))
	}
	if seed := os.Getenv("NATS_NKEY_SEED"); seed != "" {
		o, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("NATS_NKEY_SEED: %w", err)
		}
		opts = append(opts, o)
	}
	if creds := os.Getenv("NATS_CREDS"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if ca := os.Getenv("NATS_CA"); ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	if cert, key := os.Getenv("NATS_CERT"), os.Getenv("NATS_KEY"); cert != "" || key != "" {
		opts = append(opts, nats.ClientCert(cert, key))
	}
	if prefix := os.Getenv("NATS_INBOX_PREFIX"); prefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(prefix))
	}
	return opts, nil
}
