package node_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/pgha"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// Postgres goes back in time under every-second jobs: rolled back by 10 s
// (point-in-time recovery to 10 s before the kill), as a promoted
// asynchronous standby or a restore hands tock a database that lost what
// it acknowledged — firings, publish positions, recorded starts and ends.
// tockd carries on against the restored server by itself, and within 2
// minutes nothing is stuck: every execution of the run has ended, and
// every scheduled second of every job has exactly one execution (none
// lost, none fired twice). The executions whose recorded ends were lost
// are rescued (published again), and with one executor process the
// second delivery of an attempt it ran is answered from its journal: no
// handler runs twice. (With several executors, one that did not run it
// runs it again: at-least-once, the price of the lost commits.)
//
// The rescue's bounds are 10 s here; TOCK_RESTORE_DEFAULTS=1 runs it with
// tockd's defaults (docs/operations.md has both figures).
func TestPostgresRolledBackHealsItself(t *testing.T) {
	t.Parallel()
	srv := pgha.StartRestorable(t, "tock")
	e := &nodetest.Env{PG: srv.URL("tock") + "&pool_max_conns=8", Etcd: testenv.Etcd(t), NATS: testenv.NATS(t)}
	var (
		mu         sync.Mutex
		deliveries = map[string]int{}
	)
	e.Worker(t, executor.Config{}, "restore", func(ctx context.Context, x *executor.Execution) (string, error) {
		mu.Lock()
		deliveries[x.ExecutionID]++
		mu.Unlock()
		return "ok", nil
	})
	n := e.StartWith(t, "n1", func(c *node.Config) {
		if os.Getenv("TOCK_RESTORE_DEFAULTS") == "" {
			c.RescueWaitAfter, c.RescueSilentAfter = 10*time.Second, 10*time.Second
		}
	})
	const jobs = 10
	ids := n.EverySecondJobs(t, "restore", jobs)
	time.Sleep(25 * time.Second)
	killed := time.Now()
	srv.RollBack(t, killed.Add(-10*time.Second))
	restored := time.Now()
	t.Logf("rolled back to 10 s before the kill; the server took writes again %v after it", restored.Sub(killed).Round(time.Millisecond))
	time.Sleep(15 * time.Second)
	for _, id := range ids {
		nodetest.Call(t, "POST", n.URL+"/v1/jobs/"+id.String()+"/pause", nil, nil)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL("tock"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var unfinished int
	nodetest.WaitFor(t, 2*time.Minute-time.Since(restored), "every execution ended, 2 minutes after the restore", func() bool {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM executions WHERE state NOT IN ('succeeded', 'dead', 'cancelled')`).Scan(&unfinished)
		return err == nil && unfinished == 0
	})
	t.Logf("nothing unfinished %v after the restore", time.Since(restored).Round(time.Second))

	// Each job: one execution per second from its first to its last, none
	// twice (the key forbids it) and none missing.
	rows, err := conn.Query(ctx, `SELECT job_id, count(*), min(scheduled_for), max(scheduled_for)
		FROM executions GROUP BY job_id`)
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		n          int
		first, end time.Time
	}
	spans, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s span, err error) {
		var id [16]byte
		err = r.Scan(&id, &s.n, &s.first, &s.end)
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != jobs {
		t.Fatalf("%d jobs have executions, want %d", len(spans), jobs)
	}
	for _, s := range spans {
		if want := int(s.end.Sub(s.first)/time.Second) + 1; s.n != want {
			t.Errorf("a job has %d executions from %s to %s, want %d: every second once", s.n,
				s.first.Format(time.TimeOnly), s.end.Format(time.TimeOnly), want)
		}
		if s.end.Before(restored) {
			t.Errorf("a job fired last at %s, before the restore: firing did not resume", s.end.Format(time.TimeOnly))
		}
	}
	var rescued, lost int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'rescued'), count(*) FILTER (WHERE kind = 'lost')
		FROM execution_notes`).Scan(&rescued, &lost); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	twice := 0
	for _, c := range deliveries {
		if c > 1 {
			twice++
		}
	}
	total := len(deliveries)
	mu.Unlock()
	t.Logf("%d executions delivered; %d run more than once (lost commits); rescued %d waiting, %d lost",
		total, twice, rescued, lost)
	// One executor process, rescues within its journal's span: a second
	// delivery of an attempt it ran is answered from its journal, not run.
	if twice != 0 {
		t.Errorf("%d executions run more than once; with one executor and rescues within %s, want none", twice, executor.JournalSpan)
	}
	if rescued == 0 {
		t.Error("no execution was rescued: the roll-back lost no recorded end, so this test proved nothing")
	}
}
