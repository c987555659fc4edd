// Command ignorecancel is a broken executor for the kit's tests: it does
// what the conformance instructions say, but works its time out whatever
// happens (it ignores cancellation and timeouts).
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/executor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect(os.Getenv(conformance.EnvNATSURL))
	if err != nil {
		os.Exit(1)
	}
	w, err := executor.New(executor.Config{NATS: nc, ShutdownTimeout: time.Second})
	if err != nil {
		os.Exit(1)
	}
	w.Handle(os.Getenv(conformance.EnvHandler), func(_ context.Context, e *executor.Execution) (string, error) {
		in, _ := conformance.ReadInstruction(e.Payload)
		switch in.Do {
		case conformance.DoFail:
			if e.Attempt <= in.FailAttempts {
				return "", errors.New("conformance: asked to fail")
			}
		case conformance.DoWork:
			time.Sleep(in.Work()) // the broken part: ctx is not watched
		}
		return in.Output, nil
	})
	_ = w.Run(ctx)
}
