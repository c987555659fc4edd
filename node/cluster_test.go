package node_test

// Several tockd processes sharing the buckets, and what happens when one
// of them dies, freezes, leaves, or loses etcd: every scheduled time of
// every job must still fire exactly once.

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/node/nodetest"
)

// testTTL is the harness's lease TTL: how long a dead node keeps its
// buckets.
const testTTL = nodetest.LeaseTTL

// twoNodes starts nodes a and b as processes and waits until they share
// the buckets and the jobs fire.
func twoNodes(t *testing.T, e *nodetest.Env, cli *clientv3.Client) (a, b *nodetest.Node) {
	t.Helper()
	a = e.StartProcess(t, "a")
	b = e.StartProcess(t, "b")
	nodetest.WaitFor(t, 20*time.Second, "a and b to share the buckets", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	return a, b
}

// twoNodesFiring is the start of every test here: nodes a and b sharing
// the buckets, an executor for handler, 40 every-second jobs, and 3 s of
// firing. from is where the exactly-once window starts.
type firing struct {
	e    *nodetest.Env
	cli  *clientv3.Client
	a, b *nodetest.Node
	jobs []uuid.UUID
	from time.Time
}

func twoNodesFiring(t *testing.T, handler string) firing {
	t.Helper()
	e := nodetest.New(t)
	cli := e.EtcdClient(t)
	a, b := twoNodes(t, e, cli)
	e.Echo(t, handler)
	f := firing{e: e, cli: cli, a: a, b: b}
	f.jobs = a.EverySecondJobs(t, handler, 40)
	f.from = time.Now().Add(2 * time.Second)
	time.Sleep(3 * time.Second)
	return f
}

func TestCrashedNodesBucketsAreTakenOverAndKeepFiring(t *testing.T) {
	t.Parallel()
	f := twoNodesFiring(t, "crash")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a.Cmd

	killed := time.Now()
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	nodetest.WaitFor(t, testTTL+5*time.Second, "b to own every bucket", func() bool { return nodetest.Owners(t, cli)["b"] == 16 })
	failover := time.Since(killed)
	t.Logf("failover after kill -9: every bucket owned again %s after the kill (lease TTL %s)", failover.Round(time.Millisecond), testTTL)
	if failover > testTTL+2*time.Second {
		t.Errorf("failover took %s, want within TTL + 2s = %s", failover, testTTL+2*time.Second)
	}
	time.Sleep(3 * time.Second)
	nodetest.AssertExactlyOnce(t, e.PG, jobs, from, time.Now().Add(-2*time.Second))
}

func TestFrozenNodeFiresNothingInBucketsItLost(t *testing.T) {
	t.Parallel()
	f := twoNodesFiring(t, "pause")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a.Cmd

	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, testTTL+5*time.Second, "b to take a's buckets", func() bool { return nodetest.Owners(t, cli)["b"] == 16 })
	time.Sleep(2 * time.Second) // b fires a's buckets for a while
	resumed := time.Now()
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 15*time.Second, "a to rejoin and own buckets again", func() bool { return nodetest.Owners(t, cli)["a"] > 0 })
	time.Sleep(3 * time.Second)

	// Until a claimed buckets anew, it must not have fired anywhere: its
	// old ownerships are fenced and its lease deadline passed while frozen.
	st := nodetest.OpenStore(t, e.PG)
	var reclaimed time.Time
	if err := st.Pool().QueryRow(context.Background(),
		"SELECT min(claimed_at) FROM bucket_owners WHERE node = 'a' AND claimed_at >= $1", resumed).Scan(&reclaimed); err != nil {
		t.Fatal(err)
	}
	var stale int
	if err := st.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM executions WHERE fired_by = 'a' AND created_at >= $1 AND created_at < $2",
		resumed, reclaimed).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Errorf("a fired %d executions after waking up and before rejoining", stale)
	}
	t.Logf("a woke at %s and claimed buckets again at %s (%s later)", resumed.UTC().Format("15:04:05.000"),
		reclaimed.UTC().Format("15:04:05.000"), reclaimed.Sub(resumed).Round(time.Millisecond))
	nodetest.AssertExactlyOnce(t, e.PG, jobs, from, time.Now().Add(-2*time.Second))
}

func TestEtcdOutageNeitherDoublesNorLosesFirings(t *testing.T) {
	t.Parallel()
	f := twoNodesFiring(t, "outage")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from

	e.Etcd.Stop()
	time.Sleep(2*testTTL + time.Second)
	if err := e.Etcd.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	nodetest.WaitFor(t, 20*time.Second, "every bucket owned again", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"]+o["b"] == 16
	})
	t.Logf("after etcd came back, all buckets were owned again in %s", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	nodetest.AssertExactlyOnce(t, e.PG, jobs, from, time.Now().Add(-2*time.Second))
}

func TestGracefulLeaveMissesNothing(t *testing.T) {
	t.Parallel()
	f := twoNodesFiring(t, "leave")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a.Cmd
	baseB := f.b.URL

	left := time.Now()
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Errorf("a did not exit cleanly on SIGTERM: %v", err)
	}
	nodetest.WaitFor(t, 5*time.Second, "b to own every bucket", func() bool { return nodetest.Owners(t, cli)["b"] == 16 })
	t.Logf("graceful leave: a exited and b owned every bucket %s after SIGTERM", time.Since(left).Round(time.Millisecond))
	if resp, err := http.Get(baseB + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("b not ready after a left: %v", err)
	}
	time.Sleep(3 * time.Second)
	nodetest.AssertExactlyOnce(t, e.PG, jobs, from, time.Now().Add(-2*time.Second))
}

// sortedKeys is for stable log lines.
func sortedKeys(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}
