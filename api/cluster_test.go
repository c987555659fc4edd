package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/store"
)

// etcdClient starts an embedded etcd for the test and connects to it.
func etcdClient(t *testing.T) (*clientv3.Client, func()) {
	t.Helper()
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() }) // runs after the nodes' cleanups
	return cli, e.Stop
}

// claimer is a partition.Assignee that records each ownership in Postgres,
// as the scanner does, when record is set; without it the node owns its
// buckets in etcd only, as a scanner does for a moment after a hand-over.
type claimer struct {
	t      *testing.T
	st     *store.Store
	node   string
	record bool
}

func (c claimer) Acquire(b int, epoch int64) {
	if !c.record {
		return
	}
	if err := c.st.ClaimBucket(context.Background(), b, c.node, epoch); err != nil {
		c.t.Errorf("record bucket %d for %s: %v", b, c.node, err)
	}
}

func (claimer) Release(int) {}

// clusterTestTTL is the test nodes' lease.
const clusterTestTTL = 6 * time.Second

// runNode runs a scheduler node of cluster "t" until the test ends.
func runNode(t *testing.T, cli *clientv3.Client, st *store.Store, id string, record bool) *partition.Node {
	t.Helper()
	n, err := partition.New(partition.Config{
		Client: cli, Cluster: "t", NodeID: id, Addr: id + ".example:8080",
		// A lease of 6 s: under a loaded machine (make test runs the
		// cluster chaos test beside this one) a 2 s lease lapsed once and
		// moved the buckets mid-test.
		Buckets: st.Buckets(), TTL: clusterTestTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, claimer{t: t, st: st, node: id, record: record}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node %s: %v", id, err)
		}
	})
	return n
}

func TestClusterEndpoints(t *testing.T) {
	t.Parallel()
	cli, _ := etcdClient(t)
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) { c.Cluster = partition.NewObserver(cli, "t") })
	e.store = st
	buckets := st.Buckets()

	n1 := runNode(t, cli, st, "n1", true)
	testenv.WaitFor(t, 10*time.Second, "n1 owns and has recorded every bucket", func() bool {
		stats, err := st.ListBucketStats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		owned := n1.Owned()
		for _, s := range stats {
			if s.Node != "n1" || s.Epoch != owned[s.Bucket] {
				return false
			}
		}
		return len(owned) == buckets
	})

	// Jobs: one active with a next run, one paused.
	due := e.createJob(map[string]any{"name": "soon", "schedule": map[string]any{"in": "1h"},
		"handler": map[string]any{"type": "custom", "name": "w"}})
	paused := e.createJob(jobBody("paused"))
	mustStatus(t, e.do("POST", "/v1/jobs/"+paused.Id.String()+"/pause", nil), http.StatusOK)

	var parts models.BucketList
	r := e.do("GET", "/v1/buckets", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &parts)
	if len(parts.Items) != buckets {
		t.Fatalf("%d partitions, want %d", len(parts.Items), buckets)
	}
	owned := n1.Owned()
	var jobs, active int64
	for i, p := range parts.Items {
		if p.Bucket != i {
			t.Fatalf("item %d is bucket %d: not in bucket order", i, p.Bucket)
		}
		if deref(p.Owner) != "n1" || p.Epoch == nil || *p.Epoch != owned[i] {
			t.Errorf("bucket %d: owner %v epoch %v, want n1 at %d", i, deref(p.Owner), p.Epoch, owned[i])
		}
		// n1 recorded its claims: Postgres agrees with etcd.
		if deref(p.RecordedOwner) != "n1" || deref(p.RecordedEpoch) != owned[i] {
			t.Errorf("bucket %d: recorded %v at %v, want n1 at %d", i, deref(p.RecordedOwner), deref(p.RecordedEpoch), owned[i])
		}
		jobs, active = jobs+p.Jobs, active+p.ActiveJobs
		switch {
		case i == due.Bucket:
			if p.NextDue == nil || !p.NextDue.Equal(*due.NextRunAt) {
				t.Errorf("bucket %d next due %v, want %v", i, p.NextDue, due.NextRunAt)
			}
		case p.NextDue != nil:
			t.Errorf("bucket %d next due %v, want none", i, p.NextDue)
		}
	}
	if jobs != 2 || active != 1 {
		t.Errorf("jobs %d, active %d; want 2 and 1", jobs, active)
	}

	var nodes models.NodeList
	r = e.do("GET", "/v1/nodes", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &nodes)
	if len(nodes.Items) != 1 {
		t.Fatalf("nodes %+v", nodes.Items)
	}
	nd := nodes.Items[0]
	if nd.Node != "n1" || deref(nd.Addr) != "n1.example:8080" || nd.BucketCount != buckets || len(nd.Buckets) != buckets ||
		nd.LeaseTtlSeconds <= 0 || nd.LeaseTtlSeconds > clusterTestTTL.Seconds() || time.Since(nd.StartedAt) > time.Minute {
		t.Errorf("node %+v", nd)
	}

	// n2 joins but records nothing, as a new owner before its scanner has
	// recorded the epoch: etcd names n2, Postgres still n1 (older epoch).
	n2 := runNode(t, cli, st, "n2", false)
	testenv.WaitFor(t, 10*time.Second, "n1 and n2 share the buckets", func() bool {
		return settled(map[string]*partition.Node{"n1": n1, "n2": n2}, buckets)
	})
	// The deprecated name answers the same.
	r = e.do("GET", "/v1/partitions", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &parts)
	moved := n2.Owned()
	for _, p := range parts.Items {
		epoch, toN2 := moved[p.Bucket]
		switch {
		case toN2 && (deref(p.Owner) != "n2" || deref(p.Epoch) != epoch || deref(p.RecordedOwner) != "n1" || deref(p.RecordedEpoch) >= epoch):
			t.Errorf("moved bucket %d: owner %s@%d, recorded %s@%d", p.Bucket, deref(p.Owner), deref(p.Epoch), deref(p.RecordedOwner), deref(p.RecordedEpoch))
		case !toN2 && (deref(p.Owner) != "n1" || deref(p.Epoch) != deref(p.RecordedEpoch)):
			t.Errorf("kept bucket %d: owner %s@%d, recorded %s@%d", p.Bucket, deref(p.Owner), deref(p.Epoch), deref(p.RecordedOwner), deref(p.RecordedEpoch))
		}
	}
	r = e.do("GET", "/v1/nodes", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &nodes)
	if len(nodes.Items) != 2 || nodes.Items[0].Node != "n1" || nodes.Items[1].Node != "n2" {
		t.Fatalf("nodes %+v", nodes.Items)
	}
	for _, nd := range nodes.Items {
		owned := map[string]*partition.Node{"n1": n1, "n2": n2}[nd.Node].Owned()
		want := make([]int, 0, len(owned))
		for b := range owned {
			want = append(want, b)
		}
		slices.Sort(want)
		if !slices.Equal(nd.Buckets, want) || nd.BucketCount != len(want) {
			t.Errorf("%s buckets %v (%d), want %v", nd.Node, nd.Buckets, nd.BucketCount, want)
		}
	}
}

