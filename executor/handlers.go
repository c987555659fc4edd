package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker/v2"

	"github.com/tock-sched/tock/wire"
)

// Defaults for BreakerConfig.
const (
	DefaultBreakerFailureRate      = 0.5
	DefaultBreakerMinRequests      = 10
	DefaultBreakerWindow           = time.Minute
	DefaultBreakerOpenFor          = 30 * time.Second
	DefaultBreakerHalfOpenRequests = 1
)

// BreakerConfig configures the circuit breaker a Worker keeps for each
// handler key (domain.Handler.Key: a custom handler's name, "http:<host>",
// "nats:<subject>"). The zero value is the defaults above.
//
// A retryable failure or a timeout counts as a failure; a success or a
// permanent failure (the handler answered) as a success; a cancelled or
// shutdown-interrupted attempt not at all. In its window the breaker opens
// once MinRequests attempts were counted and at least FailureRate of them
// failed. While it is open, deliveries for the key are deferred: handed
// back to tock, which publishes them again when the breaker half-opens.
// After OpenFor it half-opens and lets HalfOpenRequests attempts through
// as probes: as many successes close it, one failure opens it again.
type BreakerConfig struct {
	// Disabled turns the breakers off: every delivery runs.
	Disabled bool
	// FailureRate is the share of failed attempts, in (0, 1], that opens
	// the breaker. Default DefaultBreakerFailureRate.
	FailureRate float64
	// MinRequests is how many attempts a window needs before the breaker
	// may open. Default DefaultBreakerMinRequests.
	MinRequests uint32
	// Window is how long a closed breaker counts attempts before it starts
	// counting again from zero. Default DefaultBreakerWindow.
	Window time.Duration
	// OpenFor is how long the breaker stays open before it half-opens.
	// Default DefaultBreakerOpenFor.
	OpenFor time.Duration
	// HalfOpenRequests is how many probe attempts run while half-open.
	// Default DefaultBreakerHalfOpenRequests.
	HalfOpenRequests uint32
}

func (c *BreakerConfig) setDefaults() {
	if c.FailureRate == 0 {
		c.FailureRate = DefaultBreakerFailureRate
	}
	if c.MinRequests == 0 {
		c.MinRequests = DefaultBreakerMinRequests
	}
	if c.Window == 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.OpenFor == 0 {
		c.OpenFor = DefaultBreakerOpenFor
	}
	if c.HalfOpenRequests == 0 {
		c.HalfOpenRequests = DefaultBreakerHalfOpenRequests
	}
}

func (c *BreakerConfig) validate() error {
	if math.IsNaN(c.FailureRate) || c.FailureRate < 0 || c.FailureRate > 1 {
		return fmt.Errorf("executor: Config.Breaker.FailureRate %v is not in (0, 1]", c.FailureRate)
	}
	if c.Window < 0 {
		return fmt.Errorf("executor: Config.Breaker.Window %s is negative", c.Window)
	}
	if c.OpenFor < 0 {
		return fmt.Errorf("executor: Config.Breaker.OpenFor %s is negative", c.OpenFor)
	}
	return nil
}

// verdict is how an attempt counts for its handler's breaker.
type verdict int

const (
	verdictIgnore verdict = iota // cancelled, interrupted, never ran
	verdictSuccess
	verdictFailure
)

// The errors a breaker's done callback is given, by verdict.
var (
	errBreakerFailure = errors.New("attempt failed")
	errBreakerIgnored = errors.New("attempt not counted")
)

// Deferral delays: a delivery refused by a concurrency limit comes back
// after deferMin; one refused by a half-open breaker after deferMin plus
// up to deferMin of jitter; one refused by an open breaker that much after
// the breaker half-opens.
const deferMin = time.Second

// handlerKey is what a Worker knows about one handler key: its breaker and
// load. Worker.keys holds them.
type handlerKey struct {
	key, queue string
	limit      int // per-process concurrency limit; 0: none
	cb         *gobreaker.TwoStepCircuitBreaker[struct{}]

	// mu guards the fields below. The breaker's state change callback
	// takes it while the breaker holds its own lock: never call into cb
	// with mu held.
	mu         sync.Mutex
	state      string
	since      time.Time
	halfOpenAt time.Time // while open
	inFlight   int
	lastUsed   time.Time
}

