package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultDaysAhead is how many days ahead PartitionsAhead and AuditPruner
// create day partitions.
const DefaultDaysAhead = 7

// PartitionsStore is what PartitionsAhead needs from Postgres;
// *store.Store is one.
type PartitionsStore interface {
	Now(ctx context.Context) (time.Time, error)
	MaintainHistoryPartitions(ctx context.Context, now time.Time, daysAhead int) error
}

// PartitionsAheadConfig configures a PartitionsAhead. Store is required.
type PartitionsAheadConfig struct {
	Store PartitionsStore
	// DaysAhead is how many days after today get their partitions;
	// default DefaultDaysAhead.
	DaysAhead int
	Logger    *slog.Logger
	// Registerer is where tock_maintenance_last_success_timestamp_seconds
	// is registered; nil registers it nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults.
func (c PartitionsAheadConfig) WithDefaults() PartitionsAheadConfig {
	if c.DaysAhead <= 0 {
		c.DaysAhead = DefaultDaysAhead
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *PartitionsAheadConfig) validate() error {
	if c.Store == nil {
		return errors.New("maintenance: PartitionsAheadConfig.Store is required")
	}
	return nil
}

// PartitionsAhead creates the daily partitions of executions and attempts
// from yesterday through DaysAhead days after today
// (store.MaintainHistoryPartitions), so that they exist well before rows arrive.
type PartitionsAhead struct {
	cfg  PartitionsAheadConfig
	last prometheus.Gauge
}

// NewPartitionsAhead checks cfg (with its defaults) and returns a
// PartitionsAhead.
func NewPartitionsAhead(cfg PartitionsAheadConfig) (*PartitionsAhead, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	p := &PartitionsAhead{cfg: cfg, last: lastSuccess(cfg.Registerer, &err).WithLabelValues("partitions_ahead")}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register partitions-ahead metrics: %w", err)
	}
	return p, nil
}

// RunOnce creates the partitions that are missing, by the database's
// clock.
func (p *PartitionsAhead) RunOnce(ctx context.Context) error {
	now, err := p.cfg.Store.Now(ctx)
	if err != nil {
		return err
	}
	if err := p.cfg.Store.MaintainHistoryPartitions(ctx, now, p.cfg.DaysAhead); err != nil {
		return err
	}
	p.last.SetToCurrentTime()
	return nil
}
