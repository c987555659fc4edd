package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/recorder"
	"github.com/tock-sched/tock/store"
)

// This file holds the gauges a node exports about itself beside its
// components' own metrics: what its connections can reach, its backlogs,
// and when its certificates expire. Each is read when scraped, or set
// once at start, so none costs anything per execution. The alert rules
// of deploy/monitoring read them.

// recorderBacklogTimeout bounds the read of the recorder's backlog a
// scrape makes.
const recorderBacklogTimeout = time.Second

// registerNodeMetrics registers the gauges of every node: the cluster's
// bucket count (nodes with a store, which read it there), whether NATS
// is connected, the recorders' backlog (recorder nodes) and the expiry of
// the certificates cfg names.
func registerNodeMetrics(cfg Config, d deps) error {
	var err error
	if d.st != nil {
		promreg.Register(d.reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "tock_buckets",
			Help: "The cluster's bucket count, fixed when the cluster was created: " +
				"tock_buckets less the sum of tock_buckets_owned are buckets nobody fires in."}), &err).
			Set(float64(cfg.Buckets))
	}
	nc := d.nc
	promreg.GaugeFunc(d.reg, prometheus.GaugeOpts{Name: "tock_nats_up",
		Help: "1 while this node's NATS connection is connected, else 0 (it reconnects by itself)."},
		func() (float64, bool) { return boolGauge(nc.IsConnected()), true }, &err)
	if cfg.Roles.Has(RoleRecorder) {
		js, log := d.js, d.log
		promreg.GaugeFunc(d.reg, prometheus.GaugeOpts{Name: "tock_recorder_backlog",
			Help: "Executor events waiting for the recorders (their JetStream consumer's pending and unacknowledged messages), " +
				"read when scraped; the same on every recorder node. Left out while NATS cannot be read."},
			func() (float64, bool) {
				if !nc.IsConnected() {
					return 0, false
				}
				ctx, cancel := context.WithTimeout(context.Background(), recorderBacklogTimeout)
				defer cancel()
				n, err := recorder.Backlog(ctx, js)
				if err != nil {
					log.Debug("metrics: tock_recorder_backlog left out", "err", err)
					return 0, false
				}
				return float64(n), true
			}, &err)
	}
	if err != nil {
		return fmt.Errorf("register node metrics: %w", err)
	}
	return registerCertExpiry(cfg, d)
}

// registerSchedulerMetrics registers the gauges of the scheduler role:
// whether its etcd lease is alive, and its dispatcher's part of the
// outbox.
func registerSchedulerMetrics(d deps, s *scheduler) error {
	var err error
	promreg.GaugeFunc(d.reg, prometheus.GaugeOpts{Name: "tock_etcd_up",
		Help: "1 while this scheduler node's etcd lease is proven alive (it may fire), else 0: " +
			"etcd cannot be reached, or the lease was lost and the node has not joined again yet."},
		func() (float64, bool) { return boolGauge(s.node.Valid()), true }, &err)
	promreg.GaugeFunc(d.reg, prometheus.GaugeOpts{Name: "tock_outbox_backlog",
		Help: "Executions due that this node's dispatcher has not had acknowledged by JetStream yet " +
			"(fired, retries and re-drives coming due): the outbox as this node holds it."},
		func() (float64, bool) { return float64(s.disp.Unpublished()), true }, &err)
	if d.st != nil {
		promreg.Register(d.reg, prometheus.Collector(newSlotCollector(d.st)), &err)
	}
	if err != nil {
		return fmt.Errorf("register scheduler metrics: %w", err)
	}
	return nil
}

// certFile is a certificate file the node reads, by the flag naming it.
type certFile struct{ flag, path string }

// certFiles are the certificate files cfg names: the API's certificate and
// client CA, and the NATS and etcd client certificates and CAs.
// PostgreSQL's are pgx's, read from --postgres-url, and not among them.
func (c Config) certFiles() []certFile {
	var files []certFile
	for _, f := range []certFile{
		{"tls-cert", c.TLS.Cert}, {"tls-client-ca", c.TLS.ClientCA},
		{"nats-tls-cert", c.NATSAuth.TLS.Cert}, {"nats-tls-ca", c.NATSAuth.TLS.CA},
		{"etcd-tls-cert", c.EtcdAuth.TLS.Cert}, {"etcd-tls-ca", c.EtcdAuth.TLS.CA},
	} {
		if f.path != "" {
			files = append(files, f)
		}
	}
	return files
}

// registerCertExpiry exports when each certificate file cfg names expires.
// tockd reads them at start only (a renewed file is used, and its expiry
// shown, from the next start), so the gauge is set once.
func registerCertExpiry(cfg Config, d deps) error {
	files := cfg.certFiles()
	if len(files) == 0 {
		return nil
	}
	var err error
	g := promreg.Register(d.reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tock_tls_cert_expiry_timestamp_seconds",
		Help: "When the first certificate of a TLS file this node read at start expires (the earliest NotAfter in it), " +
			"as a Unix time; cert is the flag naming the file (tls-cert, tls-client-ca, nats-tls-cert, nats-tls-ca, " +
			"etcd-tls-cert, etcd-tls-ca). Files are read at start only: a renewed one counts from the next start."},
		[]string{"cert"}), &err)
	if err != nil {
		return fmt.Errorf("register tock_tls_cert_expiry_timestamp_seconds: %w", err)
	}
	for _, f := range files {
		at, err := certExpiry(f.path)
		if err != nil {
			// Run has read the file already; a key file in place of a
			// certificate would have failed there.
			d.log.Warn("metrics: tock_tls_cert_expiry_timestamp_seconds left out", "cert", f.flag, "err", err)
			continue
		}
		g.WithLabelValues(f.flag).Set(float64(at.Unix()))
	}
	return nil
}

// certExpiry is the earliest NotAfter of the PEM certificates in file.
func certExpiry(file string) (time.Time, error) {
	rest, err := os.ReadFile(file)
	if err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", file, err)
		}
		if first.IsZero() || c.NotAfter.Before(first) {
			first = c.NotAfter
		}
	}
	if first.IsZero() {
		return time.Time{}, errors.New(file + " holds no PEM certificate")
	}
	return first, nil
}

// boolGauge is a gauge's value for b: 1 or 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// slotCollector exports, when scraped, the concurrency slots held and the
// executions waiting for one, by key (one grouped read of
// concurrency_slots, bounded by slotsTimeout; left out when it fails).
// Every scheduler node exports the same cluster-wide figures.
type slotCollector struct {
	st            *store.Store
	held, waiting *prometheus.Desc
}

// slotsTimeout bounds the read of the slots a scrape makes.
const slotsTimeout = time.Second

func newSlotCollector(st *store.Store) *slotCollector {
	return &slotCollector{st: st,
		held: prometheus.NewDesc("tock_concurrency_slots_held",
			"Slots of a concurrency key held by executions queued, running or retrying (scoped key: ns:<namespace>:<key> or cluster:<key>).",
			[]string{"key"}, nil),
		waiting: prometheus.NewDesc("tock_concurrency_waiting",
			"Executions waiting for a slot of a concurrency key (state waiting).", []string{"key"}, nil)}
}

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.held; ch <- c.waiting }

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), slotsTimeout)
	defer cancel()
	held, waiting, err := c.st.CountSlots(ctx)
	if err != nil {
		return
	}
	for k, n := range held {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(n), k)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting[k]), k)
	}
}