// handlerKey returns the state of key, served by queue q, creating it on
// first use.
func (w *Worker) handlerKey(key string, q *queue) *handlerKey {
	now := w.now()
	w.keysMu.Lock()
	defer w.keysMu.Unlock()
	if hk, ok := w.keys[key]; ok {
		// Touched under keysMu, so that liveKeys cannot forget a key
		// being handed out.
		hk.mu.Lock()
		hk.lastUsed = now
		hk.mu.Unlock()
		return hk
	}
	hk := &handlerKey{key: key, queue: q.name, limit: w.cfg.MaxPerHandler, state: wire.BreakerClosed, since: now, lastUsed: now}
	if key == q.name && (hk.limit == 0 || q.concurrency < hk.limit) {
		// A custom handler's key is its queue: the queue's limit is the
		// key's too.
		hk.limit = q.concurrency
	}
	if b := w.cfg.Breaker; !b.Disabled {
		hk.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        key,
			MaxRequests: b.HalfOpenRequests,
			Interval:    b.Window,
			Timeout:     b.OpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool {
				counted := c.TotalSuccesses + c.TotalFailures
				return counted >= b.MinRequests && float64(c.TotalFailures) >= b.FailureRate*float64(counted)
			},
			IsExcluded:    func(err error) bool { return errors.Is(err, errBreakerIgnored) },
			OnStateChange: func(_ string, from, to gobreaker.State) { w.breakerChanged(hk, from, to) },
		})
	}
	w.m.breakerState.WithLabelValues(key).Set(0)
	w.keys[key] = hk
	return hk
}

// breakerChanged runs inside the breaker's lock.
func (w *Worker) breakerChanged(hk *handlerKey, from, to gobreaker.State) {
	now := w.now()
	hk.mu.Lock()
	hk.state, hk.since = breakerName(to), now
	if to == gobreaker.StateOpen {
		hk.halfOpenAt = now.Add(w.cfg.Breaker.OpenFor)
	}
	hk.mu.Unlock()
	w.m.breakerState.WithLabelValues(hk.key).Set(float64(breakerGauge(to)))
	log := w.log.With("handler", hk.key, "queue", hk.queue, "from", breakerName(from))
	switch to {
	case gobreaker.StateOpen:
		log.Warn("circuit breaker opened: deferring the handler's executions", "open_for", w.cfg.Breaker.OpenFor)
	case gobreaker.StateHalfOpen:
		log.Info("circuit breaker half-open: probing the handler")
	default:
		log.Info("circuit breaker closed")
	}
	select {
	case w.keysChanged <- struct{}{}:
	default:
	}
}

func breakerName(s gobreaker.State) string {
	switch s {
	case gobreaker.StateOpen:
		return wire.BreakerOpen
	case gobreaker.StateHalfOpen:
		return wire.BreakerHalfOpen
	}
	return wire.BreakerClosed
}

func breakerGauge(s gobreaker.State) int {
	switch s {
	case gobreaker.StateOpen:
		return 2
	case gobreaker.StateHalfOpen:
		return 1
	}
	return 0
}

// acquire takes one of the key's concurrency slots, if one is free.
func (hk *handlerKey) acquire(now time.Time) bool {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	hk.lastUsed = now
	if hk.limit > 0 && hk.inFlight >= hk.limit {
		return false
	}
	hk.inFlight++
	return true
}

func (hk *handlerKey) release(now time.Time) {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	hk.inFlight--
	hk.lastUsed = now
}

// allow asks the breaker for an attempt. If it agrees, done reports how
// the attempt counts (call it exactly once); if not, retryIn is how long
// the delivery should be deferred.
func (hk *handlerKey) allow(now time.Time) (done func(verdict), retryIn time.Duration, ok bool) {
	if hk.cb == nil {
		return func(verdict) {}, 0, true
	}
	report, err := hk.cb.Allow()
	if err != nil {
		// Jittered, so that a backlog refused while open does not come
		// back all at once when the breaker half-opens (only its probes
		// would run; the rest would be refused and deferred again).
		retryIn = deferMin + time.Duration(mathrand.Int64N(int64(deferMin)))
		if errors.Is(err, gobreaker.ErrOpenState) {
			hk.mu.Lock()
			retryIn += max(hk.halfOpenAt.Sub(now), 0)
			hk.mu.Unlock()
		}
		return nil, retryIn, false
	}
	return func(v verdict) {
		switch v {
		case verdictSuccess:
			report(nil)
		case verdictFailure:
			report(errBreakerFailure)
		default:
			report(errBreakerIgnored)
		}
	}, 0, true
}

