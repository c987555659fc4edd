package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errLeaseExpired: no probe showed the lease alive past its deadline in
// time, so the node can no longer prove the lease alive, whether or not
// etcd still has it.
var errLeaseExpired = errors.New("lease not proven alive before its deadline")

// errKeepAliveStopped: the session stopped keeping the lease alive (its
// etcd client was closed, or no keep-alive was answered within the TTL)
// while etcd did not say the lease was gone.
var errKeepAliveStopped = errors.New("session stopped keeping the lease alive")

// minProbeWait keeps probes from spinning when the deadline is near.
const minProbeWait = 20 * time.Millisecond

// lease is one etcd lease held by a concurrency.Session, whose keep-alive
// is the only one the lease gets, and a loop that checks it.
//
// It knows how long the lease surely lives: the session's keep-alive does
// not tell when the request behind a response was sent, so the loop asks
// etcd how long the lease has left (TimeToLive) and times every question
// by the local monotonic clock from just before it was sent. etcd cannot
// expire the lease before send time + the remaining TTL it answers (see
// check for the rounding). Valid keeps a margin below that.
//
// When the lease is lost (etcd says it is gone, the session stops keeping
// it alive, or no probe came back before the deadline) Valid turns false,
// Done is closed, Err says why, and the lease is never trusted again, even
// if etcd still has it. The holder revokes it and starts over with a new
// lease.
type lease struct {
	cli      *clientv3.Client
	sess     *concurrency.Session
	sessDone <-chan struct{} // sess.Done()
	id       clientv3.LeaseID
	ttl      time.Duration // as granted by etcd
	margin   time.Duration
	now      func() time.Time

	stop context.CancelFunc
	done chan struct{} // closed when the checking loop has returned

	mu    sync.Mutex
	until time.Time // Valid before this, unless over
	over  bool      // lost or revoked
	err   error     // why it was lost; nil if revoked
}

// grantLease grants a lease of ttl (whole seconds) and has a
// concurrency.Session keep it alive until it is lost or revoked. Valid
// keeps margin in hand below the time the lease surely lives. now is the
// clock, time.Now when nil. The session ends with the client.
func grantLease(ctx context.Context, cli *clientv3.Client, ttl, margin time.Duration, now func() time.Time) (*lease, error) {
	if now == nil {
		now = time.Now
	}
	// Granted here rather than by NewSession, to time the grant: etcd
	// keeps the lease at least until sent + the granted TTL.
	sent := now()
	resp, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(resp.ID), concurrency.WithTTL(int(resp.TTL)))
	if err == nil && sess == nil {
		err = errKeepAliveStopped // NewSession returns neither when KeepAlive gives no channel
	}
	if err != nil {
		_ = revokeLease(ctx, cli, resp.ID)
		return nil, fmt.Errorf("keep lease %x alive: %w", int64(resp.ID), err)
	}
	lctx, stop := context.WithCancel(context.Background())
	l := &lease{
		cli: cli, sess: sess, sessDone: sess.Done(), id: resp.ID,
		ttl: time.Duration(resp.TTL) * time.Second, margin: margin, now: now,
		stop: stop, done: make(chan struct{}),
	}
	l.until = l.deadline(sent, resp.TTL)
	go l.watch(lctx)
	return l, nil
}

// ID is the etcd lease id, for keys attached to the lease.
func (l *lease) ID() clientv3.LeaseID { return l.id }

