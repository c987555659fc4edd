package executor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/wire"
)

// metrics are a Worker's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Workers sharing a registerer share the metrics (a second registration
// takes the collector already there), as tockd's several roles and
// tockbench's in-process executors do.
type metrics struct {
	attemptsTotal    *prometheus.CounterVec
	deferredTotal    *prometheus.CounterVec
	retriesTotal     *prometheus.CounterVec
	deadLettersTotal *prometheus.CounterVec
	attemptSeconds   *prometheus.HistogramVec
	attemptsRunning  *prometheus.GaugeVec
	queueDepth       *prometheus.GaugeVec
	breakerState     *prometheus.GaugeVec
	journalResent    prometheus.Counter
	journalAnswered  *prometheus.CounterVec
	batchMembers     *prometheus.HistogramVec
	logDroppedBytes  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		attemptsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_attempts_total",
			Help: "Deliveries this executor finished, by queue and outcome: succeeded, retry (failed, tock sends it again), " +
				"dead (failed, no attempt follows), timed_out (cut at the job's timeout, retried or dead), " +
				"cancelled (cancelled before or while running), interrupted (by executor shutdown), " +
				"unreported (the result could not be published; the execution runs again).",
		}, []string{"queue", "outcome"}),
		deferredTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_deferred_total",
			Help: "Deliveries handed back to tock unrun, by queue and reason: breaker (the handler's circuit breaker is open), " +
				"limit (the handler is at its concurrency limit), shutdown (a batch message's member not started when the executor stopped) " +
				"or redelivered (a member of a batch message delivered again).",
		}, []string{"queue", "reason"}),
		retriesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_retries_total",
			Help: "Failed attempts (errors and timeouts, not shutdown interruptions) handed back to tock for a later attempt, by queue.",
		}, []string{"queue"}),
		deadLettersTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_dead_letters_total",
			Help: "Executions whose final attempt failed in this executor (permanent failure or retries exhausted), by queue.",
		}, []string{"queue"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tock_executor_attempt_duration_seconds",
			Help:    "Time a handler took for one attempt, by queue.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms .. ~22min
		}, []string{"queue"}),
		attemptsRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tock_executor_attempts_running",
			Help: "Attempts running in this executor, by queue.",
		}, []string{"queue"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tock_queue_depth",
			Help: "Executions waiting in JetStream for an executor (the consumer's pending count), by queue and priority; " +
				"polled by every executor serving the queue.",
		}, []string{"queue", "priority"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tock_breaker_state",
			Help: "Circuit breaker state of a handler key in this executor: 0 closed, 1 half-open, 2 open.",
		}, []string{"handler"}),
		journalResent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_executor_events_resent_total",
			Help: "Events of recent attempts sent again because the event stream was new (JetStream lost the old one).",
		}),
		journalAnswered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_redeliveries_answered_total",
			Help: "Deliveries of an attempt this executor had run or was running already, answered without running it again.",
		}, []string{"queue"}),
		batchMembers: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tock_executor_batch_members",
			Help:    "Executions per batch message this executor received (first deliveries), by queue.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}, []string{"queue"}),
		logDroppedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_executor_log_dropped_bytes_total",
			Help: "Bytes handlers wrote to their execution logs that were not sent, by reason: cap (cut by the job's cap policy), " +
				"buffer (the attempt had its most in flight: NATS was slow), publish (a message could not be published), " +
				"late (written after the attempt ended). Each but late is a marked gap in the log.",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.attemptsTotal = promreg.Register(reg, m.attemptsTotal, &err)
	m.deferredTotal = promreg.Register(reg, m.deferredTotal, &err)
	m.retriesTotal = promreg.Register(reg, m.retriesTotal, &err)
	m.deadLettersTotal = promreg.Register(reg, m.deadLettersTotal, &err)
	m.attemptSeconds = promreg.Register(reg, m.attemptSeconds, &err)
	m.attemptsRunning = promreg.Register(reg, m.attemptsRunning, &err)
	m.queueDepth = promreg.Register(reg, m.queueDepth, &err)
	m.breakerState = promreg.Register(reg, m.breakerState, &err)
	m.journalResent = promreg.Register(reg, m.journalResent, &err)
	m.journalAnswered = promreg.Register(reg, m.journalAnswered, &err)
	m.batchMembers = promreg.Register(reg, m.batchMembers, &err)
	m.logDroppedBytes = promreg.Register(reg, m.logDroppedBytes, &err)
	return m, err
}

// outcomeLabel is the outcome label of tock_executor_attempts_total for a
// delivery whose last event, ev, was published; interrupted says that ev
// is a failure by executor shutdown, which the event does not tell from a
// retry. A delivery whose last event could not be published is
// outcomeUnreported.
func outcomeLabel(ev wire.Event, interrupted bool) string {
	switch {
	case ev.Type == domain.EventCancelled:
		return "cancelled"
	case ev.Type == domain.EventSucceeded:
		return "succeeded"
	case interrupted:
		return "interrupted"
	case ev.TimedOut:
		return "timed_out"
	case ev.Final:
		return "dead"
	default:
		return "retry"
	}
}

const outcomeUnreported = "unreported"
