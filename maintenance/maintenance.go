// Package maintenance is tock's background work: the services that keep
// the cluster's data in shape while the scheduler fires and the recorder
// records. One file per service, in the manner of River's maintenance
// services:
//
//   - LostWorkRescuer re-queues running executions silent for minutes
//     (work NATS itself lost), in the buckets this node fires in;
//   - WipeRecovery re-queues what JetStream lost with its exec stream, in
//     the buckets this node owns;
//   - PartitionsAhead creates the daily partitions of the days ahead;
//   - IdempotencyPruner deletes expired idempotency keys;
//   - AuditPruner keeps the audit trail's day partitions: those ahead
//     created, those past its retention dropped;
//   - Retention drops the days of execution history past retention (and
//     completed one-shot jobs), each after the Archiver has written it out
//     when one is set.
//
// Each service has a Config with WithDefaults and a validate that New
// calls, a RunOnce that does one pass (tests call it directly), and its
// metrics registered on the Config's Registerer (nil: kept, registered
// nowhere).
//
// The first two are per node: each node works its own buckets, and each
// has a Run that repeats RunOnce until its context ends. The others are
// cluster-wide and need only one node at a time, so they have no Run of
// their own: they run in a Pass, one after another under the cluster's
// maintenance lock (a Postgres advisory lock), and a node that finds
// another node's pass under way skips its own.
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

// DefaultInterval is how often a cluster-wide service (and a Pass) runs:
// a pass that finds nothing to do reads a few catalog rows.
const DefaultInterval = 5 * time.Minute

// Locker runs fn under the cluster's maintenance lock; *store.Store is one
// (store.Store.Maintenance). With wait false, it returns ran false at once
// when another holder has the lock.
type Locker interface {
	Maintenance(ctx context.Context, wait bool, fn func(context.Context) error) (ran bool, err error)
}

// Service is one pass of a maintenance service: what a Pass runs.
type Service interface {
	RunOnce(ctx context.Context) error
}

// PassConfig configures a Pass. Lock is required.
type PassConfig struct {
	// Lock is the cluster's maintenance lock; *store.Store is one.
	Lock Locker
	// Services run in this order in each pass; a failure ends the pass
	// (the next one starts from the first again).
	Services []Service
	// Interval is how often Run runs a pass; default DefaultInterval.
	Interval time.Duration
	// Wait makes a pass wait for another node's to end, rather than skip
	// (tockd maintain --once, which must do its pass).
	Wait   bool
	Logger *slog.Logger
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults.
func (c PassConfig) WithDefaults() PassConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *PassConfig) validate() error {
	if c.Lock == nil {
		return errors.New("maintenance: PassConfig.Lock is required")
	}
	for i, s := range c.Services {
		if s == nil {
			return fmt.Errorf("maintenance: PassConfig.Services[%d] is nil", i)
		}
	}
	return nil
}

// Pass runs the cluster-wide services one after another under the
// cluster's maintenance lock, so that only one node at a time drops and
// creates partitions.
type Pass struct {
	cfg PassConfig
	log *slog.Logger
}

// NewPass checks cfg (with its defaults) and returns a Pass.
func NewPass(cfg PassConfig) (*Pass, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Pass{cfg: cfg, log: cfg.Logger}, nil
}

// RunOnce runs each service's RunOnce in order under the maintenance
// lock, and returns the first error. Without Wait, a node that finds
// another one running a pass skips its own (and returns nil).
func (p *Pass) RunOnce(ctx context.Context) error {
	ran, err := p.cfg.Lock.Maintenance(ctx, p.cfg.Wait, func(ctx context.Context) error {
		for _, s := range p.cfg.Services {
			if err := s.RunOnce(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if !ran && err == nil {
		p.log.Debug("maintenance: another node is running a pass")
	}
	return err
}

// Run runs a pass now and every Interval until ctx ends; a pass that
// fails is logged, and the next one tries again.
func (p *Pass) Run(ctx context.Context) error {
	return every(ctx, p.cfg.Interval, p.log, "maintenance", p.RunOnce)
}

// every runs once now and every interval until ctx ends, logging its
// errors as what (unless ctx ended); it returns nil then.
func every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, once func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := once(ctx); err != nil && ctx.Err() == nil {
			log.Warn(what, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lastSuccess is tock_maintenance_last_success_timestamp_seconds, which
// every service registers and sets under its own label: an operator
// alerts on a service that has not succeeded for too long.
func lastSuccess(reg prometheus.Registerer, errp *error) *prometheus.GaugeVec {
	return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tock_maintenance_last_success_timestamp_seconds",
		Help: "When each maintenance service (lost_work, wipe_recovery, partitions_ahead, idempotency, audit, retention) last finished a pass without error, as a Unix time.",
	}, []string{"service"}), errp)
}
