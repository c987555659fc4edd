package depends

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
)

// Store is what the resolver needs from Postgres; *store.Store is one.
type Store interface {
	ListWaitingExecutions(ctx context.Context, buckets []int, limit int) ([]model.Waiting, error)
	ListUpstreamRuns(ctx context.Context, qs []model.UpstreamQuery) ([]model.UpstreamRun, error)
	ApplyWaitDecisions(ctx context.Context, ds []model.WaitDecision) (model.WaitResult, error)
}

// Config configures a Resolver. Store, Owned and Now are required.
type Config struct {
	Store Store
	// Owned lists the buckets this node fires in (scanner.Scanner.Owned):
	// the resolver decides their waiting executions.
	Owned func() []int
	// Now is the database's clock (wait timeouts are judged by it).
	Now func() time.Time
	// Interval is how often the waiting executions are looked at;
	// default 250ms. A pass with none waiting is one index probe.
	Interval time.Duration
	// Batch caps the executions one pass decides, oldest first; default
	// 5000 (the rest in the next pass, at once).
	Batch      int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Resolver decides the waits of a node's buckets: see the package doc.
type Resolver struct {
	cfg      Config
	log      *slog.Logger
	released prometheus.Counter
	skipped  *prometheus.CounterVec
	waiting  prometheus.Gauge
}

// New makes a Resolver.
func New(cfg Config) (*Resolver, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	var err error
	r := &Resolver{cfg: cfg, log: log.With("component", "depends"),
		released: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_dependency_released_total",
			Help: "Executions that waited for their upstreams and were let run.",
		}), &err),
		skipped: promreg.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_dependency_skipped_total",
			Help: "Scheduled times of dependent jobs skipped, by reason: dependency (an upstream ended otherwise or skipped its run), dependency_timeout.",
		}, []string{"reason"}), &err),
		waiting: promreg.Register(cfg.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tock_dependency_waiting",
			Help: "Executions of this node's buckets waiting for their upstreams, as its resolver last counted them (at most its batch).",
		}), &err),
	}
	return r, err
}

// Run decides waits every Interval until ctx ends; a pass that filled
// its batch is followed by another at once.
func (r *Resolver) Run(ctx context.Context) error {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := r.Pass(ctx, r.cfg.Owned())
		if err != nil && ctx.Err() == nil {
			r.log.Warn("decide waiting executions", "err", err)
		}
		if n >= r.cfg.Batch {
			t.Reset(0)
		} else {
			t.Reset(r.cfg.Interval)
		}
	}
}

// Pass decides the waiting executions of buckets once and returns how
// many it looked at.
func (r *Resolver) Pass(ctx context.Context, buckets []int) (int, error) {
	ws, err := r.cfg.Store.ListWaitingExecutions(ctx, buckets, r.cfg.Batch)
	if err != nil || len(ws) == 0 {
		r.waiting.Set(0)
		return 0, err
	}
	r.waiting.Set(float64(len(ws)))
	runs, err := r.cfg.Store.ListUpstreamRuns(ctx, Queries(ws))
	if err != nil {
		return len(ws), err
	}
	now := r.cfg.Now()
	var ds []model.WaitDecision
	for _, w := range ws {
		n := len(w.Depends.On)
		d, ok := Decide(w, Judge(w, runs[:n]), now)
		runs = runs[n:]
		if ok {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return len(ws), nil
	}
	res, err := r.cfg.Store.ApplyWaitDecisions(ctx, ds)
	if err != nil {
		return len(ws), err
	}
	r.released.Add(float64(res.Released))
	for _, d := range ds {
		if !d.Release {
			r.skipped.WithLabelValues(d.Reason).Inc()
		}
	}
	for _, d := range res.TimedOut {
		r.log.Info("wait for upstreams timed out", "execution_id", d.Waiting.ID, "job", d.Waiting.JobName,
			"ran", d.Release, "detail", d.Detail)
	}
	return len(ws), nil
}

// Explain says what each of w's upstreams is doing for it now, for the
// API: the store's answer for its upstreams, judged.
func Explain(ctx context.Context, s Store, w model.Waiting) ([]Edge, error) {
	runs, err := s.ListUpstreamRuns(ctx, Queries([]model.Waiting{w}))
	if err != nil {
		return nil, err
	}
	return Judge(w, runs), nil
}
