package executor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/sony/gobreaker/v2"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func gaugeValue(t *testing.T, g interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// localState returns w's view of handler key.
func localState(w *Worker, key string) (wire.BreakerState, bool) {
	for _, s := range w.BreakerStates() {
		if s.Key == key {
			return s, true
		}
	}
	return wire.BreakerState{}, false
}

// kvState returns the state of handler key that executor wrote to the
// handler bucket.
func (e *env) kvState(key, executor string) (wire.BreakerState, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	states, err := wire.BreakerStates(ctx, e.js)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range states {
		if s.Key == key && s.ExecutorID == executor {
			return s, true
		}
	}
	return wire.BreakerState{}, false
}

// The breaker opens after failures and defers deliveries unrun; after
// OpenFor one probe runs (others are deferred meanwhile), and its success
// closes the breaker. Each change reaches the handler bucket.
func TestBreakerDefersThenProbes(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.Breaker = BreakerConfig{FailureRate: 0.5, MinRequests: 2, Window: time.Minute, OpenFor: 300 * time.Millisecond, HalfOpenRequests: 1}
	var failing atomic.Bool
	failing.Store(true)
	var calls atomic.Int32
	probing := make(chan struct{})
	release := make(chan struct{})
	w.Handle("fragile", func(ctx context.Context, x *Execution) (string, error) {
		calls.Add(1)
		if failing.Load() {
			return "", errors.New("down")
		}
		close(probing)
		<-release
		return "up", nil
	})
	deferredBefore := counterValue(t, w.m.deferredTotal.WithLabelValues("fragile", "breaker"))
	stop := e.run(w)

	for range 2 {
		ex := execution("fragile")
		ex.Retry.MaxAttempts = 3
		e.publish(ex)
		evs.expect(ex, domain.EventStarted, 1, false)
		evs.expect(ex, domain.EventFailed, 1, false)
	}
	if s, _ := localState(w, "fragile"); s.Breaker != wire.BreakerOpen || s.Requests != 0 {
		// A state change starts a new count.
		t.Fatalf("after 2 failures of 2: state %+v, want open", s)
	}
	var kv wire.BreakerState
	if !waitUntil(func() bool {
		var ok bool
		kv, ok = e.kvState("fragile", "exec-1")
		return ok && kv.Breaker == wire.BreakerOpen
	}) {
		t.Fatalf("handler bucket has %+v, want the open breaker", kv)
	}
	if kv.Queue != "fragile" || kv.Limit != 4 || kv.Since.IsZero() || kv.UpdatedAt.IsZero() {
		t.Errorf("handler bucket state %+v", kv)
	}
	if g := gaugeValue(t, w.m.breakerState.WithLabelValues("fragile")); g != 2 {
		t.Errorf("tock_breaker_state{handler=fragile} = %v, want 2 (open)", g)
	}

	// Open: the delivery is handed back, unrun and not counted.
	ex := execution("fragile")
	ex.Retry.MaxAttempts = 3
	e.publish(ex)
	def := evs.expect(ex, domain.EventDeferred, 1, false)
	// OpenFor (300ms) is shorter than the 1s minimum; plus up to 1s of jitter.
	if def.Handler != "fragile" || def.RetryInMS < 1000 || def.RetryInMS >= 2300 {
		t.Errorf("deferred event = %+v, want handler fragile, retry in 1-2.3s", def)
	}
	e.settled("fragile")
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2: the deferred delivery ran", n)
	}
	if n := counterValue(t, w.m.deferredTotal.WithLabelValues("fragile", "breaker")) - deferredBefore; n != 1 {
		t.Errorf("deferred_total{reason=breaker} grew by %v, want 1", n)
	}

	// After OpenFor the breaker half-opens; tock's re-publish is the probe.
	failing.Store(false)
	if !waitUntil(func() bool { s, _ := localState(w, "fragile"); return s.Breaker == wire.BreakerHalfOpen }) {
		t.Fatal("breaker never half-opened")
	}
	ex = e.republish(ex, def)
	evs.expect(ex, domain.EventStarted, 1, false)
	recv(t, probing)
	// One probe at a time: another delivery is deferred meanwhile.
	other := execution("fragile")
	e.publish(other)
	if ev := evs.expect(other, domain.EventDeferred, 1, false); ev.RetryInMS < 1000 || ev.RetryInMS >= 2000 {
		t.Errorf("deferred while probing: %+v, want retry in 1-2s", ev)
	}
	close(release)
	evs.expect(ex, domain.EventSucceeded, 1, false)
	if s, _ := localState(w, "fragile"); s.Breaker != wire.BreakerClosed {
		t.Errorf("after the probe succeeded: %+v, want closed", s)
	}
	if !waitUntil(func() bool { kv, ok := e.kvState("fragile", "exec-1"); return ok && kv.Breaker == wire.BreakerClosed }) {
		t.Error("handler bucket never showed the closed breaker")
	}
	if g := gaugeValue(t, w.m.breakerState.WithLabelValues("fragile")); g != 0 {
		t.Errorf("tock_breaker_state{handler=fragile} = %v, want 0 (closed)", g)
	}
	e.settled("fragile")

	// A stopped executor takes its entries out of the bucket.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if kv, ok := e.kvState("fragile", "exec-1"); ok {
		t.Errorf("handler bucket still has %+v after the executor stopped", kv)
	}
}

