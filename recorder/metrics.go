package recorder

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// metrics are a Recorder's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Recorders sharing a registerer share the metrics (a second
// registration takes the collector already there).
type metrics struct {
	deadLetters prometheus.Counter
	retries     prometheus.Counter
	deferrals   prometheus.Counter
	startLag    prometheus.Histogram
	deadEvents  *prometheus.CounterVec
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
		startLag: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tock_start_lag_seconds",
			Help: "Scheduled time to the start of an execution's first attempt, as the executor reported it, observed when the start is recorded.",
			// As tock_fire_lag_seconds', with the executors' queueing on top.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}), &err),
		deadEvents: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_dead_events_total",
			Help: "Events the recorder could not place, kept as dead events (GET /v1/dead-events): reason=unknown_execution (no such execution after the grace), invalid, undecodable.",
		}, []string{"reason"}), &err),
	}, err
}

// count counts a recorded event in the metrics.
func (m *metrics) count(ev model.AttemptEvent) {
	if ev.Attempt == 1 {
		// The first attempt's start: its started event, or the end that
		// carries it (a quick attempt reports both at once). A deferral
		// is no attempt: the first to start may be a later dispatch's.
		switch {
		case ev.Type == domain.EventStarted:
			m.startLag.Observe(max(0, ev.At.Sub(domain.ExecutionTime(ev.ID)).Seconds()))
		case ev.StartedAt != nil && ev.Type != domain.EventCancelled:
			m.startLag.Observe(max(0, ev.StartedAt.Sub(domain.ExecutionTime(ev.ID)).Seconds()))
		}
	}
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

// Backlog is how many executor events wait for the recorders: the
// messages of wire.EventStream their consumer (wire.RecorderConsumer) has
// not delivered yet, plus those delivered and not yet acknowledged
// (NumPending + NumAckPending). It is one request to JetStream, which
// every recorder shares, so every recorder node reports the same backlog
// (tockd exports it as tock_recorder_backlog when scraped). It fails
// while NATS cannot be read or before any recorder created the consumer.
func Backlog(ctx context.Context, js jetstream.JetStream) (int, error) {
	c, err := js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
	if err != nil {
		return 0, fmt.Errorf("recorder: read consumer %s: %w", wire.RecorderConsumer, err)
	}
	info := c.CachedInfo() // read by Consumer just now
	return int(info.NumPending) + info.NumAckPending, nil
}
