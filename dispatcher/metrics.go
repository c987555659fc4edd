package dispatcher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
)

// metrics are a Dispatcher's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Dispatchers sharing a registerer share the metrics (a second
// registration takes the collector already there).
type metrics struct {
	fireLag            prometheus.Histogram
	dispatched         prometheus.Counter
	republished        prometheus.Counter
	unpublishableTotal prometheus.Counter
	dispatchErrors     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	return &metrics{
		fireLag: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tock_fire_lag_seconds",
			Help:    "Time from an execution's scheduled time to the publish ack of its first dispatch from JetStream.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}), &err),
		dispatched: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_dispatched_total",
			Help: "Execution publishes acknowledged by JetStream (every dispatch).",
		}), &err),
		republished: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_republished_total",
			Help: "Execution publishes after the first (retries, deferred deliveries, re-drives) acknowledged by JetStream.",
		}), &err),
		unpublishableTotal: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_unpublishable_total",
			Help: "Executions made dead because they can never be published (their message is larger than NATS accepts, or cannot be encoded).",
		}), &err),
		dispatchErrors: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_dispatch_errors_total",
			Help: "Execution publishes that failed or were not acknowledged in time (they are retried from the outbox).",
		}), &err),
	}, err
}
