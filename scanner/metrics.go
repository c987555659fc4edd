package scanner

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
)

// metrics are a Scanner's Prometheus metrics. Importing the package
// registers nothing: New registers them on Config.Registerer, if given.
// Scanners sharing a registerer share the metrics (a second registration
// takes the collector already there), as several tockd nodes in one test
// process do.
type metrics struct {
	bucketsOwned prometheus.Gauge
	fired        prometheus.Counter
	leaseHolds   prometheus.Counter
	fenced       prometheus.Counter
	// Backpressure (see backpressure.go).
	backlogSeen  prometheus.Gauge
	backlogLimit prometheus.Gauge
	heldSeconds  prometheus.Counter
	// Runs not fired, by reason (see plan.go).
	skippedRuns *prometheus.CounterVec
	excluded    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	return &metrics{
		bucketsOwned: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tock_buckets_owned",
			Help: "Buckets this node fires in (fencing epoch recorded).",
		}), &err),
		fired: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_fired_total",
			Help: "Executions created by firing scheduled jobs.",
		}), &err),
		leaseHolds: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_fire_lease_holds_total",
			Help: "Firing batches held back because the node could not prove its etcd lease alive.",
		}), &err),
		fenced: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_fenced_total",
			Help: "Firings refused because the bucket is owned at a newer epoch.",
		}), &err),
		backlogSeen: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tock_fire_backlog",
			Help: "Executions fired and waiting for executors, as the scanner counts them against tock_fire_backlog_limit (-1: unknown, firing is not held back).",
		}), &err),
		backlogLimit: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tock_fire_backlog_limit",
			Help: "The backlog over which firing is held back: BacklogFor of the executors' measured rate, at least MinBacklog.",
		}), &err),
		heldSeconds: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_fire_held_seconds_total",
			Help: "Time due runs waited to fire because the execution backlog was over its limit.",
		}), &err),
		skippedRuns: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_skipped_total",
			Help: "Scheduled runs the scheduler did not fire, by reason: missed (a missed-run policy), overlap, paused (resumed without catch-up), calendar. " +
				"(Runs skipped by their concurrency or rate-limit key's on_limit skip are in the skip ledger only.)",
		}, []string{"reason"}), &err),
		excluded: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_calendar_excluded_total",
			Help: "Scheduled runs a job's calendars did not allow, by the calendar (namespace/name) whose rule excluded each range's first run.",
		}, []string{"calendar"}), &err),
	}, err
}
