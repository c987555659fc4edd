package partition

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/internal/testenv"
)

// skewClock is the real clock plus a jump the test can add, as a node
// sees time after it was frozen (SIGSTOP, a long GC pause).
type skewClock struct {
	mu   sync.Mutex
	skew time.Duration
}

func (c *skewClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

func (c *skewClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skew += d
}

func TestLeaseValidOnlyBeforeItsDeadline(t *testing.T) {
	t0 := time.Date(2025, 3, 30, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		now   time.Time
		over  bool
		valid bool
	}{
		{name: "well before", now: t0.Add(-time.Second), valid: true},
		{name: "just before", now: t0.Add(-time.Nanosecond), valid: true},
		{name: "at the deadline", now: t0},
		{name: "after", now: t0.Add(time.Millisecond)},
		{name: "before, but lost or revoked", now: t0.Add(-time.Second), over: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lease{until: t0, over: tc.over, now: func() time.Time { return tc.now }}
			if got := l.Valid(); got != tc.valid {
				t.Fatalf("Valid() = %v, want %v", got, tc.valid)
			}
		})
	}
}

func TestLeaseDeadlineKeepsTheMargin(t *testing.T) {
	l := &lease{margin: 400 * time.Millisecond}
	sent := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := l.deadline(sent, 2), sent.Add(1600*time.Millisecond); !got.Equal(want) {
		t.Fatalf("deadline = %v, want %v", got, want)
	}
}

// timeLeft is what etcd says is left of id; negative when it has no
// such lease.
func timeLeft(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLeaseRenewsUntilRevoked(t *testing.T) {
	cli := etcdClient(t, testenv.Etcd(t).Endpoint())
	ctx := context.Background()
	start := time.Now()
	l, err := grantLease(ctx, cli, 2*time.Second, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	if !l.Valid() || first.Before(start.Add(1600*time.Millisecond)) || first.After(time.Now().Add(1600*time.Millisecond)) {
		t.Fatalf("new lease: Valid %v, deadline %v after start, want 1.6s", l.Valid(), first.Sub(start))
	}
	// Probes move the deadline on while the session keeps the lease
	// alive; past the first deadline it is still valid.
	testenv.WaitFor(t, 5*time.Second, "a probe to move the deadline", func() bool { return l.Deadline().After(first) })
	testenv.WaitFor(t, 5*time.Second, "past the first deadline", func() bool { return time.Now().After(first) })
	if !l.Valid() || closed(l.Done()) || l.Err() != nil {
		t.Fatalf("kept lease: Valid %v, Done closed %v, Err %v", l.Valid(), closed(l.Done()), l.Err())
	}

	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Valid() || !closed(l.Done()) || l.Err() != nil {
		t.Fatalf("revoked lease: Valid %v, Done closed %v, Err %v", l.Valid(), closed(l.Done()), l.Err())
	}
	if ttl := timeLeft(t, cli, l.ID()); ttl >= 0 {
		t.Fatalf("etcd still has the revoked lease, %ds left", ttl)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("second Revoke: %v", err)
	}
}

// The deadline Valid works to, plus the margin, is never later than
// etcd's expiry of the lease: etcd answers TimeToLive rounded down to whole
// seconds, so its expiry is before the answer's arrival + TTL + 1s.
func TestLeaseDeadlineIsNoLaterThanEtcdsExpiry(t *testing.T) {
	cli := etcdClient(t, testenv.Etcd(t).Endpoint())
	const margin = 400 * time.Millisecond
	l, err := grantLease(context.Background(), cli, 2*time.Second, margin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Revoke(context.Background()) })
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		// etcd's expiry only moves on, so it is no earlier when asked
		// below than when the deadline read here was set.
		deadline := l.Deadline()
		left := timeLeft(t, cli, l.ID())
		latest := time.Now().Add(time.Duration(left+1) * time.Second)
		if expiry := deadline.Add(margin); expiry.After(latest) {
			t.Fatalf("deadline + margin %v after etcd's expiry, which is before %v", expiry.Format(time.StampMilli), latest.Format(time.StampMilli))
		}
	}
	if !l.Valid() || l.Err() != nil {
		t.Fatalf("kept lease: Valid %v, Err %v", l.Valid(), l.Err())
	}
}