// A handler key at MaxPerKey defers its further deliveries, while
// other keys of the same queue run.
func TestMaxPerKeyDefers(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	defer slow.Close()
	defer close(release)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "fast")
	}))
	defer fast.Close()

	w := e.worker(e.nc, "exec-1")
	w.cfg.MaxPerKey = 1
	w.Handle(domain.HandlerHTTP, HTTPHandler(nil))
	limitBefore := counterValue(t, w.m.deferredTotal.WithLabelValues(domain.HandlerHTTP, "limit"))
	e.run(w)

	first := httpExecution(slow.URL).Execution
	e.publish(first)
	evs.expect(first, domain.EventStarted, 1, false)
	recv(t, entered)
	slowKey := "http:" + mustHost(t, slow.URL)
	if s, ok := localState(w, slowKey); !ok || s.InFlight != 1 || s.Limit != 1 || s.Queue != domain.HandlerHTTP {
		t.Errorf("state of %s = %+v, want 1 in flight of 1", slowKey, s)
	}

	second := httpExecution(slow.URL).Execution
	e.publish(second)
	if ev := evs.expect(second, domain.EventDeferred, 1, false); ev.Handler != slowKey || ev.RetryInMS != 1000 {
		t.Errorf("deferred event = %+v, want handler %s, retry in 1000ms", ev, slowKey)
	}
	other := httpExecution(fast.URL).Execution
	e.publish(other)
	evs.expect(other, domain.EventStarted, 1, false)
	evs.expect(other, domain.EventSucceeded, 1, false)
	if n := counterValue(t, w.m.deferredTotal.WithLabelValues(domain.HandlerHTTP, "limit")) - limitBefore; n != 1 {
		t.Errorf("deferred_total{reason=limit} grew by %v, want 1", n)
	}
	release <- struct{}{}
	evs.expect(first, domain.EventSucceeded, 1, false)
	e.settled(domain.HandlerHTTP)
}

func mustHost(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// A long attempt publishes heartbeat events, numbered, once its start is
// reported.
func TestHeartbeatEvents(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.HeartbeatInterval = 50 * time.Millisecond
	release := make(chan struct{})
	w.Handle("long", func(ctx context.Context, x *Execution) (string, error) {
		<-release
		return "done", nil
	})
	e.run(w)
	ex := execution("long")
	e.publish(ex)
	evs.expect(ex, domain.EventStarted, 1, false)
	for seq := 1; seq <= 3; seq++ {
		if ev := evs.expect(ex, domain.EventHeartbeat, 1, false); ev.Seq != seq || ev.ExecutorID != "exec-1" {
			t.Errorf("heartbeat event = %+v, want seq %d", ev, seq)
		}
	}
	close(release)
	for {
		ev := evs.next()
		if ev.Type == domain.EventHeartbeat {
			continue
		}
		if ev.Type != domain.EventSucceeded {
			t.Fatalf("event %+v, want succeeded", ev)
		}
		break
	}
	e.settled("long")
	evs.none(200 * time.Millisecond)
}

func TestBreakerTrips(t *testing.T) {
	cfg := BreakerConfig{FailureRate: 0.5, MinRequests: 4}.WithDefaults()
	m, _ := newMetrics(nil)
	b := newBreakers(&Config{Breaker: cfg}, time.Now, testLogger(t), m.breakerState)
	hk := b.get("k", &queue{name: "k", slots: newSlots(2)})
	run := func(v verdict) {
		t.Helper()
		done, _, ok := hk.allow(time.Now())
		if !ok {
			t.Fatal("breaker refused while closed")
		}
		done(v)
	}
	// Successes, ignored attempts and too few requests do not trip it.
	run(verdictFailure)
	run(verdictIgnore)
	run(verdictSuccess)
	run(verdictFailure)
	if hk.cb.State() != gobreaker.StateClosed {
		t.Fatal("opened below MinRequests counted attempts")
	}
	run(verdictSuccess) // 2 of 4 failed; ready to trip is checked on failure only
	run(verdictFailure) // 3 of 5
	if hk.cb.State() != gobreaker.StateOpen {
		t.Fatalf("closed at 3 failures in 5, want open")
	}
	_, retryIn, ok := hk.allow(time.Now())
	// Until it half-opens in 30 s, plus 1–2 s of jitter.
	if ok || retryIn < 30*time.Second || retryIn > 32*time.Second {
		t.Errorf("open breaker: ok %v retry in %v, want refused until it half-opens in 30s, plus 1-2s", ok, retryIn)
	}
	// What the handler states say: why it opened, when it probes next,
	// which executor software.
	s := hk.snapshot("x", "v", time.Now())
	if s.Breaker != wire.BreakerOpen || s.Limit != 2 || s.Reason != "3 of 5 attempts failed within "+cfg.Window.String() ||
		s.ProbeAt == nil || s.ProbeAt.Sub(s.Since) != cfg.OpenFor || s.Version != "v" {
		t.Errorf("snapshot %+v", s)
	}
}