func TestClusterEndpointsWithoutEtcd(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, struct{ Store }{})
	for _, path := range []string{"/v1/nodes", "/v1/buckets", "/v1/partitions"} {
		r := e.do("GET", path, nil)
		mustStatus(t, r, http.StatusServiceUnavailable)
		p := r.problem(t)
		if p.Type != ProblemUnavailable || !strings.Contains(deref(p.Detail), "no etcd connection") {
			t.Errorf("%s: %s", path, r.body)
		}
	}
}

func TestClusterEndpointsWhenEtcdIsDown(t *testing.T) {
	t.Parallel()
	cli, stopEtcd := etcdClient(t)
	e := newEnvWith(t, openStore(t), func(c *Config) {
		c.Cluster = partition.NewObserver(cli, "t")
		c.ClusterTimeout = 500 * time.Millisecond
	})
	mustStatus(t, e.do("GET", "/v1/nodes", nil), http.StatusOK)
	stopEtcd()
	for _, path := range []string{"/v1/nodes", "/v1/buckets", "/v1/partitions"} {
		start := time.Now()
		r := e.do("GET", path, nil)
		mustStatus(t, r, http.StatusServiceUnavailable)
		if p := r.problem(t); p.Type != ProblemUnavailable || strings.Contains(string(r.body), "127.0.0.1") {
			t.Errorf("%s: %s", path, r.body)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v with etcd down", path, d)
		}
	}
	if !strings.Contains(e.logs.String(), "read cluster state from etcd") {
		t.Errorf("the failure was not logged: %s", e.logs.String())
	}
}

func TestNewRejectsNegativeClusterTimeout(t *testing.T) {
	_, err := New(Config{Store: struct{ Store }{}, ClusterTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ClusterTimeout") {
		t.Fatalf("err = %v", err)
	}
}

// settled reports whether the running nodes own exactly the buckets
// rendezvous hashing gives them, so no hand-over is under way.
func settled(nodes map[string]*partition.Node, buckets int) bool {
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	owned := map[string]map[int]int64{}
	for id, n := range nodes {
		owned[id] = n.Owned()
	}
	total := 0
	for _, o := range owned {
		total += len(o)
	}
	for b := range buckets {
		if _, ok := owned[partition.Assign(ids, b)][b]; !ok {
			return false
		}
	}
	return total == buckets
}
