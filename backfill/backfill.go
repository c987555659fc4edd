// Package backfill fires the past scheduled times of cron jobs that users
// asked for (POST /v1/jobs/{id}/backfill), in the buckets this node owns.
//
// A backfill lives in Postgres (model.Backfill) with its progress, so it
// survives restarts and failovers: whichever node owns the job's bucket
// works on it, one step at a time. A step fires the next scheduled times
// of the range, oldest first, in one transaction that checks the
// bucket's fencing epoch as firing does (store.StepBackfill), so a node
// that lost the bucket inserts nothing; an execution that exists already
// for a time is left alone, so every time fires at most once, however
// many backfills cover it. The executions created are handed to the
// dispatcher at once (the outbox would find them too).
//
// Backfill runs must never delay on-time runs: they are published in the
// low priority class, and each node creates at most Config.Rate of them a
// second (tockd --backfill-rate), whatever the number of backfills.
package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Store is what the runner needs from Postgres; *store.Store is one.
type Store interface {
	ListRunningBackfills(ctx context.Context, buckets []int) ([]model.BackfillWork, error)
	StepBackfill(ctx context.Context, node string, epoch int64, step model.BackfillStep) (model.BackfillResult, error)
}

// Dispatcher publishes executions; dispatcher.Dispatcher is one.
type Dispatcher interface {
	Dispatch(ctx context.Context, execs []*model.Execution)
}

// DefaultRate is the default Config.Rate: backfill runs created per
// second per node. It is a small share of what a node fires on time (a
// few thousand a second), so backfills never crowd out on-time runs nor
// flood the executors, and a day of an every-minute job (1,440 runs)
// still goes out in about 7 s.
const DefaultRate = 200

// Config configures a Runner. Store, Dispatcher, NodeID and Owned are
// required.
type Config struct {
	Store      Store
	Dispatcher Dispatcher
	NodeID     string
	// Owned returns the buckets this node owns, with the epochs it
	// claimed them at; partition.Node.Owned is the one to use.
	Owned func() map[int]int64
	// LeaseValid, if set, is asked before every tick; when it says no,
	// nothing is fired. partition.Node.Valid is the one to use.
	LeaseValid func() bool
	// Rate is the most backfill executions this node creates per second,
	// across all its backfills; default DefaultRate.
	Rate float64
	// Tick is how often the runner steps its backfills; each tick fires
	// up to Rate × Tick runs (a little more after a pause: up to two
	// ticks' worth). Default 100ms.
	Tick time.Duration
	// Refresh is how often the running backfills of the owned buckets
	// are looked for while there are none (while there are, every tick);
	// so a new backfill starts within it. Default 1s.
	Refresh time.Duration
	// MaxChunk caps the scheduled times of one step (one transaction);
	// default 1000.
	MaxChunk int
	// Logger is where it logs; tockd's carries the node id (node=...).
	Logger *slog.Logger
	// Registerer is where the runner's Prometheus metrics
	// (tock_backfill_fired_total) are registered; nil registers them
	// nowhere. tockd passes the node's registry.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults.
func (c Config) WithDefaults() Config {
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Tick <= 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.Refresh <= 0 {
		c.Refresh = time.Second
	}
	if c.MaxChunk <= 0 {
		c.MaxChunk = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate rejects a configuration (with its defaults) that cannot work.
func (c *Config) validate() error {
	if c.Store == nil || c.Dispatcher == nil || c.NodeID == "" || c.Owned == nil {
		return errors.New("backfill: Config.Store, Dispatcher, NodeID and Owned are required")
	}
	if c.Refresh < c.Tick {
		return fmt.Errorf("backfill: Refresh %s must not be below Tick %s", c.Refresh, c.Tick)
	}
	return nil
}

// Runner works on the running backfills of the buckets this node owns.
// Create it with New and run it with Run.
type Runner struct {
	cfg      Config
	log      *slog.Logger
	m        *metrics
	compiled schedule.Cache

	// Owned by Run's goroutine: the runs that may be created now (a
	// token bucket filled at Rate, holding at most burst).
	tokens, burst float64
}

// maxStepsPerTick bounds the transactions of one tick: a step that
// finds its times fired already creates nothing and spends nothing of
// the rate, so without it a tick over a range already fired would go on
// to its end.
const maxStepsPerTick = 20

// New checks cfg (with its defaults) and returns a Runner that does
// nothing until Run.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("backfill: register metrics: %w", err)
	}
	return &Runner{cfg: cfg, log: cfg.Logger, m: m,
		burst: max(1, 2*cfg.Rate*cfg.Tick.Seconds())}, nil
}

// Run works on backfills until ctx ends. A step in flight then finishes
// or is rolled back; what is left, the bucket's owner does later.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Tick)
	defer t.Stop()
	last := time.Now()
	var read time.Time
	busy := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			r.tokens = min(r.burst, r.tokens+r.cfg.Rate*now.Sub(last).Seconds())
			last = now
			if !busy && now.Sub(read) < r.cfg.Refresh {
				continue
			}
			read = now
			busy = r.tick(ctx)
		}
	}
}

