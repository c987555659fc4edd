package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/pgha"
	"github.com/tock-sched/tock/node/nodetest"
)

// chaosClusterSize is the cluster chaos test's size: a short form in
// `make test`, and TOCK_CHAOS_JOBS / TOCK_CHAOS_DURATION for `make
// chaos-cluster` (30 minutes for the figures in docs/operations.md).
func chaosClusterSize() (jobs int, d time.Duration) {
	return chaosEnvSize(30, 75*time.Second)
}

// fault is one fault the cluster chaos test injected: what, and when it
// began and ended (everything it took down was back).
type fault struct {
	kind       string
	start, end time.Time
}

// clusterChaos is the state of the cluster chaos test: the parts, which
// are down, and the faults so far.
type clusterChaos struct {
	// args are every tockd node's extra flags; async says the Postgres
	// standby replicates asynchronously.
	args   []string
	async  bool
	t      *testing.T
	rng    *rand.Rand
	e      *nodetest.Env
	pg     *pgha.Cluster
	nodes  []*chaosNode
	faults []fault
	// etcdDown and natsDown are the members and servers down now;
	// pgDown the Patroni member killed, until it is restarted.
	etcdDown, natsDown map[int]time.Time
	pgDown             *pgha.Member
	pgUntil            time.Time
	open               map[string]time.Time // fault kind+target → its start, while it lasts
	drawn              int                  // faults drawn so far
}