// When the session stops keeping the lease alive (here: its client is
// closed) the lease is lost at once, though etcd still has it.
func TestLeaseLostWhenTheSessionEnds(t *testing.T) {
	e := testenv.Etcd(t)
	cli := etcdClient(t, e.Endpoint())
	own := etcdClient(t, e.Endpoint())
	l, err := grantLease(context.Background(), own, 2*time.Second, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	testenv.WaitFor(t, 5*time.Second, "the lease to be lost", func() bool { return closed(l.Done()) })
	if l.Valid() || !errors.Is(l.Err(), errKeepAliveStopped) {
		t.Fatalf("lease of an ended session: Valid %v, Err %v, want errKeepAliveStopped", l.Valid(), l.Err())
	}
	if ttl := timeLeft(t, cli, l.ID()); ttl < 0 {
		t.Fatal("etcd no longer has the lease; the test wanted the session to end first")
	}
	if _, err := cli.Revoke(context.Background(), l.ID()); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseProbesBeforeTheDeadline(t *testing.T) {
	l := &lease{ttl: 3 * time.Second}
	for left, want := range map[time.Duration]time.Duration{
		5 * time.Second:        time.Second, // at most every TTL/3
		900 * time.Millisecond: 300 * time.Millisecond,
		30 * time.Millisecond:  minProbeWait,
		-time.Second:           minProbeWait,
	} {
		if got := l.probeWait(left); got != want {
			t.Errorf("probeWait(%v) = %v, want %v", left, got, want)
		}
	}
}

func TestLeaseLostWhenEtcdDropsIt(t *testing.T) {
	cli := etcdClient(t, testenv.Etcd(t).Endpoint())
	ctx := context.Background()
	l, err := grantLease(ctx, cli, 2*time.Second, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else revokes it (an operator, or etcd restored without it).
	if _, err := cli.Revoke(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the lease to be lost", func() bool { return closed(l.Done()) })
	if l.Valid() || !errors.Is(l.Err(), rpctypes.ErrLeaseNotFound) {
		t.Fatalf("lost lease: Valid %v, Err %v, want ErrLeaseNotFound", l.Valid(), l.Err())
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke of a lease etcd no longer has: %v", err)
	}
}

func TestLeaseInvalidAtOnceWhenTheClockPassesItsDeadline(t *testing.T) {
	cli := etcdClient(t, testenv.Etcd(t).Endpoint())
	ctx := context.Background()
	clk := &skewClock{}
	l, err := grantLease(ctx, cli, 2*time.Second, 400*time.Millisecond, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Revoke(context.Background()) })
	if !l.Valid() {
		t.Fatal("new lease not valid")
	}
	// The node wakes from a freeze: by its clock the lease may have
	// expired, even though etcd may not have noticed yet.
	clk.jump(2 * time.Second)
	if l.Valid() {
		t.Fatal("Valid after the clock passed the deadline")
	}
	testenv.WaitFor(t, 5*time.Second, "the lease to be given up", func() bool { return closed(l.Done()) })
	if !errors.Is(l.Err(), errLeaseExpired) {
		t.Fatalf("Err = %v, want errLeaseExpired", l.Err())
	}
	if l.Valid() {
		t.Fatal("given-up lease valid again")
	}
}

func TestLeaseExpiresWhenEtcdIsUnreachable(t *testing.T) {
	e := testenv.Etcd(t)
	cli := etcdClient(t, e.Endpoint())
	l, err := grantLease(context.Background(), cli, 2*time.Second, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Stop()
	testenv.WaitFor(t, 5*time.Second, "the lease to expire", func() bool { return closed(l.Done()) })
	if l.Valid() || !errors.Is(l.Err(), errLeaseExpired) {
		t.Fatalf("unproven lease: Valid %v, Err %v, want errLeaseExpired", l.Valid(), l.Err())
	}
	// Given up no earlier than the deadline: etcd may still have it.
	if now := time.Now(); now.Before(l.Deadline()) {
		t.Fatalf("given up %v before its deadline", l.Deadline().Sub(now))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := l.Revoke(ctx); err == nil {
		t.Fatal("Revoke with etcd down succeeded")
	}
}

func TestNodeLetsGoAndRejoinsWhenItsLeaseIsLost(t *testing.T) {
	cli := etcdClient(t, testenv.Etcd(t).Endpoint())
	ctx := context.Background()
	const buckets = 16
	n, rec, stop, done := startNode(t, ctx, cli, "node-a", buckets)
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// ownerLeases is the set of leases the owner keys are attached to.
	ownerLeases := func() map[clientv3.LeaseID]int {
		resp, err := cli.Get(ctx, OwnersPrefix("t"), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		out := map[clientv3.LeaseID]int{}
		for _, kv := range resp.Kvs {
			out[clientv3.LeaseID(kv.Lease)]++
		}
		return out
	}
	var first clientv3.LeaseID
	testenv.WaitFor(t, 10*time.Second, "all buckets owned", func() bool {
		ls := ownerLeases()
		for id, c := range ls {
			first = id
			return c == buckets && rec.count() == buckets && n.Valid()
		}
		return false
	})

	// etcd drops the lease (its keys go with it): the node gives up every
	// bucket and claims them again on a new lease.
	if _, err := cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "all buckets owned on a new lease", func() bool {
		ls := ownerLeases()
		return len(ls) == 1 && ls[first] == 0 && rec.count() == buckets && rebalCount(n) >= 2*buckets && n.Valid()
	})
}

// rebalCount counts n's bucket acquisitions and releases.
func rebalCount(n *Node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rebal
}
