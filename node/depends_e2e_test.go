package node_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// Jobs that wait for jobs, end to end on two tockd processes: a fan-in c
// after a and b (all every second, same_time) and a chain d after b,
// for two minutes (TOCK_DEPENDS_E2E_LONG=1; 50 s in make test) while n1
// is killed and restarted twice and every executor event is recorded
// twice (each published again by the test).
// Every scheduled time of c fires exactly once, only after a and b
// succeeded for it, or is skipped naming a's dead execution; d runs once
// per success of b.
func TestDependentJobsUnderKillsAndRedelivery(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.StartProcess(t, "n1")
	n2 := e.StartProcess(t, "n2")

	// a dies (no retry) at every seventh second; b always succeeds.
	failing := func(at time.Time) bool { return at.Unix()%7 == 3 }
	e.Serve(t, "dep-a", func(_ context.Context, x *executor.Execution) (string, error) {
		if failing(x.ScheduledFor) {
			return "", executor.Permanent(errors.New("import failed"))
		}
		return "imported", nil
	})
	for _, h := range []string{"dep-b", "dep-c", "dep-d"} {
		e.Echo(t, h)
	}

	// Every event an executor sends is sent again, 1.5 s later, under
	// another message id: the recorders record each end twice.
	nc, err := nats.Connect(e.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var replayed atomic.Int64
	sub, err := nc.Subscribe("tock.events.>", func(m *nats.Msg) {
		if m.Header.Get("Test-Replay") != "" {
			return
		}
		again := nats.NewMsg(m.Subject)
		again.Data = append([]byte(nil), m.Data...)
		for k, v := range m.Header {
			if k != nats.MsgIdHdr {
				again.Header[k] = v
			}
		}
		again.Header.Set("Test-Replay", "1")
		replayed.Add(1)
		time.AfterFunc(1500*time.Millisecond, func() { _ = nc.PublishMsg(again) })
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	every := map[string]any{"cron": "* * * * * *"}
	a := n2.CreateJob(t, map[string]any{"name": "a", "schedule": every, "handler": map[string]any{"type": "custom", "name": "dep-a"},
		"retry": map[string]any{"max_attempts": 1}})
	b := n2.CreateJob(t, map[string]any{"name": "b", "schedule": every, "handler": map[string]any{"type": "custom", "name": "dep-b"}})
	c := n2.CreateJob(t, map[string]any{"name": "c", "schedule": every, "handler": map[string]any{"type": "custom", "name": "dep-c"},
		"depends_on": []map[string]any{{"job": "a"}, {"job": "b"}}})
	d := n2.CreateJob(t, map[string]any{"name": "d", "handler": map[string]any{"type": "custom", "name": "dep-d"},
		"depends_on": []map[string]any{{"job": "b"}}})
	// The two minutes with TOCK_DEPENDS_E2E_LONG=1; make test runs
	// a shorter window with the same two kills (the node package's
	// tests run two at a time, and it is the suite's longest).
	window, kills := 50*time.Second, []time.Duration{12 * time.Second, 30 * time.Second}
	if os.Getenv("TOCK_DEPENDS_E2E_LONG") != "" {
		window, kills = 110*time.Second, []time.Duration{20 * time.Second, 60 * time.Second}
	}
	// Far enough ahead that no run of b in the window was fired before
	// its chain d existed: the scanners fire ahead of time, further on a
	// loaded machine (3 s once let b's first 7 runs go without d's).
	from := time.Now().UTC().Add(10 * time.Second).Truncate(time.Second)
	to := from.Add(window)

	// n1 killed twice, back 3 s later each time.
	for _, at := range kills {
		time.Sleep(time.Until(from.Add(at)))
		n1.Kill(t)
		t.Logf("n1 killed at +%s", at)
		time.Sleep(3 * time.Second)
		n1 = e.StartProcess(t, "n1")
	}
	time.Sleep(time.Until(to.Add(2 * time.Second)))
	st := nodetest.OpenStore(t, e.PG)
	ctx := context.Background()
	// Every time of c and d up to `to` decided: none waiting, none queued.
	nodetest.WaitFor(t, 60*time.Second, "c's and d's runs to be decided and run", func() bool {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM executions WHERE job_id = ANY($1) AND scheduled_for <= $2
			AND state NOT IN ('succeeded', 'dead', 'cancelled')`, []uuid.UUID{a.Id, b.Id, c.Id, d.Id}, to).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	nodetest.AssertExactlyOnce(t, e.PG, []uuid.UUID{a.Id, b.Id}, from, to)

	type run struct {
		id       uuid.UUID
		state    string
		started  *time.Time
		finished *time.Time
	}
	runs := func(job uuid.UUID) map[int64]run {
		rows, err := st.Pool().Query(ctx, `SELECT scheduled_for, id, state, started_at, finished_at FROM executions
			WHERE job_id = $1 AND scheduled_for BETWEEN $2 AND $3`, job, from, to)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]run{}
		for rows.Next() {
			var at time.Time
			var r run
			if err := rows.Scan(&at, &r.id, &r.state, &r.started, &r.finished); err != nil {
				t.Fatal(err)
			}
			out[at.Unix()] = r
		}
		return out
	}
	skips := func(job uuid.UUID) map[int64]string {
		rows, err := st.Pool().Query(ctx, `SELECT first_at, runs, reason || ': ' || detail FROM skipped_runs
			WHERE job_id = $1 AND first_at BETWEEN $2 AND $3`, job, from, to)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]string{}
		for rows.Next() {
			var at time.Time
			var n int
			var why string
			if err := rows.Scan(&at, &n, &why); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("a skipped range of %d times at %s", n, at)
			}
			out[at.Unix()] = why
		}
		return out
	}
	ra, rb, rc, rd := runs(a.Id), runs(b.Id), runs(c.Id), runs(d.Id)
	sc, sd := skips(c.Id), skips(d.Id)
	ran, skipped, chained := 0, 0, 0
	for at := from; !at.After(to); at = at.Add(time.Second) {
		xa, xb := ra[at.Unix()], rb[at.Unix()]
		x, hasX := rc[at.Unix()]
		why, hasSkip := sc[at.Unix()]
		switch {
		case hasX == hasSkip:
			t.Errorf("c at %s: execution %v, skip %v: want exactly one", at.Format(time.TimeOnly), hasX, hasSkip)
		case hasX:
			ran++
			if x.state != "succeeded" || xa.state != "succeeded" || xb.state != "succeeded" {
				t.Errorf("c at %s ran (%s) with a %s and b %s", at.Format(time.TimeOnly), x.state, xa.state, xb.state)
				continue
			}
			if x.started.Before(*xa.finished) || x.started.Before(*xb.finished) {
				t.Errorf("c at %s started %s, before a ended %s or b %s", at.Format(time.TimeOnly), x.started, xa.finished, xb.finished)
			}
			ups, err := st.ListExecutionUpstreams(ctx, x.id)
			if err != nil || len(ups) != 2 {
				t.Errorf("c at %s: upstreams %+v, %v", at.Format(time.TimeOnly), ups, err)
			}
		default:
			skipped++
			if !failing(at) || xa.state != "dead" || !strings.Contains(why, "dependency: ") || !strings.Contains(why, xa.id.String()) {
				t.Errorf("c at %s skipped (%s), a %s", at.Format(time.TimeOnly), why, xa.state)
			}
		}
		// d, the chain after b: one run per success of b.
		if xd, ok := rd[at.Unix()]; ok {
			chained++
			if xb.state != "succeeded" || xd.state != "succeeded" {
				t.Errorf("d at %s: %s after b %s", at.Format(time.TimeOnly), xd.state, xb.state)
			}
		} else if _, ok := sd[at.Unix()]; !ok && xb.state == "succeeded" {
			t.Errorf("d at %s: no run after b succeeded", at.Format(time.TimeOnly))
		}
	}
	t.Logf("c: %d times ran, %d skipped after a died; d (chain): %d runs; %d events recorded twice", ran, skipped, chained, replayed.Load())
	if skipped == 0 || ran < int(window.Seconds())*7/10 {
		t.Errorf("c ran %d times and skipped %d: the test did not see both", ran, skipped)
	}
}
