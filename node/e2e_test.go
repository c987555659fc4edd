package node_test

// End-to-end tests: real PostgreSQL, embedded etcd and NATS JetStream,
// tockd in-process or as a child process, driven through the REST API only
// (plus the custom-executor SDK, as a user would run it).

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/node/nodetest"
)

func TestEveryCronSecondRunsOnACustomExecutor(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	seen := e.Echo(t, "e2e-echo")

	j := n.CreateJob(t, map[string]any{
		"name":     "every-second",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "e2e-echo"},
		"payload":  map[string]any{"hello": "world"},
	})
	var xs []models.Execution
	nodetest.WaitFor(t, 20*time.Second, "3 succeeded executions", func() bool {
		xs = nodetest.Succeeded(n.Executions(t, j.Id))
		return len(xs) >= 3
	})
	sort.Slice(xs, func(a, b int) bool { return xs[a].ScheduledFor.Before(xs[b].ScheduledFor) })
	for i, x := range xs {
		if x.ScheduledFor.Nanosecond() != 0 {
			t.Errorf("execution %s scheduled at %s, not on a whole second", x.Id, x.ScheduledFor)
		}
		if i > 0 && x.ScheduledFor.Sub(xs[i-1].ScheduledFor) != time.Second {
			t.Errorf("executions %d and %d are %s apart, want 1s", i-1, i, x.ScheduledFor.Sub(xs[i-1].ScheduledFor))
		}
		if x.DispatchedAt == nil || x.StartedAt == nil || x.FinishedAt == nil {
			t.Fatalf("execution %s lacks times: %+v", x.Id, x)
		}
		if nodetest.Str(x.Output) != "done "+x.Id.String() || nodetest.Str(x.ExecutorId) != "e2e-e2e-echo" || x.Attempts != 1 || nodetest.Str(x.FiredBy) != "n1" {
			t.Errorf("execution %s: output %q executor %q attempts %d fired by %q", x.Id, nodetest.Str(x.Output), nodetest.Str(x.ExecutorId), x.Attempts, nodetest.Str(x.FiredBy))
		}
		t.Logf("fire lag: scheduled→dispatched %s, scheduled→started %s",
			x.DispatchedAt.Sub(x.ScheduledFor), x.StartedAt.Sub(x.ScheduledFor))
	}
	// --pprof serves the profiler beside the API.
	if resp, err := http.Get(n.URL + "/debug/pprof/cmdline"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /debug/pprof/cmdline: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	if one := n.Execution(t, xs[0].Id); one.State != "succeeded" {
		t.Fatalf("GET execution: %+v", one)
	}
	if len(seen()) < 3 {
		t.Fatalf("executor saw %d executions", len(seen()))
	}

	// The node's member key and its bucket owner keys, as etcdctl shows them.
	cli := e.EtcdClient(t)
	resp, err := cli.Get(context.Background(), "/tock/e2e/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	owners, member := 0, false
	for _, kv := range resp.Kvs {
		switch {
		case string(kv.Key) == "/tock/e2e/members/n1":
			member = true
		case strings.HasPrefix(string(kv.Key), "/tock/e2e/owners/") && string(kv.Value) == "n1":
			owners++
		}
	}
	if !member || owners != 16 {
		t.Fatalf("etcd: member key %v, owner keys %d (want true, 16)", member, owners)
	}
}

func TestHTTPJobGetsPayloadAndExecutionID(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	type hit struct {
		body   string
		idem   string
		header string
	}
	hits := make(chan hit, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- hit{string(b), r.Header.Get("Idempotency-Key"), r.Header.Get("Tock-Execution-Id")}
		_, _ = w.Write([]byte("thanks"))
	}))
	defer target.Close()

	j := n.CreateJob(t, map[string]any{
		"name":     "hook",
		"schedule": map[string]any{"in": "1s"},
		"handler":  map[string]any{"type": "http", "url": target.URL + "/hook", "method": "POST"},
		"payload":  map[string]any{"order": 42},
	})
	var h hit
	select {
	case h = <-hits:
	case <-time.After(15 * time.Second):
		t.Fatal("the HTTP target was not called")
	}
	if !strings.Contains(h.body, `"order":42`) {
		t.Errorf("target got body %q, want the payload", h.body)
	}
	var xs []models.Execution
	nodetest.WaitFor(t, 10*time.Second, "the execution to succeed", func() bool {
		xs = nodetest.Succeeded(n.Executions(t, j.Id))
		return len(xs) == 1
	})
	if h.idem != xs[0].Id.String() || h.header != xs[0].Id.String() {
		t.Errorf("target got Idempotency-Key %q and Tock-Execution-Id %q, want %s", h.idem, h.header, xs[0].Id)
	}
	if nodetest.Str(xs[0].Output) != "thanks" {
		t.Errorf("output %q, want the response body", nodetest.Str(xs[0].Output))
	}
}

