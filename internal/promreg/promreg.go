// Package promreg registers a component's Prometheus collectors on the
// Registerer its Config names, so that no package keeps metrics in
// globals and several components (several tockd nodes in one test
// process, tockbench's in-process executors) can share one registry.
package promreg

import (
	"errors"

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
