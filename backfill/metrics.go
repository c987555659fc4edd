package backfill

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
)

// metrics are a Runner's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Runners sharing a registerer share the metrics (a second registration
// takes the collector already there).
type metrics struct {
	firedTotal prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	return &metrics{
		firedTotal: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_backfill_fired_total",
			Help: "Executions created by backfills on this node.",
		}), &err),
	}, err
}
