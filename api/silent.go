package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// The silent-job gauge: how long a scrape waits for the database, and
// how long one read serves the scrapes that follow it.
const (
	lastSuccessTimeout = 2 * time.Second
	lastSuccessTTL     = 5 * time.Second
)

// successSource is what the silent-job gauge reads; Store is one.
type successSource interface {
	ListAlertedJobSuccesses(ctx context.Context) ([]model.JobLastSuccess, error)
}

// lastSuccesses is a prometheus.Collector exporting
// tock_job_last_success_timestamp_seconds{job_namespace, job_name}: when
// each job labelled tock.io/alert=true last succeeded (see
// store.ListAlertedJobSuccesses, which also says what a job that never
// succeeded reports), read from the database when scraped.
//
// One read serves the scrapes of the next ttl, so that several
// Prometheus servers or a short scrape interval cost one query. A read
// that fails or takes longer than timeout leaves the gauge out of the
// scrape (until the ttl has passed) and is logged; it does not fail the
// whole of /metrics.
//
// The labels are not "namespace" and "job": Prometheus sets "job" on
// every scraped series (the scrape job), and Kubernetes service discovery
// commonly sets "namespace" (the pod's); a series' own label of that name
// would be renamed exported_job or exported_namespace.
type lastSuccesses struct {
	desc         *prometheus.Desc
	failures     *prometheus.Desc // tock_job_consecutive_failures
	log          *slog.Logger
	timeout, ttl time.Duration
	now          func() time.Time

	// mu is held while reading, so that concurrent scrapes wait for one
	// read rather than each making their own.
	mu     sync.Mutex
	src    successSource
	readAt time.Time // zero: never read
	jobs   []model.JobLastSuccess
}

func newLastSuccesses(src successSource, log *slog.Logger) *lastSuccesses {
	return &lastSuccesses{
		desc: prometheus.NewDesc("tock_job_last_success_timestamp_seconds",
			"When the job's latest succeeded execution finished, as a Unix time, for jobs labelled "+
				store.AlertLabel+"=true; for a job that has not succeeded, when it was created.",
			[]string{"job_namespace", "job_name"}, nil),
		failures: prometheus.NewDesc("tock_job_consecutive_failures",
			"How many of the job's executions in a row went dead, up to now (0 since its last success), for jobs labelled "+
				store.AlertLabel+"=true.",
			[]string{"job_namespace", "job_name"}, nil),
		log: log, timeout: lastSuccessTimeout, ttl: lastSuccessTTL, now: time.Now, src: src,
	}
}

// registerLastSuccesses registers the silent-job gauge on reg, reading
// from src. If a Server registered one there before (tests, a restart in
// process), that one reads from src from now on.
func registerLastSuccesses(reg prometheus.Registerer, src successSource, log *slog.Logger) error {
	c := newLastSuccesses(src, log)
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*lastSuccesses); ok {
			existing.mu.Lock()
			existing.src, existing.readAt, existing.jobs = src, time.Time{}, nil
			existing.mu.Unlock()
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("api: register metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (c *lastSuccesses) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.failures }

// Collect implements prometheus.Collector.
func (c *lastSuccesses) Collect(ch chan<- prometheus.Metric) {
	for _, j := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(j.At.UnixMilli())/1e3,
			j.Namespace, j.Name)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(j.ConsecutiveFailures),
			j.Namespace, j.Name)
	}
}

// read is the jobs' last successes, from the cache while it is fresh.
func (c *lastSuccesses) read() []model.JobLastSuccess {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < c.ttl {
		return c.jobs
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	jobs, err := c.src.ListAlertedJobSuccesses(ctx)
	if err != nil {
		c.log.Warn("metrics: read the last successes of alerted jobs; tock_job_last_success_timestamp_seconds left out",
			"err", err)
	}
	c.readAt, c.jobs = now, jobs
	return jobs
}