// TestChaosClusterEverythingFails is `make chaos-cluster` (issue 22): on
// this one machine, 3 tockd processes, a 3-member etcd, a 3-server NATS
// cluster with streams of 3 replicas, and a Patroni-managed Postgres
// primary with a synchronous standby on that etcd. For the test's length
// it injects, at random: kill -9, SIGSTOP and SIGTERM of any tockd node,
// the stop of any etcd member or NATS server (never two at once), a kill
// -9 of the Postgres primary (Patroni fails over to the standby), and
// once a loss of etcd's quorum for 20 s. It records a history and checks
// it: every scheduled time of every job ran exactly once or was recorded
// as skipped by its policy; every execution finished within 30 s of the
// end of the faults it saw (those active between its scheduled time and
// its finish); the API (any node) answered; and it reports
// fire lag p99 outside the faults.
func TestChaosClusterEverythingFails(t *testing.T) {
	nJobs, duration := chaosClusterSize()
	seed := uint64(time.Now().UnixNano())
	t.Logf("cluster chaos: %d jobs every second, %s (seed %d)", nJobs, duration, seed)

	e := nodetest.NewClusters(t)
	// TOCK_CHAOS_PG_ASYNC=1: the standby replicates asynchronously, to
	// show what the synchronous one buys.
	async := os.Getenv("TOCK_CHAOS_PG_ASYNC") != ""
	pg := pgha.Test(t, pgha.Config{Etcd: strings.Join(e.EtcdEndpoints(), ","), TTL: 6, Async: async})
	t.Logf("Postgres: a primary and a standby replicating %s", map[bool]string{false: "synchronously", true: "asynchronously"}[async])
	ctx, cancel := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancel()
	createDatabase(t, ctx, pg.URL("postgres"), "tock")
	e.PG = pg.URL("tock") + "&pool_max_conns=8"

	c := &clusterChaos{t: t, rng: rand.New(rand.NewPCG(seed, seed>>1)), e: e, pg: pg,
		etcdDown: map[int]time.Time{}, natsDown: map[int]time.Time{}, open: map[string]time.Time{},
		args: []string{"--stream-replicas", "3"}, async: async}
	// With an asynchronous standby a failover loses commits: the rescue
	// of stuck executions heals what it leaves waiting, here within 15 s
	// (tockd's default is a minute; the JetStream check keeps a short
	// bound safe), and catching up after a fault may take that long more.
	catchUp := 30 * time.Second
	if async {
		c.args = append(c.args, "--rescue-wait-after", "15s", "--rescue-silent-after", "15s")
		catchUp += 30 * time.Second
	}
	cli := e.EtcdClient(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.nodes = append(c.nodes, &chaosNode{id: id, proc: e.StartProcess(t, id, c.args...), state: "running"})
	}
	nodetest.WaitFor(t, 60*time.Second, "3 nodes to share the buckets", func() bool { return len(nodetest.Owners(t, cli)) == 3 })

	seen := &deliveries{first: map[string]int{}, total: map[string]int{}}
	e.Serve(t, "chaos", seen.handle)
	jobs := createJobsConcurrently(t, c.nodes[0].proc, "chaos", nJobs)
	start := time.Now()
	api := c.watchAPI(ctx)

	end := start.Add(duration)
	quorumAt := start.Add(duration / 2)
	quorumDone := false
	for time.Now().Before(end) {
		time.Sleep(time.Duration(3000+c.rng.IntN(3000)) * time.Millisecond)
		c.heal(time.Now())
		if !quorumDone && time.Now().After(quorumAt) && len(c.etcdDown) == 0 && (!c.async || c.pgHealthy()) {
			c.loseQuorum(20 * time.Second)
			quorumDone = true
			continue
		}
		c.inject()
	}
	c.healAll()
	chaosEnd := time.Now()
	api.stop()
	kinds := map[string]int{}
	for _, f := range c.faults {
		kinds[f.kind]++
	}
	t.Logf("faults: %s", sortedKeys(kinds))
	nodetest.WaitFor(t, 60*time.Second, "3 nodes to share the buckets again", func() bool {
		o := nodetest.Owners(t, cli)
		return len(o) == 3 && o["n1"]+o["n2"]+o["n3"] == nodetest.Buckets
	})
	time.Sleep(5 * time.Second)
	to := chaosEnd.Add(2 * time.Second)
	from := start.Add(10 * time.Second)

	// Every scheduled time: exactly one execution, or none and skipped.
	st := nodetest.OpenStore(t, e.PG)
	var checked, twice, missed, skipped int
	if err := st.Pool().QueryRow(ctx, `
		WITH s AS (
			SELECT j.id, s.at, count(e.id) AS n,
				EXISTS (SELECT 1 FROM skipped_runs k WHERE k.job_id = j.id AND s.at BETWEEN k.first_at AND k.last_at) AS skipped
			FROM unnest($1::uuid[]) AS j(id)
			CROSS JOIN generate_series($2::timestamptz, $3::timestamptz, interval '1 second') AS s(at)
			LEFT JOIN executions e ON e.job_id = j.id AND e.scheduled_for = s.at
			GROUP BY j.id, s.at)
		SELECT count(*), count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE n = 0 AND NOT skipped),
			count(*) FILTER (WHERE n = 0 AND skipped)
		FROM s`, jobs, from.Truncate(time.Second), to.Truncate(time.Second)).Scan(&checked, &twice, &missed, &skipped); err != nil {
		t.Fatal(err)
	}
	t.Logf("scheduled times checked: %d; fired twice: %d; missed: %d; skipped by policy: %d", checked, twice, missed, skipped)
	if twice > 0 || missed > 0 {
		nodetest.AssertExactlyOnce(t, e.PG, jobs, from, to) // lists them
	}

	// Every execution of the window finished, and within 30 s of the end
	// of every fault before it was scheduled.
	unfinished := func() int {
		var n int
		_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM executions WHERE job_id = ANY($1)
			AND scheduled_for BETWEEN $2 AND $3 AND finished_at IS NULL`, jobs, from, to).Scan(&n)
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); unfinished() > 0 && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
	}
	if n := unfinished(); n > 0 {
		// Say which, and in what state: an asynchronous standby can lose
		// a committed firing or recording (docs/postgres.md).
		rows, err := st.Pool().Query(ctx, `SELECT id, job_id, scheduled_for, state, attempts, dispatches,
				dispatched_at IS NOT NULL, started_at IS NOT NULL FROM executions
			WHERE job_id = ANY($1) AND scheduled_for BETWEEN $2 AND $3 AND finished_at IS NULL
			ORDER BY scheduled_for LIMIT 20`, jobs, from, to)
		if err == nil {
			for rows.Next() {
				var (
					id, job              uuid.UUID
					at                   time.Time
					state                string
					attempts, dispatches int
					dispatched, started  bool
				)
				if rows.Scan(&id, &job, &at, &state, &attempts, &dispatches, &dispatched, &started) == nil {
					t.Logf("unfinished: execution %s of job %s at %s: %s, %d attempts, %d dispatches, dispatched %v, started %v",
						id, job, at.Format(time.RFC3339), state, attempts, dispatches, dispatched, started)
				}
			}
			rows.Close()
		}
		t.Fatalf("%d executions of the window unfinished 60 s after it", n)
	}
	// Catch-up: how long after the faults it saw each execution finished.
	// An execution scheduled at s and finished at f saw the faults active
	// in [s, f]; it is late by f minus the later of s and the last moment
	// of those faults (faults overlap: one scheduled in a SIGSTOP and kept
	// waiting by a quorum loss that began as the SIGSTOP ended counts from
	// the quorum's return, not from the SIGCONT).
	rows, err := st.Pool().Query(ctx, `SELECT id, scheduled_for, finished_at FROM executions
		WHERE job_id = ANY($1) AND scheduled_for BETWEEN $2 AND $3`, jobs, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var (
		worst, slowest time.Duration
		worstExec      string
		worstAt        time.Time
	)
	for rows.Next() {
		var (
			id     uuid.UUID
			at, fi time.Time
		)
		if err := rows.Scan(&id, &at, &fi); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, fi.Sub(at))
		if d := fi.Sub(c.healthySince(at, fi)); d > worst {
			worst, worstExec, worstAt = d, id.String(), at
		}
	}
	rows.Close()
	t.Logf("worst catch-up after the faults an execution saw: %s (execution %s scheduled at +%s); slowest from scheduled to finished: %s",
		worst.Round(100*time.Millisecond), worstExec, worstAt.Sub(start).Round(100*time.Millisecond), slowest.Round(100*time.Millisecond))
	if worst > catchUp {
		c.logFaults(start)
		t.Errorf("an execution finished %s after the end of the faults it saw; want within %s", worst, catchUp)
	}

	// Fire lag outside the faults: scheduled neither during a fault nor in
	// the 5 s after one ended.
	var lags []time.Duration
	rows, err = st.Pool().Query(ctx, `SELECT scheduled_for, dispatched_at FROM executions
		WHERE job_id = ANY($1) AND scheduled_for BETWEEN $2 AND $3 AND dispatched_at IS NOT NULL`, jobs, from, to)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at, disp time.Time
		if err := rows.Scan(&at, &disp); err != nil {
			t.Fatal(err)
		}
		// Clear of every fault by 10 s: the catch-up after one (etcd's
		// quorum back, a Postgres failover) takes up to 10 s under make
		// test's load (the "worst catch-up" above); a 5-s margin counted
		// that catch-up as steady state and once put p99 at 6 s.
		if !c.nearFault(at, 10*time.Second) {
			lags = append(lags, disp.Sub(at))
		}
	}
	rows.Close()
	if len(lags) > 0 {
		slices.Sort(lags)
		p99 := lags[len(lags)*99/100]
		t.Logf("fire lag outside faults: p99 %s over %d executions", p99.Round(time.Millisecond), len(lags))
		if p99 > 5*time.Second {
			t.Errorf("fire lag p99 outside faults %s; want under 2s (5s allowed on a loaded machine)", p99)
		}
	} else {
		t.Logf("fire lag outside faults: no execution was scheduled 10 s clear of every fault")
	}
	// The API needs Postgres: while the primary fails over, it answers
	// 503. Elsewhere a balancer in front of the nodes finds one that
	// answers.
	pgFault := func(from, to time.Time) bool {
		for _, f := range c.faults {
			if strings.HasPrefix(f.kind, "Postgres") && f.start.Before(to) && from.Before(f.end.Add(3*time.Second)) {
				return true
			}
		}
		return false
	}
	worstAPI, worstOther := api.worst(func(time.Time, time.Time) bool { return true }), api.worst(func(from, to time.Time) bool { return !pgFault(from, to) })
	t.Logf("API: worst 10 s window %.1f%% 2xx; worst without a Postgres failover in it %.1f%% (%s)", 100*worstAPI, 100*worstOther, api.summary())
	if worstOther < 0.9 {
		t.Errorf("the API answered 2xx to %.0f%% of requests in its worst 10 s window without a Postgres failover; want at least 90%%", 100*worstOther)
	}
	var rescued, lost int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'rescued'), count(*) FILTER (WHERE kind = 'lost')
		FROM execution_notes`).Scan(&rescued, &lost); err != nil {
		t.Fatal(err)
	}
	t.Logf("rescued: %d waiting, %d lost", rescued, lost)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	doubles := 0
	for id, n := range seen.first {
		if n <= 1 {
			continue
		}
		doubles++
		if !async {
			t.Errorf("execution %s delivered as attempt 1 %d times", id, n)
			continue
		}
		// Asynchronous replication: a failover may lose the recording
		// of a run, and the run is then delivered again (at-least-once).
		// Each is listed with what tock noted on it.
		var notes []string
		if rows, err := st.Pool().Query(ctx, `SELECT kind || ': ' || note FROM execution_notes
			WHERE execution_id = $1 ORDER BY at`, uuid.MustParse(id)); err == nil {
			notes, _ = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		t.Logf("execution %s delivered as attempt 1 %d times (asynchronous standby); notes %q", id, n, notes)
	}
	t.Logf("executions delivered as attempt 1 more than once: %d of %d", doubles, len(seen.first))
}

// inject starts one fault on a part that is up, chosen at random, that
// keeps at most one etcd member and one NATS server down.
func (c *clusterChaos) inject() {
	now := time.Now()
	last := func(min, span int) time.Time {
		return now.Add(time.Duration(min+c.rng.IntN(span)) * time.Millisecond)
	}
	// The first four faults are one of each kind (a tockd node, an etcd
	// member, a NATS server, the Postgres primary), so that even the
	// short form sees them all; then they are drawn at random.
	k := c.rng.IntN(10)
	if c.drawn < 4 {
		k = []int{0, 4, 6, 8}[c.drawn]
	}
	c.drawn++
	switch {
	case k < 4: // a tockd node
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		if n.state != "running" {
			return
		}
		switch c.rng.IntN(3) {
		case 0:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGKILL)
			_ = n.proc.Cmd.Wait()
			n.state, n.until = "down", last(1000, 3000)
			c.begin("tockd kill -9", n.id, now)
		case 1:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGSTOP)
			n.state, n.until = "paused", last(int(nodetest.LeaseTTL/time.Millisecond)+500, 2500)
			c.begin("tockd SIGSTOP", n.id, now)
		default:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGTERM)
			_ = n.proc.Cmd.Wait()
			n.state, n.until = "down", last(1000, 2000)
			c.begin("tockd SIGTERM", n.id, now)
		}
	case k < 6: // an etcd member
		if len(c.etcdDown) > 0 {
			return
		}
		i := c.rng.IntN(len(c.e.EtcdCluster.Members))
		c.e.EtcdCluster.Stop(i)
		c.etcdDown[i] = last(2000, 6000)
		c.begin("etcd member", strconv.Itoa(i), now)
	case k < 8: // a NATS server
		if len(c.natsDown) > 0 {
			return
		}
		i := c.rng.IntN(len(c.e.NATSCluster.Servers))
		c.e.NATSCluster.Stop(i)
		c.natsDown[i] = last(2000, 6000)
		c.begin("NATS server", strconv.Itoa(i), now)
	default: // the Postgres primary
		if c.pgDown != nil {
			return
		}
		// Only with a standby streaming again: the member killed last
		// may still be recovering, and killing the primary then would
		// take both down, which is two faults, not one.
		hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
		healthy := c.pg.WaitHealthy(hctx) == nil
		hcancel()
		if !healthy {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m, err := c.pg.KillPrimary(ctx)
		if err != nil {
			c.t.Logf("kill the Postgres primary: %v", err)
			return
		}
		c.pgDown, c.pgUntil = m, last(8000, 4000)
		c.begin("Postgres primary kill -9 (failover)", m.Name, now)
	}
}