func TestAtJobFiresOnceOnTimeThenCompletes(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	e.Echo(t, "once")
	at := time.Now().Add(2 * time.Second).Truncate(time.Millisecond).UTC()
	j := n.CreateJob(t, map[string]any{
		"name":     "once",
		"schedule": map[string]any{"at": at.Format(time.RFC3339Nano)},
		"handler":  map[string]any{"type": "custom", "name": "once"},
	})
	var xs []models.Execution
	nodetest.WaitFor(t, 15*time.Second, "the execution to succeed", func() bool {
		xs = nodetest.Succeeded(n.Executions(t, j.Id))
		return len(xs) == 1
	})
	x := xs[0]
	if !x.ScheduledFor.Equal(at) {
		t.Errorf("scheduled for %s, want %s", x.ScheduledFor, at)
	}
	if lag := x.DispatchedAt.Sub(at); lag < 0 || lag > time.Second {
		t.Errorf("dispatched %s after its time, want within 1s", lag)
	}
	got := n.Job(t, j.Id)
	if got.State != "completed" || got.NextRunAt != nil {
		t.Errorf("job after firing: state %s next %v, want completed and none", got.State, got.NextRunAt)
	}
	time.Sleep(2 * time.Second)
	if c := len(n.Executions(t, j.Id)); c != 1 {
		t.Errorf("%d executions, want exactly 1", c)
	}
}

func TestPauseResumeRunDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	e.Echo(t, "ctl")
	j := n.CreateJob(t, map[string]any{
		"name":     "ctl",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "ctl"},
	})
	nodetest.WaitFor(t, 15*time.Second, "first execution", func() bool { return len(n.Executions(t, j.Id)) >= 1 })

	if resp, err := n.Client.PauseJobWithResponse(ctx, j.Id); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("pause: %v %v", err, resp.Status())
	}
	time.Sleep(1500 * time.Millisecond) // a firing in flight at pause time may still land
	paused := len(n.Executions(t, j.Id))
	time.Sleep(2500 * time.Millisecond)
	if c := len(n.Executions(t, j.Id)); c != paused {
		t.Fatalf("paused job fired: %d executions, then %d", paused, c)
	}

	run, err := n.Client.RunJobWithResponse(ctx, j.Id, nil)
	if err != nil || run.StatusCode() != http.StatusAccepted {
		t.Fatalf("run: %v %v", err, run.Status())
	}
	x := run.JSON202
	nodetest.WaitFor(t, 10*time.Second, "the manual run to succeed", func() bool {
		got := n.Execution(t, x.Id)
		return got.State == "succeeded" && got.Manual
	})

	if resp, err := n.Client.ResumeJobWithBodyWithResponse(ctx, j.Id, "application/json", nil); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("resume: %v %v", err, resp.Status())
	}
	before := len(n.Executions(t, j.Id))
	nodetest.WaitFor(t, 10*time.Second, "firing after resume", func() bool { return len(n.Executions(t, j.Id)) >= before+2 })

	if resp, err := n.Client.DeleteJobWithResponse(ctx, j.Id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete: %v %v", err, resp.Status())
	}
	time.Sleep(1500 * time.Millisecond)
	after := nodetest.CountExecutions(t, e.PG, j.Id)
	time.Sleep(2500 * time.Millisecond)
	if c := nodetest.CountExecutions(t, e.PG, j.Id); c != after {
		t.Fatalf("deleted job fired: %d executions, then %d", after, c)
	}
}

func TestKillAndRestartNeitherDoublesNorLosesFirings(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.StartProcess(t, "n1")
	seen := e.Echo(t, "kill")
	j := n.CreateJob(t, map[string]any{
		"name":     "survivor",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "kill"},
	})
	nodetest.WaitFor(t, 15*time.Second, "3 executions before the kill", func() bool {
		return len(nodetest.Succeeded(n.Executions(t, j.Id))) >= 3
	})
	n.Kill(t)

	// Leave behind what a node that fired but died before publishing leaves:
	// an execution row in the outbox, fired under the dead node's epoch.
	orphan := nodetest.FireUnpublished(t, e.PG, j.Id)

	n = e.StartProcess(t, "n1")
	nodetest.WaitFor(t, 20*time.Second, "the orphaned execution to be published and run", func() bool {
		return n.Execution(t, orphan).State == "succeeded"
	})
	nodetest.WaitFor(t, 15*time.Second, "3 more executions after the restart", func() bool {
		return len(nodetest.Succeeded(n.Executions(t, j.Id))) >= 8
	})

	xs := n.Executions(t, j.Id)
	bySecond := map[int64]int{}
	var first, last int64
	for _, x := range xs {
		s := x.ScheduledFor.Unix()
		bySecond[s]++
		if first == 0 || s < first {
			first = s
		}
		if s > last {
			last = s
		}
	}
	for s := first; s <= last; s++ {
		if bySecond[s] != 1 {
			t.Errorf("second %s has %d executions, want exactly 1", time.Unix(s, 0).UTC().Format(time.TimeOnly), bySecond[s])
		}
	}
	counts := map[string]int{}
	for _, id := range seen() {
		counts[id]++
	}
	for id, c := range counts {
		if c > 1 {
			t.Logf("execution %s delivered %d times (at-least-once redelivery)", id, c)
		}
	}
}
