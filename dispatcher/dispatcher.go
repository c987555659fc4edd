// Package dispatcher publishes fired executions to NATS JetStream, exactly
// once per execution id, and marks them dispatched in Postgres on the
// publish ack.
//
// The executions table is the outbox: a fired execution is committed first
// and published after. Each message carries Nats-Msg-Id = execution id, so
// a re-publish inside the stream's duplicate window (2 minutes) is dropped
// by JetStream; an execution whose ack was lost stays undispatched and the
// scanner hands it here again. Dispatch never blocks the caller on NATS.
package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tock-sched/tock/executor/wire"
	"github.com/tock-sched/tock/store"
)

var (
	fireLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "tock_fire_lag_seconds",
		Help:    "Time from an execution's scheduled time to its publish ack from JetStream.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	dispatched = promauto.NewCounter(prometheus.CounterOpts{
		Name: "tock_dispatched_total",
		Help: "Executions published to JetStream and acknowledged.",
	})
	dispatchErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "tock_dispatch_errors_total",
		Help: "Execution publishes that failed or were not acknowledged in time (they are retried from the outbox).",
	})
)

// Store is what the dispatcher needs from Postgres.
type Store interface {
	MarkDispatched(ctx context.Context, ids []uuid.UUID, at time.Time) error
}

// Config configures a Dispatcher. JS and Store are required.
type Config struct {
	JS    jetstream.JetStream
	Store Store
	// BatchSize caps the executions published before one MarkDispatched;
	// default 1000.
	BatchSize int
	// Workers publish batches in parallel; default 2.
	Workers int
	// AckTimeout bounds the wait for a batch's publish acks; default 5s.
	AckTimeout time.Duration
	// Now is the cluster clock: nothing is published before its
	// scheduled time by it, and the fire-lag metric uses it; default
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Dispatcher publishes executions. Create it with New and run it with Run.
type Dispatcher struct {
	cfg   Config
	log   *slog.Logger
	queue chan *store.Execution

	mu       sync.Mutex
	inflight map[uuid.UUID]struct{}
}

// New checks cfg and returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.JS == nil || cfg.Store == nil {
		return nil, errors.New("dispatcher: Config.JS and Config.Store are required")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{
		cfg: cfg,
		log: cfg.Logger,
		// Room for a few seconds of firing at full speed, executions the
		// scanner fired ahead of their time included.
		queue:    make(chan *store.Execution, 64*cfg.BatchSize),
		inflight: map[uuid.UUID]struct{}{},
	}, nil
}

// SetClock sets the cluster clock (the scanner's database-corrected
// Passed): nothing is published before its scheduled time by it, and the
// fire-lag metric is measured with it. Call it before Run.
func (d *Dispatcher) SetClock(now func() time.Time) { d.cfg.Now = now }

// Dispatch queues executions for publishing. Executions already queued or
// being published are skipped, so the outbox may hand the same execution
// again safely. It blocks only while the queue is full (back-pressure).
func (d *Dispatcher) Dispatch(ctx context.Context, execs []*store.Execution) {
	for _, e := range execs {
		d.mu.Lock()
		_, busy := d.inflight[e.ID]
		if !busy {
			d.inflight[e.ID] = struct{}{}
		}
		d.mu.Unlock()
		if busy {
			continue
		}
		select {
		case d.queue <- e:
		case <-ctx.Done():
			d.done([]*store.Execution{e})
			return
		}
	}
}

// Run publishes queued executions until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := 0; i < d.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (d *Dispatcher) work(ctx context.Context) {
	batch := make([]*store.Execution, 0, d.cfg.BatchSize)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case e := <-d.queue:
			batch = append(batch, e)
		}
	fill:
		for len(batch) < d.cfg.BatchSize {
			select {
			case e := <-d.queue:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		d.publish(ctx, batch)
		d.done(batch)
	}
}

func (d *Dispatcher) done(batch []*store.Execution) {
	d.mu.Lock()
	for _, e := range batch {
		delete(d.inflight, e.ID)
	}
	d.mu.Unlock()
}

// publish sends a batch asynchronously, each execution at its scheduled
// time (the scanner fires a little ahead so that the database work is done
// by then; nothing is published early), waits for the acks and marks the
// acknowledged executions dispatched in one statement.
func (d *Dispatcher) publish(ctx context.Context, batch []*store.Execution) {
	futures := make([]jetstream.PubAckFuture, len(batch))
	for i, e := range batch {
		if wait := e.ScheduledFor.Sub(d.cfg.Now()); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return // still in the outbox: the next owner publishes it
			}
		}
		msg, err := Message(e)
		if err != nil {
			d.log.Error("encode execution", "execution_id", e.ID, "err", err)
			dispatchErrors.Inc()
			continue
		}
		f, err := d.cfg.JS.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID.String()))
		if err != nil {
			d.log.Warn("publish execution", "execution_id", e.ID, "err", err)
			dispatchErrors.Inc()
			continue
		}
		futures[i] = f
	}
	timeout := time.NewTimer(d.cfg.AckTimeout)
	defer timeout.Stop()
	acked := make([]uuid.UUID, 0, len(batch))
	lags := make([]float64, 0, len(batch))
wait:
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			acked = append(acked, batch[i].ID)
			lags = append(lags, d.cfg.Now().Sub(batch[i].ScheduledFor).Seconds())
		case err := <-f.Err():
			d.log.Warn("publish execution not acknowledged", "execution_id", batch[i].ID, "err", err)
			dispatchErrors.Inc()
		case <-timeout.C:
			dispatchErrors.Add(float64(len(futures) - i))
			d.log.Warn("publish acks timed out", "waiting", len(futures)-i)
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	if len(acked) == 0 {
		return
	}
	// Marking must survive our own shutdown: the messages are out already.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Store.MarkDispatched(mctx, acked, d.cfg.Now()); err != nil {
		// Not lost: the outbox re-publishes, and JetStream drops the
		// duplicate inside its window.
		d.log.Warn("mark dispatched", "count", len(acked), "err", err)
		return
	}
	for i := range lags {
		fireLag.Observe(max(lags[i], 0))
	}
	dispatched.Add(float64(len(acked)))
}

// Message is the NATS message for e: the wire.Execution body on
// tock.exec.<queue>, with the execution's headers.
func Message(e *store.Execution) (*nats.Msg, error) {
	body, err := json.Marshal(e.WireExecution())
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(wire.ExecSubject(e.Handler.Queue(), ""))
	msg.Data = body
	msg.Header.Set(wire.HeaderExecutionID, e.ID.String())
	msg.Header.Set(wire.HeaderJobID, e.JobID.String())
	msg.Header.Set(wire.HeaderScheduledFor, wire.FormatTime(e.ScheduledFor))
	return msg, nil
}
