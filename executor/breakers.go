package executor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/tock-sched/tock/wire"
)

// breakers is a Worker's set of handler keys, each with its breaker and
// load (see handlerKey), and the writer of their states to
// wire.BreakerBucket.
type breakers struct {
	// cfg is the Worker's: MaxPerKey, Breaker and ExecutorID are read
	// when a key is first served.
	cfg   *Config
	now   func() time.Time
	log   *slog.Logger
	gauge *prometheus.GaugeVec // tock_breaker_state

	mu      sync.Mutex
	keys    map[string]*handlerKey
	changed chan struct{} // cap 1: a breaker changed state
}

func newBreakers(cfg *Config, now func() time.Time, log *slog.Logger, gauge *prometheus.GaugeVec) *breakers {
	return &breakers{cfg: cfg, now: now, log: log, gauge: gauge,
		keys: make(map[string]*handlerKey), changed: make(chan struct{}, 1)}
}

// get returns the state of key, served by queue q, creating it on first
// use.
func (b *breakers) get(key string, q *queue) *handlerKey {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if hk, ok := b.keys[key]; ok {
		// Touched under b.mu, so that live cannot forget a key being
		// handed out.
		hk.mu.Lock()
		hk.lastUsed = now
		hk.mu.Unlock()
		return hk
	}
	hk := newHandlerKey(key, q, b.cfg, now, b.stateChanged)
	b.gauge.WithLabelValues(key).Set(0)
	b.keys[key] = hk
	return hk
}

// stateChanged runs inside the breaker's lock.
func (b *breakers) stateChanged(hk *handlerKey, from, to gobreaker.State) {
	now := b.now()
	hk.mu.Lock()
	hk.state, hk.since = breakerName(to), now
	switch {
	case to == gobreaker.StateOpen && from == gobreaker.StateHalfOpen:
		hk.reason = "a probe attempt failed"
	case to == gobreaker.StateOpen:
		hk.reason = hk.tripped
	case to == gobreaker.StateHalfOpen:
		hk.reason = fmt.Sprintf("open for %s: probing with up to %d attempts", b.cfg.Breaker.OpenFor, b.cfg.Breaker.HalfOpenRequests)
	default:
		hk.reason = "the probe attempts succeeded"
	}
	if to == gobreaker.StateOpen {
		hk.halfOpenAt = now.Add(b.cfg.Breaker.OpenFor)
	}
	hk.mu.Unlock()
	b.gauge.WithLabelValues(hk.key).Set(float64(breakerGauge(to)))
	log := b.log.With("handler", hk.key, "queue", hk.queue, "from", breakerName(from))
	switch to {
	case gobreaker.StateOpen:
		log.Warn("circuit breaker opened: deferring the handler's executions", "open_for", b.cfg.Breaker.OpenFor)
	case gobreaker.StateHalfOpen:
		log.Info("circuit breaker half-open: probing the handler")
	default:
		log.Info("circuit breaker closed")
	}
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// live returns the keys served within wire.BreakerStateTTL, forgetting
// the others (unless their breaker is open: a key that failed stays
// refused until its breaker half-opens, however long that is).
func (b *breakers) live(now time.Time) []*handlerKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	live := make([]*handlerKey, 0, len(b.keys))
	for key, hk := range b.keys {
		hk.mu.Lock()
		stale := hk.inFlight == 0 && now.Sub(hk.lastUsed) > wire.BreakerStateTTL &&
			(hk.state != wire.BreakerOpen || now.After(hk.halfOpenAt))
		hk.mu.Unlock()
		if stale {
			delete(b.keys, key)
			b.gauge.DeleteLabelValues(key)
			continue
		}
		live = append(live, hk)
	}
	slices.SortFunc(live, func(a, b *handlerKey) int { return strings.Compare(a.key, b.key) })
	return live
}

// states returns the live keys' states (see Worker.BreakerStates).
func (b *breakers) states() []wire.BreakerState {
	now := b.now()
	keys := b.live(now)
	states := make([]wire.BreakerState, 0, len(keys))
	for _, hk := range keys {
		states = append(states, hk.snapshot(b.cfg.ExecutorID, b.cfg.Version, now))
	}
	return states
}

// writeStates writes the live keys' states to wire.BreakerBucket every
// interval, at once when a breaker changes state, and when an open
// breaker is due to half-open, until ctx ends; it then deletes this
// executor's entries.
func (b *breakers) writeStates(ctx context.Context, js jetstream.JetStream, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	halfOpen := time.NewTimer(time.Hour)
	defer halfOpen.Stop()
	var kv jetstream.KeyValue
	written := map[string]string{} // handler key → bucket key
	for {
		select {
		case <-ctx.Done():
			b.deleteStates(kv, written)
			return
		case <-tick.C:
		case <-b.changed:
		case <-halfOpen.C:
		}
		if kv == nil {
			var err error
			if kv, err = js.KeyValue(ctx, wire.BreakerBucket); err != nil {
				b.log.Warn("write handler states", "err", err)
				kv = nil
				continue
			}
		}
		next, ok := b.writeOnce(ctx, kv, written)
		if !ok {
			kv = nil // the bucket may be gone: look it up again next time
		}
		if next >= 0 {
			halfOpen.Reset(max(next, 0) + 10*time.Millisecond)
		}
	}
}

// writeOnce writes the live keys' states to kv, notes them in written
// (handler key → bucket key) and forgets there the keys no longer live. It
// returns how long until the first open breaker half-opens (negative if
// none is open), and false if some writes failed.
func (b *breakers) writeOnce(ctx context.Context, kv jetstream.KeyValue, written map[string]string) (next time.Duration, ok bool) {
	now := b.now()
	next = -1
	failed := 0
	live := map[string]bool{}
	for _, hk := range b.live(now) {
		s := hk.snapshot(b.cfg.ExecutorID, b.cfg.Version, now)
		live[s.Key] = true
		if s.Breaker == wire.BreakerOpen {
			hk.mu.Lock()
			if d := hk.halfOpenAt.Sub(now); next < 0 || d < next {
				next = d
			}
			hk.mu.Unlock()
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := wire.PutBreakerState(pctx, kv, s)
		cancel()
		if err != nil {
			failed++
			continue
		}
		written[s.Key] = s.EntryKey()
	}
	for key := range written {
		if !live[key] {
			delete(written, key) // its entry expires with the bucket's TTL
		}
	}
	if failed > 0 && ctx.Err() == nil {
		b.log.Warn("write handler states", "failed", failed)
		return next, false
	}
	return next, true
}

// deleteStates removes this executor's entries at shutdown, so that
// readers do not see a stopped executor's view for another TTL.
func (b *breakers) deleteStates(kv jetstream.KeyValue, written map[string]string) {
	if kv == nil || len(written) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	for _, key := range written {
		if err := kv.Delete(ctx, key); err != nil {
			b.log.Debug("delete handler state", "key", key, "err", err)
			return
		}
	}
}
