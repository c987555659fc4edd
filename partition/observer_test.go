package partition

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/internal/testenv"
)

func TestObserverSeesMembersAndOwners(t *testing.T) {
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() }) // after the nodes stop: they revoke their leases
	ctx := context.Background()
	const buckets = 32
	obs := NewObserver(cli, "t")

	// Nothing runs yet: an empty view, not an error.
	if ms, err := obs.Members(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("Members of an empty cluster = %v, %v", ms, err)
	}
	if os, err := obs.Owners(ctx); err != nil || len(os) != 0 {
		t.Fatalf("Owners of an empty cluster = %v, %v", os, err)
	}

	before := time.Now().UTC().Add(-time.Second)
	// start runs a node until the test ends or stop is called.
	start := func(id, addr string) (n *Node, stop func()) {
		n, err := New(Config{Client: cli, Cluster: "t", NodeID: id, Addr: addr, Buckets: buckets, TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		nctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(nctx, nopHandler{}) }()
		stop = sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", id, err)
			}
		})
		t.Cleanup(stop) // before etcd stops
		return n, stop
	}
	b, stopB := start("node-b", "10.0.0.2:8080")
	a, _ := start("node-a", "10.0.0.1:8080")

	// settled: each node holds exactly the buckets it wins, so no
	// hand-over is under way, and etcd's owner keys say the same.
	settled := func() bool {
		ao, bo := a.Owned(), b.Owned()
		for bk := range buckets {
			held := map[string]map[int]int64{"node-a": ao, "node-b": bo}[Assign([]string{"node-a", "node-b"}, bk)]
			if _, ok := held[bk]; !ok {
				return false
			}
		}
		if len(ao)+len(bo) != buckets {
			return false
		}
		owners, err := obs.Owners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for bk, o := range owners {
			held := map[string]map[int]int64{"node-a": ao, "node-b": bo}[o.Node]
			if epoch, ok := held[bk]; !ok || epoch != o.Epoch || o.Lease == clientv3.NoLease {
				return false
			}
		}
		return len(owners) == buckets
	}
	testenv.WaitFor(t, 15*time.Second, "two nodes share the buckets", settled)

	members, err := obs.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[0].Node != "node-a" || members[1].Node != "node-b" {
		t.Fatalf("members %+v, want node-a and node-b in that order", members)
	}
	for i, n := range []*Node{a, b} {
		m := members[i]
		if want := []string{"10.0.0.1:8080", "10.0.0.2:8080"}[i]; m.Addr != want {
			t.Errorf("%s addr %q, want %q", m.Node, m.Addr, want)
		}
		if m.StartedAt.Before(before) || m.StartedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("%s started at %v", m.Node, m.StartedAt)
		}
		if m.LeaseTTL <= 0 || m.LeaseTTL > 2*time.Second {
			t.Errorf("%s lease TTL %v, want in (0, 2s]", m.Node, m.LeaseTTL)
		}
		// The view may trail a rebalance by a moment; with the nodes
		// settled it must match what each holds.
		want := slices.Sorted(maps.Keys(n.Owned()))
		if !slices.Equal(m.Buckets, want) {
			t.Errorf("%s buckets %v, want %v", m.Node, m.Buckets, want)
		}
	}

	// node-b leaves: it disappears from the view and node-a owns all.
	stopB()
	testenv.WaitFor(t, 10*time.Second, "node-a alone owns every bucket", func() bool {
		ms, err := obs.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms) == 1 && ms[0].Node == "node-a" && len(ms[0].Buckets) == buckets
	})
}

func TestObserverToleratesOddKeys(t *testing.T) {
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()

	// A member key written by hand (not JSON, no lease), an owner key that
	// is not a bucket, and a key of another cluster.
	for k, v := range map[string]string{
		MembersPrefix("odd") + "manual": "not json",
		OwnersPrefix("odd") + "00003":   "manual",
		OwnersPrefix("odd") + "junk":    "manual",
		OwnersPrefix("other") + "00001": "elsewhere",
	} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	obs := NewObserver(cli, "odd")
	ms, err := obs.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Node != "manual" || ms[0].LeaseTTL != 0 || !slices.Equal(ms[0].Buckets, []int{3}) {
		t.Errorf("members %+v", ms)
	}
	owners, err := obs.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || owners[3].Node != "manual" || owners[3].Epoch == 0 || owners[3].Lease != clientv3.NoLease {
		t.Errorf("owners %+v", owners)
	}
	// The default cluster is "default", as for Node.
	if ms, err := NewObserver(cli, "").Members(ctx); err != nil || len(ms) != 0 {
		t.Errorf("default cluster: %v, %v", ms, err)
	}
}

// nopHandler accepts every bucket and has nothing to stop.
type nopHandler struct{}

func (nopHandler) Acquire(int, int64) {}
func (nopHandler) Release(int)        {}
