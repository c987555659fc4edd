// Package retry paces loops that keep retrying a failing call (reconnect to
// NATS, watch a bucket again, rejoin etcd): a pause that doubles up to a
// cap, with jitter, and a sleep that ends with its context.
//
// It is not the delay between a job's attempts: that is the job's retry
// policy, in executor/backoff.go.
package retry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Backoff is the pause before the next try of a call that keeps failing.
// The zero value starts at 100ms and doubles up to 5s. A Backoff is not
// safe for concurrent use: each retry loop owns one.
type Backoff struct {
	// Initial is the pause after the first failure. Default 100ms.
	Initial time.Duration
	// Max caps the pause. Default 5s; never below Initial.
	Max time.Duration

	next time.Duration  // un-jittered pause Next returns next; 0: Initial
	rand func() float64 // in [0, 1); rand.Float64 if nil (tests set it)
}

// Next returns the pause before the next try and doubles the one after,
// up to Max. The pause is uniform in [d/2, d], d the un-jittered pause, so
// processes that failed together (every executor when NATS restarts) spread
// their retries instead of retrying in step; it never exceeds Max.
func (b *Backoff) Next() time.Duration {
	initial, maxPause := b.Initial, b.Max
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if maxPause <= 0 {
		maxPause = 5 * time.Second
	}
	maxPause = max(maxPause, initial)
	d := min(max(b.next, initial), maxPause)
	b.next = maxPause
	if d < maxPause/2 {
		b.next = 2 * d
	}
	r := rand.Float64
	if b.rand != nil {
		r = b.rand
	}
	return d - time.Duration(r()*float64(d/2))
}

// Reset makes the next pause Initial again: call it after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Wait logs msg as a warning, with args and the pause as retry_in, and
// sleeps the pause (see Sleep): the body of most retry loops after their
// failure. It reports whether it slept all of the pause.
func (b *Backoff) Wait(ctx context.Context, log *slog.Logger, msg string, args ...any) bool {
	pause := b.Next()
	log.Warn(msg, append(args, "retry_in", pause)...)
	return Sleep(ctx, pause)
}

// Sleep waits d, or until ctx ends. It reports whether it waited all of d,
// so that a retry loop can return as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
