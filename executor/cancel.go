package executor

import (
	"context"
	"sync"
	"time"
)

// cancelPruneEvery is how often the set of cancelled executions forgets
// those older than wire.CancelTTL (their keys have expired from the
// bucket, which sends no event for that).
const cancelPruneEvery = 10 * time.Minute

// cancels is the Worker's copy of wire.CancelBucket and the running
// attempts it can stop.
type cancels struct {
	mu      sync.Mutex
	ids     map[string]time.Time // cancelled execution → when
	running map[string]map[uint64]context.CancelCauseFunc
	seq     uint64
}

func newCancels() *cancels {
	return &cancels{ids: map[string]time.Time{}, running: map[string]map[uint64]context.CancelCauseFunc{}}
}

// register records an attempt of execution id that cancel stops, unless
// the execution is cancelled already. Call unregister when the attempt
// ends.
func (c *cancels) register(id string, cancel context.CancelCauseFunc) (unregister func(), cancelled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ids[id]; ok {
		return func() {}, true
	}
	c.seq++
	n := c.seq
	if c.running[id] == nil {
		c.running[id] = map[uint64]context.CancelCauseFunc{}
	}
	c.running[id][n] = cancel
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.running[id], n)
		if len(c.running[id]) == 0 {
			delete(c.running, id)
		}
	}, false
}

// add marks execution id cancelled at at and stops its running attempts;
// it returns how many it stopped.
func (c *cancels) add(id string, at time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id] = at
	for _, cancel := range c.running[id] {
		cancel(ErrCancelled)
	}
	return len(c.running[id])
}

func (c *cancels) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
}

func (c *cancels) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// prune forgets cancellations made before before.
func (c *cancels) prune(before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, at := range c.ids {
		if at.Before(before) {
			delete(c.ids, id)
		}
	}
}
