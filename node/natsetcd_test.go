package node_test

// tock on a 3-server NATS cluster with replicated streams and a 3-member
// etcd cluster: one NATS server or one etcd member lost while jobs fire
// every second changes nothing, and etcd's quorum lost stops ownership
// changes without any scheduled time firing twice (issue 22).

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/wire"
)

// clusterFiring is the start of every test here: nodes a and b (in this
// process, streams with 3 replicas, lease TTL ttl) sharing the buckets
// on the clusters, an executor for handler, 20 every-second jobs and 3 s
// of firing. from is where the exactly-once window starts.
type clusterFiring struct {
	e    *nodetest.Env
	cli  *clientv3.Client
	jobs []uuid.UUID
	from time.Time
}

func startClusterFiring(t *testing.T, handler string, ttl time.Duration) clusterFiring {
	t.Helper()
	e := nodetest.NewClusters(t)
	cli := e.EtcdClient(t)
	cfg := func(c *node.Config) { c.StreamReplicas, c.LeaseTTL = 3, ttl }
	a := e.StartWith(t, "a", cfg)
	e.StartWith(t, "b", cfg)
	nodetest.WaitFor(t, 30*time.Second, "a and b to share the buckets", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == nodetest.Buckets
	})
	e.Echo(t, handler)
	f := clusterFiring{e: e, cli: cli}
	f.jobs = a.EverySecondJobs(t, handler, 20)
	f.from = time.Now().Add(2 * time.Second)
	time.Sleep(3 * time.Second)
	return f
}

// assertAllSucceeded waits until every execution of the jobs scheduled
// in [from, to] has succeeded: none was lost on its way to an executor.
func (f clusterFiring) assertAllSucceeded(t *testing.T, to time.Time) {
	t.Helper()
	st := nodetest.OpenStore(t, f.e.PG)
	var left int
	deadline := time.Now().Add(45 * time.Second)
	for {
		if err := st.Pool().QueryRow(context.Background(), `
			SELECT count(*) FROM executions
			WHERE job_id = ANY($1) AND scheduled_for BETWEEN $2 AND $3 AND state <> 'succeeded'`,
			f.jobs, f.from.Truncate(time.Second), to.Truncate(time.Second)).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d executions scheduled from %s to %s have not succeeded after 45s", left,
				f.from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestNATSServerOfThreeLostWhileFiring(t *testing.T) {
	t.Parallel()
	f := startClusterFiring(t, "natsloss", nodetest.LeaseTTL)
	c := f.e.NATSCluster
	// The executions stream's leader is the server whose loss matters
	// most: the stream must elect another while publishes go on.
	victim := c.StreamLeader(wire.ExecStream)
	if victim < 0 {
		t.Fatalf("no server leads %s", wire.ExecStream)
	}
	c.Stop(victim)
	stopped := time.Now()
	time.Sleep(8 * time.Second)
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("NATS server %d (leader of %s) down for %s", victim, wire.ExecStream, time.Since(stopped).Round(time.Millisecond))
	// The runs due during the outage fire late, up to the missed-run grace
	// after their time (30-41 s under load): wait for them, at most a
	// minute, then check that every scheduled time fired exactly once (a
	// run fired twice never heals, so the wait hides nothing).
	to := time.Now().Add(time.Second)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if len(nodetest.NotExactlyOnce(t, f.e.PG, f.jobs, f.from, to)) == 0 {
			break
		}
	}
	nodetest.AssertExactlyOnce(t, f.e.PG, f.jobs, f.from, to)
	f.assertAllSucceeded(t, to)
}

func TestEtcdMemberOfThreeLostWhileFiring(t *testing.T) {
	t.Parallel()
	// The production lease TTL: a member's loss (even the leader's, and
	// the election after it) must not cost a node its lease.
	f := startClusterFiring(t, "etcdmember", 5*time.Second)
	c := f.e.EtcdCluster
	before := nodetest.Owners(t, f.cli)
	victim := c.Leader()
	if victim < 0 {
		t.Fatal("no etcd leader")
	}
	c.Stop(victim)
	stopped := time.Now()
	for time.Since(stopped) < 10*time.Second {
		if o := nodetest.Owners(t, f.cli); o != nil && sortedKeys(o) != sortedKeys(before) {
			t.Errorf("bucket owners changed while one etcd member was down: %s, before %s", sortedKeys(o), sortedKeys(before))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd leader (member %d) down for %s; owners %s throughout", victim, time.Since(stopped).Round(time.Millisecond), sortedKeys(before))
	// The runs due during the outage fire late, up to the missed-run grace
	// after their time (30-41 s under load): wait for them, at most a
	// minute, then check that every scheduled time fired exactly once (a
	// run fired twice never heals, so the wait hides nothing).
	to := time.Now().Add(time.Second)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if len(nodetest.NotExactlyOnce(t, f.e.PG, f.jobs, f.from, to)) == 0 {
			break
		}
	}
	nodetest.AssertExactlyOnce(t, f.e.PG, f.jobs, f.from, to)
	f.assertAllSucceeded(t, to)
}

func TestEtcdQuorumLostAndRestored(t *testing.T) {
	t.Parallel()
	f := startClusterFiring(t, "quorum", nodetest.LeaseTTL)
	c := f.e.EtcdCluster
	leader := c.Leader()
	down := []int{leader, (leader + 1) % 3}
	for _, i := range down {
		c.Stop(i)
	}
	lost := time.Now()
	time.Sleep(12 * time.Second)
	if err := c.Start(down...); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	nodetest.WaitFor(t, 30*time.Second, "every bucket owned again", func() bool {
		o := nodetest.Owners(t, f.cli)
		return o["a"]+o["b"] == nodetest.Buckets
	})
	t.Logf("etcd quorum lost for %s; every bucket owned again %s after it was restored",
		restored.Sub(lost).Round(time.Millisecond), time.Since(restored).Round(time.Millisecond))
	// The runs due during the outage fire late, up to the missed-run grace
	// after their time (30-41 s under load): wait for them, at most a
	// minute, then check that every scheduled time fired exactly once (a
	// run fired twice never heals, so the wait hides nothing).
	to := time.Now().Add(time.Second)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if len(nodetest.NotExactlyOnce(t, f.e.PG, f.jobs, f.from, to)) == 0 {
			break
		}
	}
	nodetest.AssertExactlyOnce(t, f.e.PG, f.jobs, f.from, to)
	f.assertAllSucceeded(t, to)

	// Without a quorum no lease can be proven alive: once the leases'
	// TTL (and a second's slack) has passed, nothing fires until etcd is
	// back; the runs due meanwhile fire late, within the grace.
	st := nodetest.OpenStore(t, f.e.PG)
	var during int
	var late time.Duration
	if err := st.Pool().QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE created_at >= $2 AND created_at < $3),
		       coalesce(max(created_at - scheduled_for), '0')
		FROM executions WHERE job_id = ANY($1)`,
		f.jobs, lost.Add(nodetest.LeaseTTL+time.Second), restored).Scan(&during, &late); err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Errorf("%d executions fired while etcd had no quorum", during)
	}
	t.Logf("nothing fired from %s after quorum was lost until it was restored; the runs due meanwhile fired at most %s late",
		nodetest.LeaseTTL+time.Second, late.Round(time.Millisecond))
}
