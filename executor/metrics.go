package executor

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics, on the default Prometheus registry.
var (
	attemptsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_executor_attempts_total",
		Help: "Deliveries this executor finished, by queue and outcome: succeeded, retry (failed, tock sends it again), " +
			"dead (failed, no attempt follows), timed_out (cut at the job's timeout, retried or dead), " +
			"cancelled (cancelled before or while running), interrupted (by executor shutdown), " +
			"unreported (the result could not be published; the execution runs again).",
	}, []string{"queue", "outcome"})
	deferredTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_executor_deferred_total",
		Help: "Deliveries handed back to tock unrun, by queue and reason: breaker (the handler's circuit breaker is open) " +
			"or limit (the handler is at its concurrency limit).",
	}, []string{"queue", "reason"})
	retriesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_executor_retries_total",
		Help: "Failed attempts (errors and timeouts, not shutdown interruptions) handed back to tock for a later attempt, by queue.",
	}, []string{"queue"})
	deadLettersTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_executor_dead_letters_total",
		Help: "Executions whose final attempt failed in this executor (permanent failure or retries exhausted), by queue.",
	}, []string{"queue"})
	attemptSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tock_executor_attempt_duration_seconds",
		Help:    "Time a handler took for one attempt, by queue.",
		Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms .. ~22min
	}, []string{"queue"})
	attemptsRunning = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tock_executor_attempts_running",
		Help: "Attempts running in this executor, by queue.",
	}, []string{"queue"})
	queueDepth = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tock_queue_depth",
		Help: "Executions waiting in JetStream for an executor (the consumer's pending count), by queue and priority; " +
			"polled by every executor serving the queue.",
	}, []string{"queue", "priority"})
	breakerState = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tock_breaker_state",
		Help: "Circuit breaker state of a handler key in this executor: 0 closed, 1 half-open, 2 open.",
	}, []string{"handler"})
)
