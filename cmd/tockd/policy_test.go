package main

// Schedule policies end to end: missed runs after the scheduler was
// stopped or a node's buckets failed over, and accounting for every
// scheduled time (fired once, or skipped).

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
)

// missedJobs creates an every-second job per missed-run policy (skip,
// latest, all with max 5), each with a grace of 2s, copies of them, and
// returns their ids by policy.
func missedJobs(t *testing.T, base, handler string, copies int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range []string{"skip", "latest", "all"} {
		for i := 0; i < copies; i++ {
			j := createJob(t, base, map[string]any{
				"name":     fmt.Sprintf("%s-%s-%d", handler, p, i),
				"schedule": map[string]any{"cron": "* * * * * *"},
				"handler":  map[string]any{"type": "custom", "name": handler},
				"missed":   map[string]any{"policy": p, "grace": "2s", "max": 5},
			})
			out[p] = append(out[p], j.ID)
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
func account(t *testing.T, pg, job string, from, to time.Time) accounting {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, pg)
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
func checkMissed(t *testing.T, pg string, jobs map[string][]string, from, to time.Time, minMissed int64) {
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
	e := newEnv(t)
	base, proc := e.startProcess(t, "n1")
	e.runExecutor(t, "missed")
	jobs := missedJobs(t, base, "missed", 1)
	from := time.Now().Add(2 * time.Second)
	testenv.WaitFor(t, 15*time.Second, "the jobs to fire", func() bool {
		return countExecutions(t, e.pg, jobs["all"][0]) >= 3
	})
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	time.Sleep(10 * time.Second)
	e.startProcess(t, "n1")
	time.Sleep(4 * time.Second)
	// Ten seconds down, less the grace: at least 7 missed.
	checkMissed(t, e.pg, jobs, from, time.Now().Add(-2*time.Second), 7)
}

// The same when a node is killed and its buckets fail over to the other
// after 12 s (its lease's TTL): the jobs in the dead node's buckets apply
// their policies; the other node's jobs miss nothing.
func TestMissedRunsAfterFailover(t *testing.T) {
	e := newEnv(t)
	cli := e.etcdClient(t)
	_, a := e.startProcess(t, "a", "--lease-ttl", "12s")
	baseB, _ := e.startProcess(t, "b", "--lease-ttl", "12s")
	testenv.WaitFor(t, 30*time.Second, "a and b to share the buckets", func() bool {
		o := owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	e.runExecutor(t, "failover")
	jobs := missedJobs(t, baseB, "failover", 3)
	from := time.Now().Add(2 * time.Second)
	time.Sleep(4 * time.Second)

	// Which jobs a fires: their buckets' recorded owner.
	st := openStore(t, e.pg)
	ofA := map[string]bool{}
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
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	testenv.WaitFor(t, 30*time.Second, "b to own every bucket", func() bool { return owners(t, cli)["b"] == 16 })
	time.Sleep(4 * time.Second)
	to := time.Now().Add(-2 * time.Second)

	onA, onB := map[string][]string{}, map[string][]string{}
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
	// Twelve seconds without an owner, less the grace: at least 9 missed.
	checkMissed(t, e.pg, onA, from, to, 9)
	for policy, ids := range onB {
		for _, id := range ids {
			a := account(t, e.pg, id, from, to)
			if len(a.bad) > 0 || a.skipped > 0 || a.policyFired > 0 {
				t.Errorf("%s job %s on the surviving node: %+v, want every second fired on time", policy, id, a)
			}
		}
	}
}