// pgHealthy reports whether both Patroni members are up, one leading and
// the other streaming from it. With an asynchronous standby the quorum
// loss waits for it: with a member down, Patroni's failsafe mode cannot
// reach every member while etcd is gone, so the primary demotes itself,
// which is two faults, not one (seen twice: no primary for more than a
// minute). The synchronous form keeps the quorum loss at halfway: the
// short form in make test, waiting, lost it to the end of its 75 s and
// then found its last seconds not yet fired (e3173f1).
func (c *clusterChaos) pgHealthy() bool {
	if c.pgDown != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.pg.WaitHealthy(ctx) == nil
}

// loseQuorum stops two etcd members for d, then starts them again.
func (c *clusterChaos) loseQuorum(d time.Duration) {
	now := time.Now()
	c.e.EtcdCluster.Stop(1)
	c.e.EtcdCluster.Stop(2)
	time.Sleep(d)
	if err := c.e.EtcdCluster.Start(1, 2); err != nil {
		c.t.Fatalf("etcd members back after the quorum loss: %v", err)
	}
	c.faults = append(c.faults, fault{kind: "etcd quorum lost", start: now, end: time.Now()})
}

// begin records the start of a fault on target.
func (c *clusterChaos) begin(kind, target string, at time.Time) {
	c.open[kind+"\x00"+target] = at
}

