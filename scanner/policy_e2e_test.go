package scanner_test

// Schedule policies end to end: missed runs after the scheduler was
// stopped or a node's buckets failed over, and accounting for every
// scheduled time (fired once, or skipped).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/store"
)

// missedJobs creates an every-second job per missed-run policy (skip,
// latest, all with max 5), each with a grace of 2s, copies of them, and
// returns their ids by policy.
func missedJobs(t *testing.T, n *nodetest.Node, handler string, copies int) map[string][]uuid.UUID {
	t.Helper()
	out := map[string][]uuid.UUID{}
	for _, p := range []string{"skip", "latest", "all"} {
		for i := 0; i < copies; i++ {
			j := n.CreateJob(t, map[string]any{
				"name":     fmt.Sprintf("%s-%s-%d", handler, p, i),
				"schedule": map[string]any{"cron": "* * * * * *"},
				"handler":  map[string]any{"type": "custom", "name": handler},
				"missed":   map[string]any{"policy": p, "grace": "2s", "max": 5},
			})
			out[p] = append(out[p], j.Id)
		}
	}
	return out
}

// accounting is what happened to one job's scheduled times in a window.
type accounting struct {
	// policyFired counts the runs a missed-run decision fired: the
	// executions created in the same transaction as a "missed" skipped
	// range.
	policyFired int
	// skipped counts the scheduled times in "missed" skipped ranges.
	skipped int64
	// bad lists the seconds that were not accounted for exactly once
	// (no execution and no skipped range, or more than one of them).
	bad []string
}

