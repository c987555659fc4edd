package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
)

// LostWorkRescuer defaults.
const (
	// DefaultLostAfter is how long a running execution may give no sign
	// of life before it is re-queued. JetStream hands a silent executor's
	// message to another after its ack wait (30s), so this only catches
	// messages NATS itself lost.
	DefaultLostAfter = 5 * time.Minute
	// DefaultLostInterval is how often the owned buckets are checked.
	DefaultLostInterval = 10 * time.Second
)

// LostWorkStore is what LostWorkRescuer needs from Postgres;
// *store.Store is one.
type LostWorkStore interface {
	RequeueLostExecutions(ctx context.Context, buckets []int, olderThan time.Time) (int, error)
	ReleaseSilentSlots(ctx context.Context, buckets []int, olderThan time.Time) (int, error)
}

// LostWorkRescuerConfig configures a LostWorkRescuer. Store and Buckets
// are required.
type LostWorkRescuerConfig struct {
	Store LostWorkStore
	// Buckets are the buckets this node fires in now (their epochs
	// recorded); scanner.Scanner.Owned is the one to use. Each node
	// rescues its own.
	Buckets func() []int
	// Now is the cluster clock, the one attempts' signs of life are
	// written by (the scanner's); default time.Now.
	Now func() time.Time
	// LostAfter: a running execution whose newest attempt has given no
	// sign of life (start, heartbeat) for this long is re-queued
	// (store.RequeueLostExecutions). Default DefaultLostAfter; it must not be
	// negative.
	LostAfter time.Duration
	// Interval is how often Run checks; default DefaultLostInterval; it
	// must not be negative.
	Interval time.Duration
	Logger   *slog.Logger
	// Registerer is where tock_lost_requeued_total and
	// tock_maintenance_last_success_timestamp_seconds are registered;
	// nil registers them nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero set to their
// defaults.
func (c LostWorkRescuerConfig) WithDefaults() LostWorkRescuerConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LostAfter == 0 {
		c.LostAfter = DefaultLostAfter
	}
	if c.Interval == 0 {
		c.Interval = DefaultLostInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *LostWorkRescuerConfig) validate() error {
	if c.Store == nil || c.Buckets == nil {
		return errors.New("maintenance: LostWorkRescuerConfig.Store and Buckets are required")
	}
	if c.LostAfter < 0 || c.Interval < 0 {
		return fmt.Errorf("maintenance: LostAfter %s and Interval %s must not be negative", c.LostAfter, c.Interval)
	}
	return nil
}

// LostWorkRescuer is the backstop for work NATS lost: it re-queues the
// running executions of this node's buckets that have been silent for
// LostAfter (store.RequeueLostExecutions puts them back in the outbox, failed, due
// now, and the scanner hands them to the dispatcher).
type LostWorkRescuer struct {
	cfg      LostWorkRescuerConfig
	log      *slog.Logger
	requeued prometheus.Counter
	last     prometheus.Gauge
}

// NewLostWorkRescuer checks cfg (with its defaults) and returns a
// LostWorkRescuer.
func NewLostWorkRescuer(cfg LostWorkRescuerConfig) (*LostWorkRescuer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	r := &LostWorkRescuer{cfg: cfg, log: cfg.Logger,
		requeued: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_lost_requeued_total",
			Help: "Running executions silent for longer than LostAfter, re-queued by the backstop for lost work.",
		}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("lost_work"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register lost-work metrics: %w", err)
	}
	return r, nil
}

// RunOnce re-queues the owned buckets' running executions silent since
// LostAfter before now, and frees the concurrency slots their cancelled
// executions keep for attempts as silent.
func (r *LostWorkRescuer) RunOnce(ctx context.Context) error {
	buckets := r.cfg.Buckets()
	if len(buckets) == 0 {
		r.last.SetToCurrentTime()
		return nil
	}
	before := r.cfg.Now().Add(-r.cfg.LostAfter)
	n, err := r.cfg.Store.RequeueLostExecutions(ctx, buckets, before)
	if err != nil {
		return err
	}
	if n > 0 {
		r.requeued.Add(float64(n))
		r.log.Warn("re-queued running executions that gave no sign of life", "count", n, "lost_after", r.cfg.LostAfter)
	}
	// The concurrency slots that cancelled executions keep until their
	// executors say the attempt stopped: a silent one never will.
	freed, err := r.cfg.Store.ReleaseSilentSlots(ctx, buckets, before)
	if err != nil {
		return err
	}
	if freed > 0 {
		r.log.Warn("freed the concurrency slots of cancelled executions whose attempts gave no sign of life",
			"count", freed, "lost_after", r.cfg.LostAfter)
	}
	r.last.SetToCurrentTime()
	return nil
}

// Run checks every Interval until ctx ends.
func (r *LostWorkRescuer) Run(ctx context.Context) error {
	return every(ctx, r.cfg.Interval, r.log, "re-queue lost executions", r.RunOnce)
}