// finish records the end of the fault on target.
func (c *clusterChaos) finish(kind, target string) {
	key := kind + "\x00" + target
	c.faults = append(c.faults, fault{kind: kind, start: c.open[key], end: time.Now()})
	delete(c.open, key)
}

// heal brings back what is due to come back by now.
func (c *clusterChaos) heal(now time.Time) {
	if c.async {
		// A tockd node started again waits (up to a minute) until it is
		// ready, which needs a Postgres primary, and Patroni may refuse
		// to promote a lagging asynchronous standby: then only the killed
		// member's return gives one, so it comes back first.
		c.healPostgres(now)
	}
	for _, n := range c.nodes {
		if n.state == "running" || now.Before(n.until) {
			continue
		}
		c.healNode(n)
	}
	for i, until := range c.etcdDown {
		if now.After(until) {
			if err := c.e.EtcdCluster.Start(i); err != nil {
				c.t.Fatalf("etcd member %d back: %v", i, err)
			}
			delete(c.etcdDown, i)
			c.finish("etcd member", strconv.Itoa(i))
		}
	}
	for i, until := range c.natsDown {
		if now.After(until) {
			if err := c.e.NATSCluster.Start(i); err != nil {
				c.t.Fatalf("NATS server %d back: %v", i, err)
			}
			delete(c.natsDown, i)
			c.finish("NATS server", strconv.Itoa(i))
		}
	}
	c.healPostgres(now)
}

