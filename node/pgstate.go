package node

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store"
)

// pgProbeInterval is how often a node checks that PostgreSQL answers;
// pgProbeTimeout bounds one check.
const (
	pgProbeInterval = time.Second
	pgProbeTimeout  = 2 * time.Second
)

// pgState is what a node knows of its PostgreSQL connection: whether the
// last check reached the primary (the pool connects only to a server
// that takes writes when the URL says target_session_attrs=read-write,
// so after a failover it is up again once the new primary answers).
type pgState struct {
	done    chan struct{} // closed when the check's goroutine ends
	up      atomic.Bool
	upG     prometheus.Gauge
	outages prometheus.Counter
}

// watchPostgres checks st every pgProbeInterval until ctx ends (wait
// then waits for the end), keeping tock_postgres_up and
// tock_postgres_outages_total and logging each outage and its end. A nil
// st (a node without a store) is always up.
func watchPostgres(ctx context.Context, st *store.Store, reg prometheus.Registerer, log *slog.Logger) (*pgState, error) {
	var err error
	p := &pgState{
		done: make(chan struct{}),
		upG: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "tock_postgres_up",
			Help: "1 if the last check (every second) reached the PostgreSQL primary, else 0."}), &err),
		outages: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "tock_postgres_outages_total",
			Help: "Times PostgreSQL became unreachable (a failover counts once; reconnection is automatic)."}), &err),
	}
	if err != nil {
		return nil, err
	}
	p.set(true)
	if st == nil {
		close(p.done)
		return p, nil
	}
	go func() {
		defer close(p.done)
		p.watch(ctx, st, log)
	}()
	return p, nil
}

// wait waits until the check's goroutine has ended (its ctx is done).
func (p *pgState) wait() { <-p.done }

func (p *pgState) set(up bool) {
	p.up.Store(up)
	if up {
		p.upG.Set(1)
	} else {
		p.upG.Set(0)
	}
}

func (p *pgState) watch(ctx context.Context, st *store.Store, log *slog.Logger) {
	t := time.NewTicker(pgProbeInterval)
	defer t.Stop()
	var downSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, pgProbeTimeout)
		_, err := st.Now(cctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && p.up.Load():
			downSince = time.Now()
			p.outages.Inc()
			p.set(false)
			log.Warn("postgres unreachable", "err", err)
		case err == nil && !p.up.Load():
			p.set(true)
			log.Info("postgres reachable again", "after", time.Since(downSince).Round(time.Millisecond))
		}
	}
}

// readyz answers GET /readyz on a node without the API: 503 while
// PostgreSQL is unreachable.
func (p *pgState) readyz(w http.ResponseWriter, _ *http.Request) {
	if !p.up.Load() {
		http.Error(w, "postgres unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