// snapshot is the key's wire.HandlerState as seen by executor.
func (hk *handlerKey) snapshot(executor string, now time.Time) wire.HandlerState {
	var counts gobreaker.Counts
	if hk.cb != nil {
		hk.cb.State() // moves an open breaker whose time is up to half-open
		counts = hk.cb.Counts()
	}
	hk.mu.Lock()
	defer hk.mu.Unlock()
	return wire.HandlerState{
		Handler:    hk.key,
		Queue:      hk.queue,
		ExecutorID: executor,
		Breaker:    hk.state,
		Since:      hk.since.UTC(),
		Requests:   counts.TotalSuccesses + counts.TotalFailures,
		Failures:   counts.TotalFailures,
		InFlight:   hk.inFlight,
		Limit:      hk.limit,
		UpdatedAt:  now.UTC(),
	}
}

// liveKeys returns the keys served within wire.HandlerStateTTL, forgetting
// the others (unless their breaker is open: a key that failed stays
// refused until its breaker half-opens, however long that is).
func (w *Worker) liveKeys(now time.Time) []*handlerKey {
	w.keysMu.Lock()
	defer w.keysMu.Unlock()
	live := make([]*handlerKey, 0, len(w.keys))
	for key, hk := range w.keys {
		hk.mu.Lock()
		stale := hk.inFlight == 0 && now.Sub(hk.lastUsed) > wire.HandlerStateTTL &&
			(hk.state != wire.BreakerOpen || now.After(hk.halfOpenAt))
		hk.mu.Unlock()
		if stale {
			delete(w.keys, key)
			w.m.breakerState.DeleteLabelValues(key)
			continue
		}
		live = append(live, hk)
	}
	slices.SortFunc(live, func(a, b *handlerKey) int { return strings.Compare(a.key, b.key) })
	return live
}

// HandlerStates returns this Worker's view of each handler key it served
// within wire.HandlerStateTTL: its breaker state and load, as it also
// writes them to wire.HandlerBucket.
func (w *Worker) HandlerStates() []wire.HandlerState {
	now := w.now()
	keys := w.liveKeys(now)
	states := make([]wire.HandlerState, 0, len(keys))
	for _, hk := range keys {
		states = append(states, hk.snapshot(w.cfg.ExecutorID, now))
	}
	return states
}

// writeHandlerStates writes the handler states to wire.HandlerBucket
// every stateEvery, at once when a breaker changes state, and when an open
// breaker is due to half-open, until ctx ends; it then deletes this
// executor's entries.
func (w *Worker) writeHandlerStates(ctx context.Context) {
	tick := time.NewTicker(w.stateEvery)
	defer tick.Stop()
	halfOpen := time.NewTimer(time.Hour)
	defer halfOpen.Stop()
	var kv jetstream.KeyValue
	written := map[string]string{} // handler key → bucket key
	for {
		select {
		case <-ctx.Done():
			w.deleteHandlerStates(kv, written)
			return
		case <-tick.C:
		case <-w.keysChanged:
		case <-halfOpen.C:
		}
		if kv == nil {
			var err error
			if kv, err = w.js.KeyValue(ctx, wire.HandlerBucket); err != nil {
				w.log.Warn("write handler states", "err", err)
				kv = nil
				continue
			}
		}
		now := w.now()
		next := time.Duration(-1)
		failed := 0
		live := map[string]bool{}
		for _, hk := range w.liveKeys(now) {
			s := hk.snapshot(w.cfg.ExecutorID, now)
			live[s.Handler] = true
			if s.Breaker == wire.BreakerOpen {
				hk.mu.Lock()
				if d := hk.halfOpenAt.Sub(now); next < 0 || d < next {
					next = d
				}
				hk.mu.Unlock()
			}
			pctx, cancel := context.WithTimeout(ctx, publishTimeout)
			err := wire.PutHandlerState(pctx, kv, s)
			cancel()
			if err != nil {
				failed++
				continue
			}
			written[s.Handler] = s.Key()
		}
		for handler := range written {
			if !live[handler] {
				delete(written, handler) // its entry expires with the bucket's TTL
			}
		}
		if failed > 0 && ctx.Err() == nil {
			w.log.Warn("write handler states", "failed", failed)
			kv = nil // the bucket may be gone: look it up again next time
		}
		if next >= 0 {
			halfOpen.Reset(max(next, 0) + 10*time.Millisecond)
		}
	}
}

// deleteHandlerStates removes this executor's entries at shutdown, so that
// readers do not see a stopped executor's view for another TTL.
func (w *Worker) deleteHandlerStates(kv jetstream.KeyValue, written map[string]string) {
	if kv == nil || len(written) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	for _, key := range written {
		if err := kv.Delete(ctx, key); err != nil {
			w.log.Debug("delete handler state", "key", key, "err", err)
			return
		}
	}
}
