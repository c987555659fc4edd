// Command conformance-executor is the Go SDK's executor for the
// conformance kit (package conformance): it serves the handler named by
// TOCK_CONFORMANCE_HANDLER on TOCK_NATS_URL and does what each
// execution's payload asks (conformance.Instruction), until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/executor"
)

func main() {
	if err := run(); err != nil {
		slog.Error("conformance executor", "err", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url, handler := os.Getenv(conformance.EnvNATSURL), os.Getenv(conformance.EnvHandler)
	if url == "" || handler == "" {
		return fmt.Errorf("%s and %s must be set", conformance.EnvNATSURL, conformance.EnvHandler)
	}
	nc, err := nats.Connect(url, nats.Name("tock conformance executor"))
	if err != nil {
		return err
	}
	defer nc.Close()
	w, err := executor.New(executor.Config{NATS: nc})
	if err != nil {
		return err
	}
	w.Handle(handler, func(ctx context.Context, e *executor.Execution) (string, error) {
		in, ok := conformance.ReadInstruction(e.Payload)
		if !ok {
			return "", executor.Permanent(errors.New("no conformance instruction in the payload"))
		}
		for _, l := range in.Log {
			fmt.Fprintln(executor.Log(ctx), l)
		}
		out := in.Output
		if in.EchoID {
			out = e.ExecutionID
		}
		switch in.Do {
		case conformance.DoSucceed:
			return out, nil
		case conformance.DoFail:
			if e.Attempt <= in.FailAttempts {
				return "", errors.New("conformance: asked to fail")
			}
			return out, nil
		case conformance.DoWork:
			select {
			case <-time.After(in.Work()):
				return out, nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		}
		return "", executor.Permanent(fmt.Errorf("unknown instruction %q", in.Do))
	})
	return w.Run(ctx)
}
