package partition

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
)

// metrics are a Node's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Nodes sharing a registerer share the metrics (a second registration
// takes the collector already there).
type metrics struct {
	rebalances prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	return &metrics{
		rebalances: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_rebalances_total",
			Help: "Buckets this node acquired or gave up (each counts once).",
		}), &err),
	}, err
}
