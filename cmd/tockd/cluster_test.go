package main

// Several tockd processes sharing the buckets, and what happens when one
// of them dies, freezes, leaves, or loses etcd: every scheduled time of
// every job must still fire exactly once.

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/internal/testenv"
)

const testTTL = 2 * time.Second

func (e *env) etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.etcd.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// owners counts owner keys per node, as etcdctl would show them.
func owners(t *testing.T, cli *clientv3.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/tock/e2e/owners/", clientv3.WithPrefix())
	if err != nil {
		return nil // etcd down: nobody is known to own anything
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		out[string(kv.Value)]++
	}
	return out
}

// everySecondJobs creates n jobs firing every second on handler.
func everySecondJobs(t *testing.T, base, handler string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = createJob(t, base, map[string]any{
			"name":     fmt.Sprintf("%s-%03d", handler, i),
			"schedule": map[string]any{"cron": "* * * * * *"},
			"handler":  map[string]any{"type": "custom", "name": handler},
		}).ID
	}
	return ids
}

// exactlyOnce lists every (job, second) in [from, to] that has no
// execution or more than one.
func exactlyOnce(t *testing.T, pg string, jobs []string, from, to time.Time) []string {
	t.Helper()
	st := openStore(t, pg)
	rows, err := st.Pool().Query(context.Background(), `
		SELECT j.id, s.at, count(e.id)
		FROM unnest($1::uuid[]) AS j(id)
		CROSS JOIN generate_series($2::timestamptz, $3::timestamptz, interval '1 second') AS s(at)
		LEFT JOIN executions e ON e.job_id = j.id AND e.scheduled_for = s.at
		GROUP BY j.id, s.at
		HAVING count(e.id) <> 1
		ORDER BY s.at, j.id`, jobs, from.Truncate(time.Second), to.Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		var n int
		if err := rows.Scan(&id, &at, &n); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, fmt.Sprintf("job %s at %s: %d executions", id, at.UTC().Format("15:04:05"), n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad
}

func assertExactlyOnce(t *testing.T, pg string, jobs []string, from, to time.Time) {
	t.Helper()
	bad := exactlyOnce(t, pg, jobs, from, to)
	for i, b := range bad {
		if i == 20 {
			t.Errorf("... and %d more", len(bad)-20)
			break
		}
		t.Error(b)
	}
	if len(bad) == 0 {
		secs := int(to.Truncate(time.Second).Sub(from.Truncate(time.Second))/time.Second) + 1
		t.Logf("%d jobs × %d seconds (%s to %s): every scheduled time fired exactly once",
			len(jobs), secs, from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"))
	}
}

// twoNodes starts nodes a and b as processes and waits until they share
// the buckets and the jobs fire.
func twoNodes(t *testing.T, e *env, cli *clientv3.Client) (string, *exec.Cmd, string, *exec.Cmd) {
	t.Helper()
	baseA, a := e.startProcess(t, "a")
	baseB, b := e.startProcess(t, "b")
	testenv.WaitFor(t, 20*time.Second, "a and b to share the buckets", func() bool {
		o := owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	return baseA, a, baseB, b
}

// twoNodesFiring is the start of every test here: nodes a and b sharing
// the buckets, an executor for handler, 40 every-second jobs, and 3 s of
// firing. from is where the exactly-once window starts.
type firing struct {
	e           *env
	cli         *clientv3.Client
	base, baseB string
	a           *exec.Cmd
	jobs        []string
	from        time.Time
}

func twoNodesFiring(t *testing.T, handler string) firing {
	t.Helper()
	e := newEnv(t)
	cli := e.etcdClient(t)
	base, a, baseB, _ := twoNodes(t, e, cli)
	e.runExecutor(t, handler)
	f := firing{e: e, cli: cli, base: base, baseB: baseB, a: a}
	f.jobs = everySecondJobs(t, base, handler, 40)
	f.from = time.Now().Add(2 * time.Second)
	time.Sleep(3 * time.Second)
	return f
}

func TestCrashedNodesBucketsAreTakenOverAndKeepFiring(t *testing.T) {
	f := twoNodesFiring(t, "crash")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a

	killed := time.Now()
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	testenv.WaitFor(t, testTTL+5*time.Second, "b to own every bucket", func() bool { return owners(t, cli)["b"] == 16 })
	failover := time.Since(killed)
	t.Logf("failover after kill -9: every bucket owned again %s after the kill (lease TTL %s)", failover.Round(time.Millisecond), testTTL)
	if failover > testTTL+2*time.Second {
		t.Errorf("failover took %s, want within TTL + 2s = %s", failover, testTTL+2*time.Second)
	}
	time.Sleep(3 * time.Second)
	assertExactlyOnce(t, e.pg, jobs, from, time.Now().Add(-2*time.Second))
}

func TestFrozenNodeFiresNothingInBucketsItLost(t *testing.T) {
	f := twoNodesFiring(t, "pause")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a

	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, testTTL+5*time.Second, "b to take a's buckets", func() bool { return owners(t, cli)["b"] == 16 })
	time.Sleep(2 * time.Second) // b fires a's buckets for a while
	resumed := time.Now()
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "a to rejoin and own buckets again", func() bool { return owners(t, cli)["a"] > 0 })
	time.Sleep(3 * time.Second)

	// Until a claimed buckets anew, it must not have fired anywhere: its
	// old ownerships are fenced and its lease deadline passed while frozen.
	st := openStore(t, e.pg)
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
	assertExactlyOnce(t, e.pg, jobs, from, time.Now().Add(-2*time.Second))
}

func TestEtcdOutageNeitherDoublesNorLosesFirings(t *testing.T) {
	f := twoNodesFiring(t, "outage")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from

	e.etcd.Stop()
	time.Sleep(2*testTTL + time.Second)
	if err := e.etcd.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	testenv.WaitFor(t, 20*time.Second, "every bucket owned again", func() bool {
		o := owners(t, cli)
		return o["a"]+o["b"] == 16
	})
	t.Logf("after etcd came back, all buckets were owned again in %s", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	assertExactlyOnce(t, e.pg, jobs, from, time.Now().Add(-2*time.Second))
}

func TestGracefulLeaveMissesNothing(t *testing.T) {
	f := twoNodesFiring(t, "leave")
	e, cli, jobs, from := f.e, f.cli, f.jobs, f.from
	a := f.a
	baseB := f.baseB

	left := time.Now()
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Errorf("a did not exit cleanly on SIGTERM: %v", err)
	}
	testenv.WaitFor(t, 5*time.Second, "b to own every bucket", func() bool { return owners(t, cli)["b"] == 16 })
	t.Logf("graceful leave: a exited and b owned every bucket %s after SIGTERM", time.Since(left).Round(time.Millisecond))
	if resp, err := http.Get(baseB + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("b not ready after a left: %v", err)
	}
	time.Sleep(3 * time.Second)
	assertExactlyOnce(t, e.pg, jobs, from, time.Now().Add(-2*time.Second))
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
