package schedule

import "sync"

// Cache compiles specs, keeping what it compiled: thousands of jobs
// share a handful of expressions, and parsing one is most of what
// computing a first or next run costs. A *Schedule is immutable, so the
// copies are shared. It keeps cron schedules only (at and in carry a
// time of their own) and, once it holds max, starts over. The zero value
// keeps up to DefaultCacheSize; it is safe for concurrent use.
type Cache struct {
	max int // 0: DefaultCacheSize

	mu sync.Mutex
	m  map[cacheKey]*Schedule
}

// DefaultCacheSize is how many schedules a zero Cache keeps.
const DefaultCacheSize = 100_000

type cacheKey struct {
	cron, zone string
	anchor     int64 // Unix nanoseconds, when anchored
	anchored   bool
	// The window, in Unix nanoseconds when set, and the jitter.
	start, end       int64
	hasStart, hasEnd bool
	jitter           string
	maxRuns          int64
}

// Compile is Compile(sp), from the cache when sp was compiled before.
// Errors are not kept.
func (c *Cache) Compile(sp Spec) (*Schedule, error) {
	if sp.Cron == "" || sp.At != nil || sp.In != "" {
		return Compile(sp)
	}
	k := cacheKey{cron: sp.Cron, zone: sp.Timezone}
	if sp.Anchor != nil {
		k.anchor, k.anchored = sp.Anchor.UnixNano(), true
	}
	if sp.StartAt != nil {
		k.start, k.hasStart = sp.StartAt.UnixNano(), true
	}
	if sp.EndAt != nil {
		k.end, k.hasEnd = sp.EndAt.UnixNano(), true
	}
	k.jitter, k.maxRuns = sp.Jitter, sp.MaxRuns
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := Compile(sp)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	max := c.max
	if max <= 0 {
		max = DefaultCacheSize
	}
	if c.m == nil || len(c.m) >= max {
		c.m = make(map[cacheKey]*Schedule)
	}
	c.m[k] = s
	return s, nil
}