// tick steps the running backfills of the owned buckets, oldest first,
// while the rate allows, and reports whether there were any.
func (r *Runner) tick(ctx context.Context) bool {
	if r.cfg.LeaseValid != nil && !r.cfg.LeaseValid() {
		return false
	}
	owned := r.cfg.Owned()
	if len(owned) == 0 {
		return false
	}
	work, err := r.cfg.Store.ListRunningBackfills(ctx, slices.Sorted(maps.Keys(owned)))
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("read running backfills", "err", err)
		}
		return false
	}
	steps := 0
	for i := range work {
		w := &work[i]
		epoch, ok := owned[w.Bucket]
		if !ok {
			continue
		}
		for r.tokens >= 1 && steps < maxStepsPerTick {
			steps++
			if !r.advance(ctx, w, epoch) {
				break
			}
		}
	}
	return len(work) > 0
}

// advance takes one step of w and reports whether w may take another
// now: it is still running and moved.
func (r *Runner) advance(ctx context.Context, w *model.BackfillWork, epoch int64) bool {
	step := r.plan(w, min(int(r.tokens), r.cfg.MaxChunk))
	res, err := r.cfg.Store.StepBackfill(ctx, r.cfg.NodeID, epoch, step)
	if err != nil {
		if !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
			r.log.Warn("backfill step", "backfill_id", w.ID, "job_id", w.JobID, "bucket", w.Bucket, "err", err)
		}
		return false
	}
	if n := len(res.Executions); n > 0 {
		r.tokens -= float64(n)
		r.m.firedTotal.Add(float64(n))
		r.cfg.Dispatcher.Dispatch(ctx, res.Executions)
	}
	b := res.Backfill
	if b.State != model.BackfillRunning {
		r.log.Info("backfill ended", "backfill_id", b.ID, "job_id", b.JobID, "state", b.State,
			"fired", b.Fired, "total", b.Total, "error", b.Error)
		return false
	}
	moved := !b.NextAt.Equal(w.NextAt)
	w.Backfill = *b
	return moved
}

// plan is w's next step: up to n of its scheduled times from its
// progress on, or its failure when its job is gone or no longer recurs.
func (r *Runner) plan(w *model.BackfillWork, n int) model.BackfillStep {
	step := model.BackfillStep{ID: w.ID, Bucket: w.Bucket, From: w.NextAt}
	if w.Schedule == nil {
		step.Fail = "the job was deleted"
		return step
	}
	sched, err := r.compiled.Compile(*w.Schedule)
	switch {
	case err != nil:
		step.Fail = "the job's schedule does not compile: " + err.Error()
		return step
	case !sched.Recurring():
		step.Fail = "the job's schedule no longer recurs (it was changed to a one-shot schedule)"
		return step
	}
	times, more := sched.Between(w.NextAt, w.To, n)
	step.Times, step.Next, step.Done = times, w.To, !more
	if more && len(times) > 0 {
		// Before To, since more runs of the range follow.
		step.Next, _ = sched.Next(times[len(times)-1])
	}
	return step
}