// Valid reports whether the lease is surely alive in etcd now, by the
// local monotonic clock, with the margin kept in hand. It is false once
// the lease is lost or revoked, and from the moment the session stops
// keeping it alive.
func (l *lease) Valid() bool {
	select {
	case <-l.sessDone:
		return false
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.over && l.now().Before(l.until)
}

// Deadline is when Valid turns false unless a probe comes back first.
func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Done is closed when the lease is lost (including when the session's
// Done is closed) or revoked; the session's keep-alive and the probes
// have stopped by then.
func (l *lease) Done() <-chan struct{} { return l.done }

// Err is why the lease was lost: nil while it is held and after Revoke;
// errLeaseExpired, errKeepAliveStopped or etcd's ErrLeaseNotFound
// (wrapped) otherwise.
func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Revoke ends the session's keep-alive and the probes, makes the lease
// invalid at once, and revokes it in etcd, which deletes every key
// attached to it. A lease etcd no longer has counts as revoked. On error
// (etcd unreachable) the lease is still given up locally; etcd lets it
// expire after its TTL unless the caller revokes the id again later.
// (Session.Close would revoke with a timeout of its own, not ctx.)
func (l *lease) Revoke(ctx context.Context) error {
	l.end(nil)
	l.stop()
	l.sess.Orphan()
	<-l.done
	return revokeLease(ctx, l.cli, l.id)
}

// revokeLease revokes id in etcd; a lease etcd does not have is fine.
func revokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) error {
	if _, err := cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", int64(id), err)
	}
	return nil
}

// watch probes the lease until ctx ends (by Revoke) or the lease is lost:
// when the deadline passes, when the session ends, or when a probe finds
// the lease gone. It closes Done on return.
func (l *lease) watch(ctx context.Context) {
	defer close(l.done)
	for {
		left := l.Deadline().Sub(l.now())
		expire := time.NewTimer(left)
		probe := time.NewTimer(l.probeWait(left))
		select {
		case <-ctx.Done():
		case <-expire.C:
			l.end(errLeaseExpired)
		case <-l.sessDone:
			if ctx.Err() == nil {
				l.end(l.whyStopped(ctx))
			}
		case <-probe.C:
			expire.Stop()
			if err := l.check(ctx); err != nil {
				l.end(err)
				return
			}
			continue
		}
		expire.Stop()
		probe.Stop()
		return
	}
}

// probeWait is how long to wait before the next probe, with left to the
// deadline. etcd rounds the remaining TTL down (see check), and the
// session renews only every TTL/3 or so (clientv3 checks every 500ms), so
// right after a probe the deadline can be as little as TTL/3 away (less
// for TTLs of 2-3s). Probing at a third of what is left, at most every
// TTL/3, leaves room for a probe and a retry before it.
func (l *lease) probeWait(left time.Duration) time.Duration {
	return min(l.ttl/3, max(minProbeWait, left/3))
}

// check asks etcd how long the lease has left and moves the deadline on
// when the answer comes back before it. A probe that fails for any reason
// but the lease being gone is not an error: the next one tries again, and
// the deadline ends the lease if none succeeds in time.
func (l *lease) check(ctx context.Context) error {
	sent := l.now()
	wait := min(l.ttl/3, l.Deadline().Sub(sent))
	if wait <= 0 {
		return errLeaseExpired
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := l.cli.TimeToLive(rctx, l.id)
	if err == nil && resp.TTL < 0 {
		err = rpctypes.ErrLeaseNotFound // etcd answers TTL -1 for a lease it does not have
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("lease %x: %w", int64(l.id), err)
	}
	if err != nil {
		return nil
	}
	// etcd (v3.7 etcdserver.leaseTimeToLive and its leasehttp forward)
	// answers TTL: int64(lease.Remaining().Seconds()), the time to expiry
	// when the request is served (after sent), truncated toward zero. For
	// a live lease that rounds down, never up, so sent + TTL is a lower
	// bound on the expiry and no second needs taking off; up to a second
	// is lost instead, which probeWait allows for. A 0 (under a second
	// left, or expired under a second ago and not yet revoked) gives a
	// deadline before sent, so it never moves the deadline. Remaining can
	// exceed the granted TTL (a new leader extends its leases); no more
	// than the granted TTL is counted.
	until := l.deadline(sent, min(resp.TTL, int64(l.ttl/time.Second)))
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.now().Before(l.until) {
		return errLeaseExpired // came back too late: not trusted again
	}
	if until.After(l.until) {
		l.until = until
	}
	return nil
}

// whyStopped is why the session stopped keeping the lease alive: etcd's
// ErrLeaseNotFound if one more probe finds the lease gone, otherwise
// errLeaseExpired past the deadline or errKeepAliveStopped.
func (l *lease) whyStopped(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	return errKeepAliveStopped
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
