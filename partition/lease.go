package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errLeaseExpired: no renewal of the lease came back in time, so the node
// can no longer prove the lease alive, whether or not etcd still has it.
var errLeaseExpired = errors.New("lease not renewed before its deadline")

// lease is one etcd lease and the single loop that keeps it alive.
//
// It knows how long the lease surely lives: every renewal is timed by the
// local monotonic clock from just before the request was sent, so etcd
// cannot have expired the lease before send time + TTL. Valid keeps a
// margin below that. (clientv3's KeepAlive, and so concurrency.Session,
// does not tell when the request behind a response was sent, which is why
// the loop sends its own renewals with KeepAliveOnce.)
//
// When the lease is lost (etcd says it is gone, or no renewal came back
// before the deadline) Valid turns false, Done is closed, Err says why,
// and renewals stop for good: a lost lease is never trusted again, even if
// etcd would still renew it. The holder starts over with a new lease.
type lease struct {
	cli    *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration // as granted by etcd
	margin time.Duration
	now    func() time.Time

	stop context.CancelFunc
	done chan struct{} // closed when the keep-alive loop has returned

	mu    sync.Mutex
	until time.Time // Valid before this, unless over
	over  bool      // lost or revoked
	err   error     // why it was lost; nil if revoked
}

// grantLease grants a lease of ttl (whole seconds) and keeps it alive
// until it is lost or revoked. Valid keeps margin in hand below the time
// the lease surely lives. now is the clock, time.Now when nil.
func grantLease(ctx context.Context, cli *clientv3.Client, ttl, margin time.Duration, now func() time.Time) (*lease, error) {
	if now == nil {
		now = time.Now
	}
	sent := now()
	resp, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	l := &lease{
		cli: cli, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, margin: margin, now: now,
		stop: stop, done: make(chan struct{}),
	}
	l.until = l.deadline(sent, resp.TTL)
	go l.keepAlive(lctx)
	return l, nil
}

// ID is the etcd lease id, for keys attached to the lease.
func (l *lease) ID() clientv3.LeaseID { return l.id }

// Valid reports whether the lease is surely alive in etcd now, by the
// local monotonic clock, with the margin kept in hand. It is false once
// the lease is lost or revoked.
func (l *lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.over && l.now().Before(l.until)
}

// Deadline is when Valid turns false unless a renewal comes back first.
func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Done is closed when the lease is lost or revoked; renewals have stopped
// by then.
func (l *lease) Done() <-chan struct{} { return l.done }

// Err is why the lease was lost: nil while it is kept alive and after
// Revoke, errLeaseExpired or etcd's ErrLeaseNotFound (wrapped) otherwise.
func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Revoke stops the renewals, makes the lease invalid at once, and revokes
// it in etcd, which deletes every key attached to it. A lease etcd no
// longer has counts as revoked. On error (etcd unreachable) the lease is
// still given up locally; etcd lets it expire after its TTL unless the
// caller revokes the id again later.
func (l *lease) Revoke(ctx context.Context) error {
	l.stop()
	<-l.done
	l.end(nil)
	return revokeLease(ctx, l.cli, l.id)
}

// revokeLease revokes id in etcd; a lease etcd does not have is fine.
func revokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) error {
	if _, err := cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", int64(id), err)
	}
	return nil
}

// keepAlive renews the lease every third of its TTL until ctx ends (by
// Revoke) or the lease is lost.
func (l *lease) keepAlive(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		expire := time.NewTimer(l.Deadline().Sub(l.now()))
		select {
		case <-ctx.Done():
			expire.Stop()
			return
		case <-expire.C:
			l.end(errLeaseExpired)
			return
		case <-tick.C:
			expire.Stop()
		}
		if err := l.renew(ctx); err != nil {
			l.end(err)
			return
		}
	}
}

// renew sends one keep-alive and moves the deadline on when it comes back.
// A renewal that fails for any reason but the lease being gone is not an
// error: the next tick tries again, and the deadline ends the lease if
// none succeeds in time.
func (l *lease) renew(ctx context.Context) error {
	sent := l.now()
	wait := min(l.ttl/3, l.Deadline().Sub(sent))
	if wait <= 0 {
		return errLeaseExpired
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := l.cli.KeepAliveOnce(rctx, l.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("renew lease %x: %w", int64(l.id), err)
	}
	if err != nil {
		return nil
	}
	until := l.deadline(sent, resp.TTL)
	l.mu.Lock()
	if until.After(l.until) {
		l.until = until
	}
	l.mu.Unlock()
	return nil
}

// deadline is when Valid turns false after etcd answered a request sent
// at sent with ttl seconds.
func (l *lease) deadline(sent time.Time, ttl int64) time.Time {
	return sent.Add(time.Duration(ttl)*time.Second - l.margin)
}

// end marks the lease over, keeping the first reason it was lost.
func (l *lease) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.over {
		l.over, l.err = true, err
	}
}
