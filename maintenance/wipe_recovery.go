package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/wire"
)

// Wipe defaults.
const (
	// DefaultWipeCheckEvery is how often the exec stream's incarnation
	// is read.
	DefaultWipeCheckEvery = 2 * time.Second
	// DefaultWipeGrace is how long after a new exec stream appears the
	// executions lost with the old one are re-queued. Meanwhile
	// executors re-send the events of the attempts they ran (see package
	// executor), and attempts still running report their start, so that
	// Postgres learns what did run before anything is published again.
	DefaultWipeGrace = 10 * time.Second
)

// Bounds of the re-queue. While the new stream's duplicate window still
// covers every publish into it (dedupWithin of its creation, with time to
// spare for the re-publish itself), executions marked dispatched up to
// clockSlack after its creation are re-queued too: one the new stream has
// already is dropped as a duplicate, so erring late costs nothing and
// absorbs the error of placing the creation on the cluster clock. Later,
// only those dispatched clockSlack before it are, as no duplicate window
// protects a mistaken re-publish then; that pass repeats every
// lateCheckEvery, for buckets whose owner missed the window.
const (
	clockSlack     = time.Second
	dedupWithin    = wire.DuplicateWindow - 30*time.Second
	lateCheckEvery = time.Minute
)

// WipeStore is what WipeRecovery needs from Postgres; *store.Store is one.
type WipeStore interface {
	RequeueWipedExecutions(ctx context.Context, buckets []int, before time.Time) (int, error)
}

// WipeRecoveryConfig configures a WipeRecovery. JS, Store and Buckets are
// required.
type WipeRecoveryConfig struct {
	JS    jetstream.JetStream
	Store WipeStore
	// Buckets are the buckets this node owns now; only their executions
	// are re-queued (each node re-queues its own).
	Buckets func() []int
	// Now is the cluster clock, the one executions are marked dispatched
	// by; default time.Now.
	Now func() time.Time
	// CheckEvery defaults to DefaultWipeCheckEvery, Grace to
	// DefaultWipeGrace.
	CheckEvery time.Duration
	Grace      time.Duration
	Logger     *slog.Logger
	// Registerer is where tock_wipe_requeued_total and
	// tock_maintenance_last_success_timestamp_seconds are registered;
	// nil registers them nowhere.
	Registerer prometheus.Registerer
}

// WipeRecovery puts back in the outbox what JetStream lost with its exec
// stream. Executions are marked dispatched once JetStream acknowledges
// them, and nothing publishes a dispatched execution again; so when the
// stream is deleted, or NATS restarts on an empty store, the executions
// waiting in it would never run. WipeRecovery reads the stream's
// incarnation (wire.Incarnation) and, once a new one is Grace old, has
// the store re-queue the owned buckets' executions that were published
// before it existed and have not started (store.RequeueWipedExecutions). It
// also creates the streams when they are missing, so that a node with the
// scheduler role alone brings them back.
type WipeRecovery struct {
	cfg      WipeRecoveryConfig
	log      *slog.Logger
	watch    *wire.IncarnationWatch
	requeued prometheus.Counter
	last     prometheus.Gauge
	// Owned by Run's goroutine.
	lastLate time.Time // the last re-queue outside the duplicate window
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults: the local clock, DefaultWipeCheckEvery,
// DefaultWipeGrace and the default logger.
func (c WipeRecoveryConfig) WithDefaults() WipeRecoveryConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CheckEvery <= 0 {
		c.CheckEvery = DefaultWipeCheckEvery
	}
	if c.Grace <= 0 {
		c.Grace = DefaultWipeGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate rejects a configuration that cannot work.
func (c *WipeRecoveryConfig) validate() error {
	if c.JS == nil || c.Store == nil || c.Buckets == nil {
		return errors.New("maintenance: WipeRecoveryConfig.JS, Store and Buckets are required")
	}
	return nil
}

// NewWipeRecovery checks cfg and returns a WipeRecovery.
func NewWipeRecovery(cfg WipeRecoveryConfig) (*WipeRecovery, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	r := &WipeRecovery{cfg: cfg, log: cfg.Logger, watch: wire.NewIncarnationWatch(cfg.JS, wire.ExecStream),
		requeued: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_wipe_requeued_total",
			Help: "Executions put back in the outbox because JetStream lost the stream they had been published to.",
		}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("wipe_recovery"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register wipe-recovery metrics: %w", err)
	}
	return r, nil
}

// Run checks the exec stream every CheckEvery until ctx ends.
func (r *WipeRecovery) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.CheckEvery)
	defer t.Stop()
	for {
		_ = r.RunOnce(ctx) // logged there, at the level each failure deserves
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce reads the exec stream's incarnation once and re-queues what a
// new stream lost, if it is due; it creates the streams if they are
// missing. It logs what it did and what failed (a stream it cannot read,
// as when NATS is down, at debug level), and returns the failure.
func (r *WipeRecovery) RunOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CheckEvery)
	defer cancel()
	inc, isNew, err := r.watch.Check(cctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		r.log.Warn("JetStream stream missing; creating the streams again", "stream", wire.ExecStream)
		if err := wire.EnsureStreams(cctx, r.cfg.JS); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("create streams", "err", err)
			}
			return fmt.Errorf("create streams: %w", err)
		}
		r.last.SetToCurrentTime()
		return nil
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("read exec stream", "err", err)
		}
		return fmt.Errorf("read exec stream: %w", err)
	}
	// The creation on the cluster clock, whatever the server's offset.
	now := r.cfg.Now()
	created := now.Add(-inc.Age)
	if isNew {
		r.log.Warn("JetStream exec stream is new (deleted, or NATS lost its store); re-queuing what the old one held",
			"stream", inc.Stream, "created", created, "after", r.cfg.Grace)
	}
	var before time.Time
	switch {
	case inc.Age < r.cfg.Grace:
		r.last.SetToCurrentTime()
		return nil
	case inc.Age < dedupWithin:
		before = created.Add(clockSlack)
	case now.Sub(r.lastLate) >= lateCheckEvery:
		before = created.Add(-clockSlack)
		r.lastLate = now
	default:
		r.last.SetToCurrentTime()
		return nil
	}
	buckets := r.cfg.Buckets()
	if len(buckets) == 0 {
		r.last.SetToCurrentTime()
		return nil
	}
	n, err := r.cfg.Store.RequeueWipedExecutions(cctx, buckets, before)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("re-queue executions lost with the exec stream", "err", err)
		}
		return err
	}
	if n > 0 {
		r.requeued.Add(float64(n))
		r.log.Warn("re-queued executions lost with the exec stream", "count", n, "published_before", before)
	}
	r.last.SetToCurrentTime()
	return nil
}
