package partition

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/internal/testenv"
)

// recorder is a Handler that remembers what it owns.
type recorder struct {
	mu    sync.Mutex
	owned map[int]int64
}

func (r *recorder) Acquire(b int, e int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owned == nil {
		r.owned = map[int]int64{}
	}
	r.owned[b] = e
}

func (r *recorder) Release(b int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owned, b)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.owned)
}

func startNode(t *testing.T, ctx context.Context, cli *clientv3.Client, id string, buckets int) (*Node, *recorder, context.CancelFunc, chan error) {
	t.Helper()
	n, err := New(Config{Client: cli, Cluster: "t", NodeID: id, Buckets: buckets, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	nctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(nctx, rec) }()
	return n, rec, cancel, done
}

func TestSingleNodeOwnsEveryBucketVisiblyInEtcd(t *testing.T) {
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()

	const buckets = 32
	n, rec, stop, done := startNode(t, ctx, cli, "node-a", buckets)
	testenv.WaitFor(t, 10*time.Second, "all buckets owned", func() bool { return rec.count() == buckets })

	// What an operator sees with `etcdctl get --prefix /tock/t/`.
	resp, err := cli.Get(ctx, OwnersPrefix("t"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != buckets {
		t.Fatalf("owner keys: %d, want %d", len(resp.Kvs), buckets)
	}
	for i, kv := range resp.Kvs {
		if want := fmt.Sprintf("/tock/t/owners/%05d", i); string(kv.Key) != want || string(kv.Value) != "node-a" {
			t.Fatalf("owner key %d: %s=%s, want %s=node-a", i, kv.Key, kv.Value, want)
		}
		if kv.Lease == 0 {
			t.Fatalf("owner key %s is not attached to a lease", kv.Key)
		}
		if got := rec.owned[i]; got != kv.CreateRevision {
			t.Fatalf("bucket %d epoch %d, want the key's create revision %d", i, got, kv.CreateRevision)
		}
	}
	mresp, err := cli.Get(ctx, MembersPrefix("t")+"node-a")
	if err != nil || len(mresp.Kvs) != 1 {
		t.Fatalf("member key: %v %v", err, mresp)
	}
	if len(n.Owned()) != buckets {
		t.Fatalf("Owned() = %d buckets", len(n.Owned()))
	}

	// Graceful stop: handler released everything and the keys are gone.
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rec.count() != 0 {
		t.Fatalf("handler still owns %d buckets after stop", rec.count())
	}
	resp, _ = cli.Get(ctx, Prefix("t"), clientv3.WithPrefix())
	if len(resp.Kvs) != 0 {
		t.Fatalf("%d keys left after graceful stop", len(resp.Kvs))
	}
}

// ledger is shared by the handlers of several nodes: it records a
// violation whenever a bucket is acquired while another node holds it.
type ledger struct {
	mu         sync.Mutex
	holder     map[int]string
	violations []string
}

type ledgerHandler struct {
	l    *ledger
	node string
}

func (h ledgerHandler) Acquire(b int, _ int64) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if other, ok := h.l.holder[b]; ok && other != h.node {
		h.l.violations = append(h.l.violations, fmt.Sprintf("bucket %d acquired by %s while %s holds it", b, h.node, other))
	}
	h.l.holder[b] = h.node
}

func (h ledgerHandler) Release(b int) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.holder[b] == h.node {
		delete(h.l.holder, b)
	}
}

func (l *ledger) counts() (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := map[string]int{}
	for _, n := range l.holder {
		c[n]++
	}
	return c, len(l.holder)
}

func (l *ledger) snapshot() map[int]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]string{}
	for b, n := range l.holder {
		out[b] = n
	}
	return out
}

func TestJoinOneTwoThreeMovesFairSharesWithoutOverlap(t *testing.T) {
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const buckets = 256
	l := &ledger{holder: map[int]string{}}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	join := func(id string) {
		n, err := New(Config{Client: cli, Cluster: "t", NodeID: id, Buckets: buckets, TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx, ledgerHandler{l, id}) }()
		stops = append(stops, func() { cancel(); <-done })
	}
	settled := func(n int) {
		t.Helper()
		testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("%d nodes to share all buckets", n), func() bool {
			c, total := l.counts()
			return total == buckets && len(c) == n
		})
	}

	join("node-a")
	settled(1)
	for i, id := range []string{"node-b", "node-c"} {
		before := l.snapshot()
		join(id)
		settled(i + 2)
		after := l.snapshot()
		moved := 0
		for b, n := range after {
			if before[b] != n {
				moved++
				if n != id {
					t.Errorf("bucket %d moved from %s to %s, not to the joining node", b, before[b], n)
				}
			}
		}
		want := float64(buckets) / float64(i+2)
		if diff := float64(moved) - want; diff > 0.1*want || diff < -0.1*want {
			t.Errorf("joining %s moved %d buckets, want %.0f ± 10%%", id, moved, want)
		}
		t.Logf("join of %s moved %d of %d buckets (N/(n+1) = %.1f)", id, moved, buckets, want)
	}

	// Graceful leave of the last node: the others take its buckets back.
	stops[2]()
	stops = stops[:2]
	settled(2)

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
}

func TestAssignIsStickyAndBalanced(t *testing.T) {
	members := []string{"n1", "n2", "n3"}
	counts := map[string]int{}
	for b := 0; b < 3000; b++ {
		counts[Assign(members, b)]++
	}
	for m, c := range counts {
		if c < 900 || c > 1100 {
			t.Fatalf("member %s wins %d of 3000 buckets, want about 1000", m, c)
		}
	}
	moved := 0
	for b := 0; b < 3000; b++ {
		before := Assign(members, b)
		after := Assign(append(members[:3:3], "n4"), b)
		if before != after {
			if after != "n4" {
				t.Fatalf("bucket %d moved from %s to %s, not to the new node", b, before, after)
			}
			moved++
		}
	}
	if moved < 675 || moved > 825 {
		t.Fatalf("adding a 4th node moved %d of 3000, want about 750", moved)
	}
	if Assign(nil, 1) != "" {
		t.Fatal("no members must assign no owner")
	}
}
