package recorder

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
)

// metrics are a Recorder's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Recorders sharing a registerer share the metrics (a second
// registration takes the collector already there).
type metrics struct {
	deadLetters prometheus.Counter
	retries     prometheus.Counter
	deferrals   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	return &metrics{
		deadLetters: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_dead_letters_total",
			Help: "Final failures recorded: executions that died after their last attempt or a permanent failure.",
		}), &err),
		retries: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_retries_total",
			Help: "Failures recorded that a retry follows (re-published from Postgres after its backoff).",
		}), &err),
		deferrals: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_deferred_total",
			Help: "Deliveries executors handed back unrun (circuit breaker open, concurrency limit), recorded.",
		}), &err),
	}, err
}

// count counts a recorded event in the metrics.
func (m *metrics) count(ev model.AttemptEvent) {
	switch {
	case ev.Type == domain.EventDeferred:
		m.deferrals.Inc()
	case ev.Type != domain.EventFailed:
	case ev.Final:
		m.deadLetters.Inc()
	default:
		m.retries.Inc()
	}
}
