// Package recorder is tock's server-side role that reads execution events
// from JetStream (what executors report about their attempts) and writes
// them to Postgres, which holds the truth about executions.
//
// Events are consumed at least once and, within one execution, in the
// order executors published them, except that an event whose write failed
// is retried after later ones: the Store must accept duplicates and a
// finished attempt reported before its start.
package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor/wire"
	"github.com/tock-sched/tock/store"
)

// Store is what the recorder writes to. Both calls must be idempotent: an
// event can be delivered twice. An error wrapping store.ErrNotFound (the
// execution is gone, e.g. dropped by retention) drops the event; any other
// error has it retried.
type Store interface {
	// AttemptStarted records that executor began attempt (1-based) of
	// execution id at at.
	AttemptStarted(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time) error
	// AttemptFinished records the end of an attempt. outcome is
	// "succeeded" or "failed" (wire.EventSucceeded, wire.EventFailed).
	// final says no further attempt follows: always true on success; on
	// failure, the execution is dead (last attempt or permanent error).
	// errMsg and output are at most wire.MaxOutputBytes each.
	AttemptFinished(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time, outcome string, final bool, errMsg, output string) error
}

// Tuning. The consumer's AckWait must outlast a slow Store write.
const (
	// RetryDelay is how long an event whose write failed waits before it
	// is delivered again; it doubles with each failed delivery, up to
	// MaxRetryDelay.
	RetryDelay    = 2 * time.Second
	MaxRetryDelay = time.Minute
	ackWait       = 30 * time.Second
	// pullBatch bounds the events buffered in this process; each must be
	// written within ackWait of its delivery.
	pullBatch = 64
)

// Recorder consumes EventStream into a Store.
type Recorder struct {
	js  jetstream.JetStream
	st  Store
	log *slog.Logger
	// Seams for tests.
	retryDelay time.Duration
}

// New returns a Recorder that writes events from js to st. A nil log means
// slog.Default().
func New(js jetstream.JetStream, st Store, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{js: js, st: st, log: log.With("role", "recorder"), retryDelay: RetryDelay}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Run creates the streams and the recorder's durable consumer if needed
// and records events one at a time until ctx ends. It returns nil then. If
// NATS fails or is wiped it recreates them and carries on; it returns an
// error only if it cannot start.
func (r *Recorder) Run(ctx context.Context) error {
	cons, err := r.ensure(ctx)
	if err != nil {
		return err
	}
	pause := 100 * time.Millisecond
	for {
		err := r.consume(ctx, cons)
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("consume events", "err", err, "retry_in", pause)
		sleep(ctx, pause)
		pause = min(2*pause, 5*time.Second)
		if c, err := r.ensure(ctx); err != nil {
			r.log.Warn("re-create event consumer", "err", err)
		} else {
			cons = c
		}
	}
}

func (r *Recorder) ensure(ctx context.Context) (jetstream.Consumer, error) {
	if err := wire.EnsureStreams(ctx, r.js); err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	c, err := r.js.CreateOrUpdateConsumer(ctx, wire.EventStream, jetstream.ConsumerConfig{
		Durable:       wire.RecorderConsumer,
		Description:   "tock recorder: execution events into Postgres",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		FilterSubject: wire.EventSubjectPrefix + ">",
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("recorder: ensure consumer %s on %s: %w", wire.RecorderConsumer, wire.EventStream, err)
	}
	return c, nil
}

// consume records events until ctx ends or the iterator fails.
func (r *Recorder) consume(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		r.handle(ctx, msg)
	}
}

// handle records one event and settles its message.
func (r *Recorder) handle(ctx context.Context, msg jetstream.Msg) {
	var ev wire.Event
	if err := json.Unmarshal(msg.Data(), &ev); err != nil {
		r.log.Error("undecodable event; dropping it", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("tock: undecodable event")
		return
	}
	log := r.log.With("execution_id", ev.ExecutionID, "attempt", ev.Attempt, "event", ev.Type)
	id, err := uuid.Parse(ev.ExecutionID)
	if err != nil || ev.Attempt < 1 {
		log.Error("invalid event; dropping it", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("tock: invalid event")
		return
	}
	switch ev.Type {
	case wire.EventStarted:
		err = r.st.AttemptStarted(ctx, id, ev.Attempt, ev.ExecutorID, ev.At)
	case wire.EventSucceeded:
		err = r.st.AttemptFinished(ctx, id, ev.Attempt, ev.ExecutorID, ev.At, wire.EventSucceeded, true, "", wire.Truncate(ev.Output))
	case wire.EventFailed:
		err = r.st.AttemptFinished(ctx, id, ev.Attempt, ev.ExecutorID, ev.At, wire.EventFailed, ev.Final, wire.Truncate(ev.Error), wire.Truncate(ev.Output))
	case wire.EventHeartbeat:
		// Liveness is JetStream's business (in-progress acks); nothing to
		// record yet.
	default:
		log.Error("unknown event type; dropping it", "subject", msg.Subject())
		_ = msg.TermWithReason("tock: unknown event type")
		return
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Shutting down: leave it to be redelivered.
		_ = msg.Nak()
		return
	case errors.Is(err, store.ErrNotFound):
		log.Error("event for an unknown execution; dropping it", "err", err)
		_ = msg.TermWithReason("tock: unknown execution")
		return
	default:
		delay := r.retryDelay
		if md, mdErr := msg.Metadata(); mdErr == nil {
			for n := uint64(1); n < md.NumDelivered && delay < MaxRetryDelay; n++ {
				delay *= 2
			}
		}
		delay = min(delay, MaxRetryDelay)
		log.Warn("record event; retrying", "err", err, "retry_in", delay)
		_ = msg.NakWithDelay(delay)
		return
	}
	if err := msg.Ack(); err != nil {
		log.Warn("ack event", "err", err)
	}
}