// healPostgres restarts the killed Patroni member once it is due back.
func (c *clusterChaos) healPostgres(now time.Time) {
	if c.pgDown != nil && now.After(c.pgUntil) {
		if err := c.pg.Restart(c.pgDown); err != nil {
			c.t.Fatalf("Patroni member %s back: %v", c.pgDown.Name, err)
		}
		c.finish("Postgres primary kill -9 (failover)", c.pgDown.Name)
		c.pgDown = nil
	}
}

func (c *clusterChaos) healNode(n *chaosNode) {
	kind := map[string]string{"paused": "tockd SIGSTOP"}[n.state]
	switch n.state {
	case "paused":
		_ = n.proc.Cmd.Process.Signal(syscall.SIGCONT)
	case "down":
		kind = "tockd kill -9"
		if _, ok := c.open["tockd SIGTERM\x00"+n.id]; ok {
			kind = "tockd SIGTERM"
		}
		// The same address: the API watch, like a load balancer, keeps
		// asking the node where it was.
		n.proc = c.e.StartProcessAt(c.t, n.id, strings.TrimPrefix(n.proc.URL, "http://"), c.args...)
	}
	n.state = "running"
	c.finish(kind, n.id)
}

// healAll brings everything back, whatever its time.
func (c *clusterChaos) healAll() {
	for _, n := range c.nodes {
		n.until = time.Time{}
	}
	for i := range c.etcdDown {
		c.etcdDown[i] = time.Time{}
	}
	for i := range c.natsDown {
		c.natsDown[i] = time.Time{}
	}
	c.pgUntil = time.Time{}
	c.heal(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.pg.WaitHealthy(ctx); err != nil {
		c.t.Fatalf("Patroni cluster healthy again: %v", err)
	}
}

// healthySince returns the later of from and the last moment in [from,
// to] at which a fault was active: an execution scheduled at from and
// finished at to has been catching up since then.
func (c *clusterChaos) healthySince(from, to time.Time) time.Time {
	h := from
	for _, f := range c.faults {
		if f.start.Before(to) && f.end.After(h) {
			h = f.end
			if h.After(to) {
				return to
			}
		}
	}
	return h
}

// logFaults lists the faults, as offsets from the test's start.
func (c *clusterChaos) logFaults(start time.Time) {
	for _, f := range c.faults {
		c.t.Logf("fault %s: +%s to +%s", f.kind, f.start.Sub(start).Round(100*time.Millisecond), f.end.Sub(start).Round(100*time.Millisecond))
	}
}

// nearFault reports whether at falls in a fault, or within after of its
// end.
func (c *clusterChaos) nearFault(at time.Time, after time.Duration) bool {
	for _, f := range c.faults {
		if !at.Before(f.start.Add(-time.Second)) && at.Before(f.end.Add(after)) {
			return true
		}
	}
	return false
}

// apiWatch asks the API, as a load balancer in front of the nodes would
// (the first node that answers), for a page of jobs every 250 ms, and
// counts per 10 s window the share answered 2xx.
type apiWatch struct {
	mu     sync.Mutex
	ok, n  map[int64]int
	failed map[string]int // the answers that were not 2xx: status code, or "no node answered"
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *clusterChaos) watchAPI(ctx context.Context) *apiWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &apiWatch{ok: map[int64]int{}, n: map[int64]int{}, failed: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = n.proc.URL
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			win := time.Now().Unix() / 10
			answer := "no node answered"
			for j := range urls {
				resp, err := hc.Get(urls[(i+j)%len(urls)] + "/v1/jobs?limit=1")
				if err != nil {
					continue // refused or timed out: the balancer tries the next
				}
				resp.Body.Close()
				answer = strconv.Itoa(resp.StatusCode)
				break
			}
			w.mu.Lock()
			w.n[win]++
			if answer[0] == '2' {
				w.ok[win]++
			} else {
				w.failed[answer]++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *apiWatch) stop() { w.cancel(); <-w.done }

// worst is the lowest share of 2xx answers in a 10 s window that counts
// (with at least 10 requests).
func (w *apiWatch) worst(counts func(from, to time.Time) bool) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	worst := 1.0
	for win, n := range w.n {
		from := time.Unix(win*10, 0)
		if n >= 10 && counts(from, from.Add(10*time.Second)) {
			worst = min(worst, float64(w.ok[win])/float64(n))
		}
	}
	return worst
}

func (w *apiWatch) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok, n := 0, 0
	for win := range w.n {
		ok, n = ok+w.ok[win], n+w.n[win]
	}
	return fmt.Sprintf("%d of %d requests 2xx over %d windows; the others: %v", ok, n, len(w.n), w.failed)
}
