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

func TestGaugeFuncReadsTheLatestAndMayBeUnknown(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.GaugeOpts{Name: "tock_test_up", Help: "A test gauge."}
	var err error
	GaugeFunc(reg, opts, func() (float64, bool) { return 1, true }, &err)
	value := func() (float64, bool) {
		t.Helper()
		mfs, gerr := reg.Gather()
		if gerr != nil {
			t.Fatal(gerr)
		}
		for _, mf := range mfs {
			if mf.GetName() == "tock_test_up" {
				return mf.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if v, ok := value(); !ok || v != 1 {
		t.Fatalf("tock_test_up = %v (present %v); want 1", v, ok)
	}
	// A second registration (another node in the process) is read from now on.
	GaugeFunc(reg, opts, func() (float64, bool) { return 0, true }, &err)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := value(); !ok || v != 0 {
		t.Fatalf("after a second registration tock_test_up = %v (present %v); want 0", v, ok)
	}
	// Unknown: left out of the scrape.
	GaugeFunc(reg, opts, func() (float64, bool) { return 0, false }, &err)
	if _, ok := value(); ok {
		t.Fatal("tock_test_up was exported while its value is unknown")
	}
	// Another collector under the name: a conflict, reported.
	GaugeFunc(reg, prometheus.GaugeOpts{Name: "tock_test_up", Help: "Other."}, func() (float64, bool) { return 1, true }, &err)
	if err == nil {
		t.Fatal("a conflicting registration was not reported")
	}
}
