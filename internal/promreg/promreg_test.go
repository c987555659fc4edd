package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterSharesAndReports(t *testing.T) {
	opts := prometheus.CounterOpts{Name: "tock_test_total", Help: "A test counter."}
	var err error
	if c := Register(nil, prometheus.NewCounter(opts), &err); c == nil || err != nil {
		t.Fatalf("nil Registerer: %v, %v; want the counter kept and no error", c, err)
	}
	reg := prometheus.NewRegistry()
	first := Register(reg, prometheus.NewCounter(opts), &err)
	second := Register(reg, prometheus.NewCounter(opts), &err)
	if err != nil {
		t.Fatal(err)
	}
	first.Inc()
	if second != first {
		t.Fatal("a second registration of the same metric did not share the first's collector")
	}
	// Same name, another help text: a conflict, reported.
	Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "tock_test_total", Help: "Other."}), &err)
	if err == nil {
		t.Fatal("a conflicting registration was not reported")
	}
}
