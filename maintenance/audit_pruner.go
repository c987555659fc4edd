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

// AuditStore is what AuditPruner needs from Postgres; *store.Store is
// one.
type AuditStore interface {
	Now(ctx context.Context) (time.Time, error)
	MaintainAuditPartitions(ctx context.Context, now time.Time, daysAhead int, retention time.Duration) (int, error)
}

// AuditPrunerConfig configures an AuditPruner. Store is required.
type AuditPrunerConfig struct {
	Store AuditStore
	// Retention is how long the audit trail is kept; 0 keeps it for ever
	// (the partitions ahead are still made). It must not be negative.
	Retention time.Duration
	// DaysAhead is how many days after today get their partitions;
	// default DefaultDaysAhead.
	DaysAhead int
	Logger    *slog.Logger
	// Registerer is where tock_audit_days_dropped_total and
	// tock_maintenance_last_success_timestamp_seconds are registered; nil
	// registers them nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero (or negative, for
// DaysAhead) set to their defaults.
func (c AuditPrunerConfig) WithDefaults() AuditPrunerConfig {
	if c.DaysAhead <= 0 {
		c.DaysAhead = DefaultDaysAhead
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *AuditPrunerConfig) validate() error {
	if c.Store == nil {
		return errors.New("maintenance: AuditPrunerConfig.Store is required")
	}
	if c.Retention < 0 {
		return fmt.Errorf("maintenance: audit Retention %s must not be negative", c.Retention)
	}
	return nil
}

// AuditPruner keeps the audit trail's day partitions (store.MaintainAuditPartitions):
// it makes those of yesterday through DaysAhead days after today, and
// drops the days past Retention.
type AuditPruner struct {
	cfg     AuditPrunerConfig
	log     *slog.Logger
	dropped prometheus.Counter
	last    prometheus.Gauge
}

// NewAuditPruner checks cfg (with its defaults) and returns an
// AuditPruner.
func NewAuditPruner(cfg AuditPrunerConfig) (*AuditPruner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	p := &AuditPruner{cfg: cfg, log: cfg.Logger,
		dropped: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_audit_days_dropped_total",
			Help: "Days of the audit trail dropped once past its retention.",
		}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("audit"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register audit metrics: %w", err)
	}
	return p, nil
}

// RunOnce makes the missing partitions and drops the expired days, by
// the database's clock, and logs what it dropped.
func (p *AuditPruner) RunOnce(ctx context.Context) error {
	now, err := p.cfg.Store.Now(ctx)
	if err != nil {
		return err
	}
	n, err := p.cfg.Store.MaintainAuditPartitions(ctx, now, p.cfg.DaysAhead, p.cfg.Retention)
	if err != nil {
		return err
	}
	if n > 0 {
		p.dropped.Add(float64(n))
		p.log.Info("audit retention", "days_dropped", n)
	}
	p.last.SetToCurrentTime()
	return nil
}
