package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tock-sched/tock/conformance"
)

// ConformanceCmd is tockd conformance: the conformance kit of custom
// executors (package conformance). It is a tockd command, not a tockctl
// one, because it runs a whole tock (embedded etcd and NATS, the
// scheduler, the recorder, the API), which tockctl, a client of the API
// that links no server package, cannot.
type ConformanceCmd struct {
	PostgresURL string   `name:"postgres-url" env:"TOCK_POSTGRES_URL" default:"postgres://postgres@127.0.0.1:5432/tock?sslmode=disable" help:"A PostgreSQL server: the kit makes a database of its own there, and drops it at the end."`
	Handler     string   `default:"conformance" help:"The custom handler the executor serves (given to it as TOCK_CONFORMANCE_HANDLER)."`
	Check       []string `help:"Run only this check (repeatable); every check when none is given (docs/wire-protocol.md lists them)."`
	Verbose     bool     `short:"v" help:"Show the executor's output and standard error."`
	Command     []string `arg:"" passthrough:"" help:"The command that starts the executor under test (after --): it gets TOCK_NATS_URL and TOCK_CONFORMANCE_HANDLER."`
}

// Run runs the kit and fails unless every check passed.
func (c *ConformanceCmd) Run() error {
	cmd := c.Command
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	if len(cmd) == 0 {
		return errors.New("give the command that starts the executor after --: tockd conformance -- ./my-executor")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := conformance.Config{PostgresURL: c.PostgresURL, Command: cmd, Handler: c.Handler, Checks: c.Check, Out: os.Stdout}
	if c.Verbose {
		cfg.Stderr = os.Stderr
	}
	res, err := conformance.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range res {
		if !r.Pass {
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d checks failed: %s", len(failed), len(res), strings.Join(failed, ", "))
	}
	fmt.Printf("all %d checks passed\n", len(res))
	return nil
}