// account checks every second of job's schedule in [from, to]: each has
// exactly one execution or lies in exactly one skipped range.
func account(t *testing.T, pg string, job uuid.UUID, from, to time.Time) accounting {
	t.Helper()
	ctx := context.Background()
	st := nodetest.OpenStore(t, pg)
	var a accounting
	rows, err := st.Pool().Query(ctx, `
		SELECT s.at,
			(SELECT count(*) FROM executions e WHERE e.job_id = $1 AND e.scheduled_for = s.at),
			(SELECT count(*) FROM skipped_runs k WHERE k.job_id = $1 AND s.at BETWEEN k.first_at AND k.last_at)
		FROM generate_series($2::timestamptz, $3::timestamptz, interval '1 second') AS s(at)`,
		job, from.Truncate(time.Second), to.Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var at time.Time
		var execs, skips int
		if err := rows.Scan(&at, &execs, &skips); err != nil {
			t.Fatal(err)
		}
		if execs+skips != 1 {
			a.bad = append(a.bad, fmt.Sprintf("%s: %d executions, %d skipped ranges", at.UTC().Format("15:04:05"), execs, skips))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	err = st.Pool().QueryRow(ctx, `
		SELECT coalesce(sum(k.runs), 0),
			(SELECT count(*) FROM executions e WHERE e.job_id = $1 AND e.created_at IN (
				SELECT date_trunc('milliseconds', k2.recorded_at) FROM skipped_runs k2
				WHERE k2.job_id = $1 AND k2.reason = 'missed'))
		FROM skipped_runs k WHERE k.job_id = $1 AND k.reason = 'missed'`, job).Scan(&a.skipped, &a.policyFired)
	if err != nil {
		t.Fatal(err)
	}
	// Ranges count their seconds right.
	var wrong int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM skipped_runs WHERE job_id = $1
		AND runs <> extract(epoch FROM last_at - first_at)::bigint + 1`, job).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong > 0 {
		a.bad = append(a.bad, fmt.Sprintf("%d skipped ranges whose run count is not their length", wrong))
	}
	return a
}

// checkMissed asserts that each policy's jobs fired as many missed runs
// as it should (skip 0, latest 1, all 5 of max 5), skipped the rest of an
// outage of at least minMissed seconds, and accounted for every second.
func checkMissed(t *testing.T, pg string, jobs map[string][]uuid.UUID, from, to time.Time, minMissed int64) {
	t.Helper()
	want := map[string]int{"skip": 0, "latest": 1, "all": 5}
	for policy, ids := range jobs {
		for _, id := range ids {
			a := account(t, pg, id, from, to)
			for i, b := range a.bad {
				if i == 10 {
					t.Errorf("%s job %s: ... and %d more", policy, id, len(a.bad)-10)
					break
				}
				t.Errorf("%s job %s: %s", policy, id, b)
			}
			if a.policyFired != want[policy] {
				t.Errorf("%s job %s: fired %d missed runs, want %d", policy, id, a.policyFired, want[policy])
			}
			if missed := a.skipped + int64(a.policyFired); missed < minMissed {
				t.Errorf("%s job %s: %d runs missed (%d skipped, %d fired), want at least %d",
					policy, id, missed, a.skipped, a.policyFired, minMissed)
			}
			t.Logf("%s job: %d missed runs fired, %d skipped", policy, a.policyFired, a.skipped)
		}
	}
}

// With the scheduler stopped for 10 s, every-second jobs with skip,
// latest and all (max 5) fire 0, 1 and 5 of the missed seconds when it
// returns; the rest are recorded as skipped and nothing fires twice.
func TestMissedRunsAfterSchedulerStopped(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.StartProcess(t, "n1")
	e.Echo(t, "missed")
	jobs := missedJobs(t, n, "missed", 1)
	from := time.Now().Add(2 * time.Second)
	nodetest.WaitFor(t, 15*time.Second, "the jobs to fire", func() bool {
		return nodetest.CountExecutions(t, e.PG, jobs["all"][0]) >= 3
	})
	n.Kill(t)
	time.Sleep(10 * time.Second)
	n = e.StartProcess(t, "n1")
	time.Sleep(4 * time.Second)
	// Ten seconds down, less the grace: at least 7 missed.
	checkMissed(t, e.PG, jobs, from, time.Now().Add(-2*time.Second), 7)

	// The restarted node skipped them all, and counted them.
	var want int64
	for _, ids := range jobs {
		for _, id := range ids {
			want += account(t, e.PG, id, from, time.Now()).skipped
		}
	}
	if got := n.Metric(t, `tock_skipped_total{reason="missed"}`); got != float64(want) {
		t.Errorf("tock_skipped_total{reason=\"missed\"} = %v, want the %d runs recorded as skipped", got, want)
	}
}

// The same when a node is killed and its buckets fail over to the other
// once its lease (TTL 12 s) expires: the jobs in the dead node's buckets apply
// their policies; the other node's jobs miss nothing.
func TestMissedRunsAfterFailover(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	cli := e.EtcdClient(t)
	a := e.StartProcess(t, "a", "--lease-ttl", "12s")
	b := e.StartProcess(t, "b", "--lease-ttl", "12s")
	nodetest.WaitFor(t, 30*time.Second, "a and b to share the buckets", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	e.Echo(t, "failover")
	jobs := missedJobs(t, b, "failover", 3)
	from := time.Now().Add(2 * time.Second)
	time.Sleep(4 * time.Second)

	// Which jobs a fires: their buckets' recorded owner.
	st := nodetest.OpenStore(t, e.PG)
	ofA := map[uuid.UUID]bool{}
	for _, ids := range jobs {
		for _, id := range ids {
			var node string
			if err := st.Pool().QueryRow(context.Background(), `SELECT o.node FROM jobs j
				JOIN bucket_owners o ON o.bucket = j.bucket WHERE j.id = $1`, id).Scan(&node); err != nil {
				t.Fatal(err)
			}
			ofA[id] = node == "a"
		}
	}
	a.Kill(t)
	nodetest.WaitFor(t, 30*time.Second, "b to own every bucket", func() bool { return nodetest.Owners(t, cli)["b"] == 16 })
	time.Sleep(4 * time.Second)
	to := time.Now().Add(-2 * time.Second)

	onA, onB := map[string][]uuid.UUID{}, map[string][]uuid.UUID{}
	for policy, ids := range jobs {
		for _, id := range ids {
			if ofA[id] {
				onA[policy] = append(onA[policy], id)
			} else {
				onB[policy] = append(onB[policy], id)
			}
		}
	}
	if len(onA) == 0 {
		t.Fatal("no job fell in a's buckets")
	}
	// a's lease expires 8 to 12 s after the kill (its last keepalive, sent
	// every TTL/3, may have come just before it), less the 2 s grace: at
	// least 6 missed. (9 failed under load when the keepalive had just
	// gone out: 8 missed.)
	checkMissed(t, e.PG, onA, from, to, 6)
	for policy, ids := range onB {
		for _, id := range ids {
			a := account(t, e.PG, id, from, to)
			if len(a.bad) > 0 || a.skipped > 0 || a.policyFired > 0 {
				t.Errorf("%s job %s on the surviving node: %+v, want every second fired on time", policy, id, a)
			}
		}
	}
}

// span is one attempt of a handler as the executor saw it.
type span struct {
	job        string
	start, end time.Time
	cancelled  bool
}

// runSlowExecutor serves handler with attempts that take d (or end when
// cancelled), and returns what it saw.
func runSlowExecutor(t *testing.T, e *nodetest.Env, handler string, d time.Duration) func() []span {
	t.Helper()
	var mu sync.Mutex
	var seen []span
	e.Serve(t, handler, func(ctx context.Context, x *executor.Execution) (string, error) {
		s := span{job: x.JobID, start: time.Now()}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			s.cancelled = true
		}
		s.end = time.Now()
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		return "slept", ctx.Err()
	})
	return func() []span {
		mu.Lock()
		defer mu.Unlock()
		return append([]span(nil), seen...)
	}
}

// Every-second jobs whose handler takes 3.5 s, one per overlap policy,
// across two nodes, with the node owning the buffer_one job killed in
// the middle: under skip and buffer_one no two attempts of a job
// overlap, under cancel_running every run but the newest is cancelled
// by the next, and every scheduled second is fired once or skipped.
func TestOverlapPoliciesAcrossFailover(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	cli := e.EtcdClient(t)
	a := e.StartProcess(t, "a")
	b := e.StartProcess(t, "b")
	nodes := map[string]*nodetest.Node{"a": a, "b": b}
	nodetest.WaitFor(t, 30*time.Second, "a and b to share the buckets", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	seen := runSlowExecutor(t, e, "slow", 3500*time.Millisecond)
	st := nodetest.OpenStore(t, e.PG)
	jobs := map[string]uuid.UUID{}
	for _, p := range []string{"skip", "buffer_one", "cancel_running"} {
		jobs[p] = b.CreateJob(t, map[string]any{
			"name":     "overlap-" + p,
			"schedule": map[string]any{"cron": "* * * * * *"},
			"handler":  map[string]any{"type": "custom", "name": "slow"},
			"overlap":  p,
		}).Id
	}
	from := time.Now().Add(2 * time.Second)
	time.Sleep(8 * time.Second)
	var owner string
	if err := st.Pool().QueryRow(context.Background(), `SELECT o.node FROM jobs j
		JOIN bucket_owners o ON o.bucket = j.bucket WHERE j.id = $1`, jobs["buffer_one"]).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	survivor := map[string]string{"a": "b", "b": "a"}[owner]
	nodes[owner].Kill(t)
	nodetest.WaitFor(t, 15*time.Second, survivor+" to own every bucket", func() bool { return nodetest.Owners(t, cli)[survivor] == 16 })
	time.Sleep(10 * time.Second)
	to := time.Now().Add(-2 * time.Second)

	for policy, id := range jobs {
		acc := account(t, e.PG, id, from, to)
		for _, bad := range acc.bad {
			t.Errorf("%s: %s", policy, bad)
		}
	}
	spans := map[string][]span{}
	for _, s := range seen() {
		spans[s.job] = append(spans[s.job], s)
	}
	for _, policy := range []string{"skip", "buffer_one"} {
		list := spans[jobs[policy].String()]
		sort.Slice(list, func(i, j int) bool { return list[i].start.Before(list[j].start) })
		for i := 1; i < len(list); i++ {
			if list[i].start.Before(list[i-1].end) {
				t.Errorf("%s: an attempt started at %s while the one of %s ran until %s", policy,
					list[i].start.Format("15:04:05.000"), list[i-1].start.Format("15:04:05.000"), list[i-1].end.Format("15:04:05.000"))
			}
		}
		skipped := skippedFor(t, st, jobs[policy], "overlap")
		// A 3.5 s run every few seconds: at least two seconds skipped
		// for each run.
		if len(list) < 3 || skipped < int64(2*len(list)-4) {
			t.Errorf("%s: %d attempts and %d runs skipped for overlap", policy, len(list), skipped)
		}
		t.Logf("%s: %d attempts, none overlapping; %d runs skipped for overlap", policy, len(list), skipped)
	}
	// cancel_running: every execution but the newest two (the newest
	// runs, the one before may still be being cancelled) was cancelled by
	// a newer run.
	rows, err := st.Pool().Query(context.Background(), `SELECT state, error FROM executions
		WHERE job_id = $1 AND scheduled_for <= $2 ORDER BY scheduled_for DESC OFFSET 2`, jobs["cancel_running"], to)
	if err != nil {
		t.Fatal(err)
	}
	var cancelled, other int
	var state, msg string
	if _, err := pgx.ForEachRow(rows, []any{&state, &msg}, func() error {
		if state == "cancelled" && strings.Contains(msg, "newer run") {
			cancelled++
		} else {
			other++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if cancelled < 10 || other > 0 {
		t.Errorf("cancel_running: %d executions cancelled by a newer run, %d not", cancelled, other)
	}
	// The executors were told: the handlers of cancelled runs stopped
	// early, with their context cancelled.
	stopped := 0
	for _, sp := range spans[jobs["cancel_running"].String()] {
		if sp.cancelled && sp.end.Sub(sp.start) < 3*time.Second {
			stopped++
		}
	}
	if stopped < cancelled/2 {
		t.Errorf("cancel_running: %d of %d cancelled runs' handlers stopped early", stopped, cancelled)
	}
	t.Logf("cancel_running: %d executions, each cancelled by the next", cancelled)
}

// skippedFor counts a job's scheduled times skipped for reason.
func skippedFor(t *testing.T, st *store.Store, job uuid.UUID, reason string) int64 {
	t.Helper()
	var n int64
	if err := st.Pool().QueryRow(context.Background(),
		"SELECT coalesce(sum(runs), 0) FROM skipped_runs WHERE job_id = $1 AND reason = $2", job, reason).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
