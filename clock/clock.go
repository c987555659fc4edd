// Package clock is the database's clock as a tock node keeps it: the
// local clock plus an offset to the database's, measured NTP style.
//
// Due times are judged by one clock, the database's (DESIGN.md). Reading
// it costs a round trip, so a node measures its offset once in a while and
// follows it with the local monotonic clock in between.
package clock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a DB clock. The zero value is the scheduler's: five round
// trips per sync, a sync every 30 s, 5 s after a failed one.
type Options struct {
	// Every is how long a measured offset is used before it is measured
	// again; default 30s.
	Every time.Duration
	// RetryAfter is how soon SyncIfDue tries again after a failed sync;
	// default 5s.
	RetryAfter time.Duration
	// Rounds is how many round trips one sync makes; the fastest is kept.
	// Default 5.
	Rounds int
}

// DB is the database's clock: the local clock corrected by a measured
// offset. Its methods are safe for concurrent use. Until the first sync
// succeeds the offset and its uncertainty are zero: DB is the local clock.
type DB struct {
	read func(ctx context.Context) (time.Time, error)
	opts Options

	cur atomic.Pointer[reading] // nil until a sync succeeds

	mu   sync.Mutex
	next time.Time // when SyncIfDue syncs again, local (monotonic); zero: at once
}

// reading is one sync's result, swapped in whole, so that Passed never
// pairs one sync's offset with another's uncertainty.
type reading struct {
	offset      time.Duration // database minus local
	uncertainty time.Duration // bound on offset's error
	at          time.Time     // when measured, local (monotonic)
}

// New returns the clock of the database that read reads (store.Store.Now
// is one). It reads nothing until Sync, SyncIfDue or Fresh.
func New(read func(ctx context.Context) (time.Time, error), opts Options) *DB {
	if opts.Every <= 0 {
		opts.Every = 30 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 5
	}
	return &DB{read: read, opts: opts}
}

// Now is the database's time: the local clock plus the measured offset.
func (c *DB) Now() time.Time {
	now := time.Now()
	if r := c.cur.Load(); r != nil {
		return now.Add(r.offset)
	}
	return now
}

// Passed is a time the database's clock has surely reached: Now less the
// offset's uncertainty. Whatever must not happen before its time by the
// database's clock (the dispatcher's publishing) waits until Passed is at
// or after that time.
func (c *DB) Passed() time.Time {
	now := time.Now()
	if r := c.cur.Load(); r != nil {
		return now.Add(r.offset - r.uncertainty)
	}
	return now
}

// Offset is the database's clock minus the local one, as last measured;
// zero before the first successful sync.
func (c *DB) Offset() time.Duration {
	if r := c.cur.Load(); r != nil {
		return r.offset
	}
	return 0
}

// Sync measures the offset now. Of Rounds round trips it keeps the
// fastest: the offset is the database's reading less the midpoint of that
// round trip, and the uncertainty half the round trip plus a millisecond
// (the database's clock may be truncated to one). A failed round trip ends
// the sync; if none succeeded, the previous offset stays, Sync returns the
// error and SyncIfDue tries again after RetryAfter.
func (c *DB) Sync(ctx context.Context) error {
	best := time.Duration(-1)
	var offset time.Duration
	var err error
	for range c.opts.Rounds {
		t0 := time.Now()
		var db time.Time
		db, err = c.read(ctx)
		rtt := time.Since(t0)
		if err != nil {
			break
		}
		if best < 0 || rtt < best {
			best, offset = rtt, db.Sub(t0.Add(rtt/2))
		}
	}
	now := time.Now()
	if best < 0 {
		c.mu.Lock()
		c.next = now.Add(c.opts.RetryAfter)
		c.mu.Unlock()
		return fmt.Errorf("clock: sync with the database: %w", err)
	}
	c.cur.Store(&reading{offset: offset, uncertainty: best/2 + time.Millisecond, at: now})
	c.mu.Lock()
	c.next = now.Add(c.opts.Every)
	c.mu.Unlock()
	return nil
}

// SyncIfDue syncs if no sync has been made yet, Every has passed since
// the last successful one, or RetryAfter since a failed one; otherwise it
// does nothing. A caller that runs often (the scanner's loop) keeps the
// clock fresh with it.
func (c *DB) SyncIfDue(ctx context.Context) error {
	c.mu.Lock()
	due := !time.Now().Before(c.next)
	c.mu.Unlock()
	if !due {
		return nil
	}
	return c.Sync(ctx)
}

// Fresh is the database's time from an offset measured less than Every
// ago: if the last successful sync is older, it syncs first, and fails if
// that sync does (it does not wait out RetryAfter). The time is in UTC, as
// store.Store.Now's is. The API computes schedules from it without a
// round trip per request.
func (c *DB) Fresh(ctx context.Context) (time.Time, error) {
	if r := c.cur.Load(); r == nil || time.Since(r.at) >= c.opts.Every {
		if err := c.Sync(ctx); err != nil {
			return time.Time{}, err
		}
	}
	return c.Now().UTC(), nil
}
