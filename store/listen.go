package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification channels. The store sends them with pg_notify inside the
// writing transaction (CreateJob: right after it commits, see
// notifyCommitted), so they arrive only once the change is committed
// (and never for a rolled-back one). They are hints that save polling:
// a listener that was disconnected has missed some and must re-read.
const (
	// JobsChannel carries "<bucket>:<job id>" when a job is updated
	// (which includes pausing and resuming) or deleted, or created active
	// and due within a minute (a job due later is found by the scanners'
	// ordinary scans); "*" when a batch created more such jobs than it
	// announces one by one, asking every scanner for a full scan.
	JobsChannel = "tock_jobs"
	// ExecChannel carries "<bucket>" when an execution is put in the
	// outbox outside firing: a manual run (CreateManualExecution), a retry or a deferral
	// recorded by RecordAttemptEvents, a re-drive, a lost execution re-queued. The
	// bucket's scanner then reads its outbox without waiting for the next
	// pass.
	ExecChannel = "tock_exec"
)

// Listen LISTENs on channels over a dedicated connection (not one of the
// pool's) and calls fn, from Listen's goroutine, for each notification.
// It returns ctx.Err() when ctx ends, or the error that broke the
// connection; the caller calls it again, after re-reading whatever it
// may have missed.
func (s *Store) Listen(ctx context.Context, fn func(channel, payload string), channels ...string) error {
	if len(channels) == 0 {
		return errors.New("store: listen: no channels")
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("store: listen: connect: %w", err)
	}
	defer func() {
		// ctx may be done already; closing still needs a moment.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	stmts := make([]string, len(channels))
	for i, ch := range channels {
		stmts[i] = "LISTEN " + pgx.Identifier{ch}.Sanitize()
	}
	if _, err := conn.Exec(ctx, strings.Join(stmts, "; ")); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("store: listen %v: %w", channels, err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("store: listen %v: %w", channels, err)
		}
		fn(n.Channel, n.Payload)
	}
}
