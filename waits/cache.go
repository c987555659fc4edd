package waits

import (
	"context"
	"sync"
	"time"

	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// Sources are where a Cache reads its snapshot from.
type Sources struct {
	States    func(context.Context) ([]wire.BreakerState, error)
	Consumers func(context.Context) ([]wire.QueueConsumer, error)
	Seen      func(context.Context) ([]model.HandlerSeen, error)
}

// Cache keeps the latest Snapshot for TTL.
type Cache struct {
	src Sources
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	snap *Snapshot
	// failed, err: when the sources last failed, and how; a failure is
	// kept for TTL too, so that a NATS that does not answer slows one
	// request a second, not every one.
	failed time.Time
	err    error
}

// readTimeout bounds one read of the sources.
const readTimeout = 2 * time.Second

// NewCache returns a Cache reading src, keeping a snapshot for ttl.
func NewCache(src Sources, ttl time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, ttl: ttl, now: now}
}

// Get returns a snapshot at most TTL old, reading the sources when the
// one kept is older. A source's error is returned with a nil snapshot
// (Snapshot.Handler of nil is a handler not Known).
func (c *Cache) Get(ctx context.Context) (*Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.snap != nil && now.Sub(c.snap.At) < c.ttl {
		return c.snap, nil
	}
	if c.err != nil && now.Sub(c.failed) < c.ttl {
		return nil, c.err
	}
	snap, err := c.read(ctx, now)
	if err != nil {
		c.snap, c.failed, c.err = nil, now, err
		return nil, err
	}
	c.snap, c.err = snap, nil
	return snap, nil
}

func (c *Cache) read(ctx context.Context, now time.Time) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	states, err := c.src.States(ctx)
	if err != nil {
		return nil, err
	}
	consumers, err := c.src.Consumers(ctx)
	if err != nil {
		return nil, err
	}
	seen, err := c.src.Seen(ctx)
	if err != nil {
		return nil, err
	}
	return NewSnapshot(now, states, consumers, seen), nil
}
