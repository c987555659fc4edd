// Package promreg registers a component's Prometheus collectors on the
// Registerer its Config names, so that no package keeps metrics in
// globals and several components (several tockd nodes in one test
// process, tockbench's in-process executors) can share one registry.
package promreg

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or the collector of the
// same description already registered there, so that components sharing
// a Registerer share their metrics (as the package-level collectors they
// replace did). A nil reg registers nothing and returns c: the metrics
// are kept but not exported. The first failure is kept in *errp, which
// lets a constructor register all its collectors and check once.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if *errp == nil {
		*errp = err
	}
	return c
}

// GaugeFunc registers on reg a gauge whose value fn reads when scraped;
// when fn reports ok false the gauge is left out of that scrape (its
// value is unknown: a connection down, say). If a GaugeFunc of the same
// name is registered there already, it reads fn from now on: in a
// process running several components on one Registerer (nodes in one
// test), the one registered last is exported. A nil reg registers
// nothing. A failure is kept in *errp, as Register does.
func GaugeFunc(reg prometheus.Registerer, opts prometheus.GaugeOpts, fn func() (v float64, ok bool), errp *error) {
	if reg == nil {
		return
	}
	g := &funcGauge{desc: prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name),
		opts.Help, nil, opts.ConstLabels)}
	g.fn.Store(&fn)
	err := reg.Register(g)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*funcGauge); ok {
			existing.fn.Store(&fn)
			return
		}
	}
	if err != nil && *errp == nil {
		*errp = err
	}
}

// funcGauge is GaugeFunc's collector.
type funcGauge struct {
	desc *prometheus.Desc
	fn   atomic.Pointer[func() (float64, bool)]
}

// Describe implements prometheus.Collector.
func (g *funcGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *funcGauge) Collect(ch chan<- prometheus.Metric) {
	if v, ok := (*g.fn.Load())(); ok {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
	}
}
