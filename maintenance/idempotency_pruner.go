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

// IdempotencyStore is what IdempotencyPruner needs from Postgres;
// *store.Store is one.
type IdempotencyStore interface {
	Now(ctx context.Context) (time.Time, error)
	ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int64, error)
}

// IdempotencyPrunerConfig configures an IdempotencyPruner. Store is
// required.
type IdempotencyPrunerConfig struct {
	Store  IdempotencyStore
	Logger *slog.Logger
	// Registerer is where tock_idempotency_keys_expired_total and
	// tock_maintenance_last_success_timestamp_seconds are registered; nil
	// registers them nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults.
func (c IdempotencyPrunerConfig) WithDefaults() IdempotencyPrunerConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *IdempotencyPrunerConfig) validate() error {
	if c.Store == nil {
		return errors.New("maintenance: IdempotencyPrunerConfig.Store is required")
	}
	return nil
}

// IdempotencyPruner deletes the Idempotency-Keys of API writes, and their
// stored responses, once they are older than store.IdempotencyTTL.
type IdempotencyPruner struct {
	cfg     IdempotencyPrunerConfig
	expired prometheus.Counter
	last    prometheus.Gauge
}

// NewIdempotencyPruner checks cfg (with its defaults) and returns an
// IdempotencyPruner.
func NewIdempotencyPruner(cfg IdempotencyPrunerConfig) (*IdempotencyPruner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	p := &IdempotencyPruner{cfg: cfg,
		expired: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_idempotency_keys_expired_total",
			Help: "Idempotency keys of API writes deleted once past their time to live.",
		}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("idempotency"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register idempotency metrics: %w", err)
	}
	return p, nil
}

// RunOnce deletes the expired keys, by the database's clock.
func (p *IdempotencyPruner) RunOnce(ctx context.Context) error {
	now, err := p.cfg.Store.Now(ctx)
	if err != nil {
		return err
	}
	n, err := p.cfg.Store.ExpireIdempotencyKeys(ctx, now)
	if err != nil {
		return err
	}
	p.expired.Add(float64(n))
	p.last.SetToCurrentTime()
	return nil
}
