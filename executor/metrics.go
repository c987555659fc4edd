package executor

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics, on the default Prometheus registry.
var (
	attemptsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_executor_attempts_total",
		Help: "Attempts finished by this executor, by queue and outcome (succeeded, retry, dead, interrupted, unreported).",
	}, []string{"queue", "outcome"})
	attemptSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tock_executor_attempt_duration_seconds",
		Help:    "Time a handler took for one attempt, by queue.",
		Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms .. ~22min
	}, []string{"queue"})
	attemptsRunning = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tock_executor_attempts_running",
		Help: "Attempts running in this executor, by queue.",
	}, []string{"queue"})
)
