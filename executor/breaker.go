package executor

import (
	"errors"
	"fmt"
	"math"
	mathrand "math/rand/v2"
	"sync"
	"time"

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

// WithDefaults is c with the fields it leaves zero set to their
// defaults (the DefaultBreaker constants).
func (c BreakerConfig) WithDefaults() BreakerConfig {
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
	return c
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
// load. The Worker's breakers set holds them.
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
	reason     string    // why the breaker is in state
	tripped    string    // why it last tripped (set by ReadyToTrip)
	halfOpenAt time.Time // while open
	inFlight   int
	lastUsed   time.Time
}

// newHandlerKey returns the state of key, served by queue q, with a
// breaker per cfg.Breaker (none if disabled) whose state changes go to
// changed.
func newHandlerKey(key string, q *queue, cfg *Config, now time.Time, changed func(*handlerKey, gobreaker.State, gobreaker.State)) *handlerKey {
	hk := &handlerKey{key: key, queue: q.name, limit: cfg.MaxPerKey, state: wire.BreakerClosed, since: now, lastUsed: now}
	if n := q.slots.size(); key == q.name && (hk.limit == 0 || n < hk.limit) {
		// A custom handler's key is its queue: the queue's limit is the
		// key's too.
		hk.limit = n
	}
	b := cfg.Breaker
	if b.Disabled {
		return hk
	}
	hk.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        key,
		MaxRequests: b.HalfOpenRequests,
		Interval:    b.Window,
		Timeout:     b.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			trip := counted >= b.MinRequests && float64(c.TotalFailures) >= b.FailureRate*float64(counted)
			if trip {
				hk.mu.Lock()
				hk.tripped = fmt.Sprintf("%d of %d attempts failed within %s", c.TotalFailures, counted, b.Window)
				hk.mu.Unlock()
			}
			return trip
		},
		IsExcluded:    func(err error) bool { return errors.Is(err, errBreakerIgnored) },
		OnStateChange: func(_ string, from, to gobreaker.State) { changed(hk, from, to) },
	})
	return hk
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

// snapshot is the key's wire.BreakerState as seen by executor.
func (hk *handlerKey) snapshot(executor, version string, now time.Time) wire.BreakerState {
	var counts gobreaker.Counts
	if hk.cb != nil {
		hk.cb.State() // moves an open breaker whose time is up to half-open
		counts = hk.cb.Counts()
	}
	hk.mu.Lock()
	defer hk.mu.Unlock()
	var probe *time.Time
	if hk.state == wire.BreakerOpen {
		t := hk.halfOpenAt.UTC()
		probe = &t
	}
	return wire.BreakerState{
		Key:        hk.key,
		Queue:      hk.queue,
		ExecutorID: executor,
		Breaker:    hk.state,
		Since:      hk.since.UTC(),
		Reason:     hk.reason,
		ProbeAt:    probe,
		Version:    version,
		Requests:   counts.TotalSuccesses + counts.TotalFailures,
		Failures:   counts.TotalFailures,
		InFlight:   hk.inFlight,
		Limit:      hk.limit,
		UpdatedAt:  now.UTC(),
	}
}
