// Package history keeps the rolled-up history of executions that the
// statistics series (GET /v1/stats/series, the dashboard's charts) read:
// a Roller that, every few seconds, rolls the minutes whose executions
// have settled up into per-minute and per-hour rows of counts and lag
// histograms (store.MaintainHistoryRollups), and drops rows past their
// retention. The hot path pays nothing for it: the rollup reads the
// executions afterwards, by primary key range.
//
// It runs on every scheduler node; the store's history lock lets one
// node at a time do a pass, and a pass recomputes whole minutes with an
// upsert, so passes that overlap or repeat count nothing twice.
package history

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tock-sched/tock/store"
)

// Store is what a Roller needs of the store; *store.Store is one.
type Store interface {
	Now(ctx context.Context) (time.Time, error)
	MaintainHistoryRollups(ctx context.Context, o store.HistoryRollup) (store.HistoryRollupResult, error)
}

// Config configures a Roller. Store is required.
type Config struct {
	Store Store
	// Interval is how often a pass runs; default 10s.
	Interval time.Duration
	// Settle is how long after its end a minute is first rolled up
	// (until then the series compute it live); default 1m.
	Settle time.Duration
	// Trailing is how far before the rollup's mark each pass rolls up
	// again; default 5m.
	Trailing time.Duration
	// Open is how far back minutes with executions not yet ended are
	// rolled up again each pass; default 7 days (a retry backoff or a
	// wait for upstreams longer than that is counted as it stood).
	Open time.Duration
	// Backfill is how far back a rollup that never ran starts; default
	// 90 days (tockd passes its --retention).
	Backfill time.Duration
	// MaxRange bounds the new minutes one pass rolls up, so that a
	// catch-up goes in bounded transactions; default a day.
	MaxRange time.Duration
	// MinuteRetention is how long per-minute rows are kept (default 35
	// days); HourRetention per-hour rows (default 400 days; tockd
	// --history-retention); minutes are kept no longer than hours. Both
	// outlive the executions' retention (90 days) by default.
	MinuteRetention, HourRetention time.Duration
	Logger                         *slog.Logger
}

// WithDefaults is c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, 10*time.Second)
	def(&c.Settle, time.Minute)
	def(&c.Trailing, 5*time.Minute)
	def(&c.Open, 7*24*time.Hour)
	def(&c.Backfill, 90*24*time.Hour)
	def(&c.MaxRange, 24*time.Hour)
	def(&c.MinuteRetention, 35*24*time.Hour)
	def(&c.HourRetention, 400*24*time.Hour)
	// The hours are summed from the minutes: keeping minutes longer
	// than hours would keep what nothing reads.
	c.MinuteRetention = min(c.MinuteRetention, c.HourRetention)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("history: Config.Store is required")
	}
	return nil
}

// Roller rolls the history up (see the package comment).
type Roller struct {
	cfg Config
}

// New checks cfg (with its defaults) and returns a Roller.
func New(cfg Config) (*Roller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Roller{cfg: cfg}, nil
}

// RunOnce does one pass, as of the database's clock. It returns what
// the pass did (Ran false when another node's pass held the lock).
func (r *Roller) RunOnce(ctx context.Context) (store.HistoryRollupResult, error) {
	now, err := r.cfg.Store.Now(ctx)
	if err != nil {
		return store.HistoryRollupResult{}, err
	}
	c := r.cfg
	return c.Store.MaintainHistoryRollups(ctx, store.HistoryRollup{Now: now, Settle: c.Settle, Trailing: c.Trailing,
		Open: c.Open, Start: now.Add(-c.Backfill), MaxRange: c.MaxRange,
		MinuteRetention: c.MinuteRetention, HourRetention: c.HourRetention})
}

// Run runs a pass now and every Interval until ctx ends (then it returns
// nil); a failed pass is logged and the next one tries again. A pass
// that has more to catch up is followed at once by the next.
func (r *Roller) Run(ctx context.Context) error {
	for {
		res, err := r.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.cfg.Interval
		switch {
		case err != nil:
			r.cfg.Logger.Warn("history: rollup failed", "err", err)
		case res.Ran && res.Minutes > 0:
			r.cfg.Logger.Debug("history: rolled up", "minutes", res.Minutes, "rows", res.Rows,
				"rolled_through", res.RolledThrough, "deleted", res.Deleted)
			if res.Minutes >= int(r.cfg.MaxRange/time.Minute) {
				wait = 0
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}
