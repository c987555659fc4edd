package api

import (
	"context"
	"sync"
	"time"
)

// clockEvery is how long a measured offset to the database's clock is
// used before it is measured again.
const clockEvery = 10 * time.Second

// dbClock is the database's clock as the API reads it: the local clock
// plus an offset to the database's, measured at most every clockEvery.
// Schedules are computed from the database's clock, as the scanners
// judge due times by it; reading it for every request cost a round trip
// to Postgres per job created, a third of POST /v1/jobs's. The offset's
// error is half a round trip, well under a millisecond.
type dbClock struct {
	read func(ctx context.Context) (time.Time, error) // the database's clock

	mu     sync.Mutex
	offset time.Duration // database minus local
	synced time.Time     // when offset was measured, local (monotonic)
}

// Now is the database's time.
func (c *dbClock) Now(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	fresh, offset := !c.synced.IsZero() && time.Since(c.synced) < clockEvery, c.offset
	c.mu.Unlock()
	if fresh {
		return time.Now().Add(offset).UTC(), nil
	}
	t0 := time.Now()
	db, err := c.read(ctx)
	if err != nil {
		return time.Time{}, err
	}
	rtt := time.Since(t0)
	c.mu.Lock()
	c.offset, c.synced = db.Sub(t0.Add(rtt/2)), time.Now()
	c.mu.Unlock()
	return db.UTC(), nil
}
