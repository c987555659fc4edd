package node_test

// End-to-end tests of execution under failure (retries, error classes,
// timeouts, crashed executors, cancellation, dead letters, priorities,
// circuit breakers), through the REST API with real PostgreSQL and
// embedded etcd and NATS.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/wire"
)

// calls records when a handler was called, per execution.
type calls struct {
	mu sync.Mutex
	at map[string][]time.Time
}

// add records a call of execution id and returns how many it has had.
func (c *calls) add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string][]time.Time{}
	}
	c.at[id] = append(c.at[id], time.Now())
	return len(c.at[id])
}

// of is when execution id was called.
func (c *calls) of(id uuid.UUID) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[id.String()])
}

func TestFailingTwiceThenSucceedingFollowsTheBackoff(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	var seen calls
	e.Worker(t, executor.Config{}, "flaky", func(ctx context.Context, x *executor.Execution) (string, error) {
		if n := seen.add(x.ExecutionID); n <= 2 {
			return "", fmt.Errorf("failure %d", n)
		}
		return "third time lucky", nil
	})
	id := n1.RunOnce(t, map[string]any{
		"name":    "flaky",
		"handler": map[string]any{"type": "custom", "name": "flaky"},
		"retry": map[string]any{"max_attempts": 5, "initial_backoff": "1s", "multiplier": 2,
			"max_backoff": "1m", "jitter": "equal"},
	})
	x := n1.WaitState(t, id, "succeeded", 30*time.Second)
	if x.Attempts != 3 || len(nodetest.Attempts(x)) != 3 || nodetest.Str(x.Output) != "third time lucky" {
		t.Fatalf("execution: attempts %d, list %+v, output %q", x.Attempts, nodetest.Attempts(x), nodetest.Str(x.Output))
	}
	for i, a := range nodetest.Attempts(x) {
		want := "failed"
		if i == 2 {
			want = "succeeded"
		}
		if a.Number != i+1 || nodetest.Str(a.Outcome) != want || nodetest.Str(a.ExecutorId) != "e2e-flaky" || a.StartedAt == nil || a.FinishedAt == nil {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
	}
	if nodetest.Str(nodetest.Attempts(x)[0].Error) != "failure 1" {
		t.Errorf("attempt 1 error %q", nodetest.Str(nodetest.Attempts(x)[0].Error))
	}
	// Equal jitter: the wait before attempt n+1 is in [d/2, d) with d =
	// 1s * 2^(n-1); allow for the trip through Postgres and NATS above.
	at := seen.of(id)
	if len(at) != 3 {
		t.Fatalf("handler called %d times", len(at))
	}
	for n, d := range []time.Duration{time.Second, 2 * time.Second} {
		gap := at[n+1].Sub(at[n])
		t.Logf("gap before attempt %d: %s (policy: [%s, %s))", n+2, gap, d/2, d)
		if gap < d/2-50*time.Millisecond || gap > d+time.Second {
			t.Errorf("gap before attempt %d is %s, want within [%s, %s) plus delivery", n+2, gap, d/2, d)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")

	// A handler that fails permanently: dead after one attempt, despite
	// a policy of five.
	e.Worker(t, executor.Config{}, "broken", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", executor.Permanent(errors.New("malformed payload"))
	})
	retry5 := map[string]any{"max_attempts": 5, "initial_backoff": "10s"}
	perm := n1.RunOnce(t, map[string]any{"name": "broken", "retry": retry5,
		"handler": map[string]any{"type": "custom", "name": "broken"}})

	// HTTP: a 400 is permanent; a 503 with Retry-After: 1 is retried
	// after about a second, although the policy says ten.
	var mu sync.Mutex
	var hits []time.Time
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bad":
			http.Error(w, "no such thing", http.StatusBadRequest)
		case "/busy":
			mu.Lock()
			hits = append(hits, time.Now())
			n := len(hits)
			mu.Unlock()
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer target.Close()
	bad := n1.RunOnce(t, map[string]any{"name": "bad-request", "retry": retry5,
		"handler": map[string]any{"type": "http", "url": target.URL + "/bad"}})
	busy := n1.RunOnce(t, map[string]any{"name": "busy", "retry": retry5,
		"handler": map[string]any{"type": "http", "url": target.URL + "/busy"}})

	for _, id := range []uuid.UUID{perm, bad} {
		x := n1.WaitState(t, id, "dead", 20*time.Second)
		if x.Attempts != 1 || len(nodetest.Attempts(x)) != 1 || nodetest.Str(nodetest.Attempts(x)[0].Outcome) != "failed" {
			t.Errorf("execution %s: attempts %d, %+v", id, x.Attempts, nodetest.Attempts(x))
		}
	}
	x := n1.WaitState(t, busy, "succeeded", 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if x.Attempts != 2 || len(hits) != 2 {
		t.Fatalf("busy: attempts %d, hits %d", x.Attempts, len(hits))
	}
	gap := hits[1].Sub(hits[0])
	t.Logf("Retry-After: 1 → retried after %s", gap)
	if gap < 900*time.Millisecond || gap > 3*time.Second {
		t.Errorf("retried %s after a 503 with Retry-After: 1, want about a second", gap)
	}
}

func TestHangingHandlerIsCutAtItsTimeoutAndRetried(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	var seen calls
	var cut atomic.Bool
	e.Worker(t, executor.Config{}, "hangs", func(ctx context.Context, x *executor.Execution) (string, error) {
		if seen.add(x.ExecutionID) == 1 {
			<-ctx.Done() // hang until the deadline
			cut.Store(errors.Is(ctx.Err(), context.DeadlineExceeded))
			return "", ctx.Err()
		}
		return "quick this time", nil
	})
	id := n1.RunOnce(t, map[string]any{"name": "hangs", "timeout": "500ms",
		"retry":   map[string]any{"max_attempts": 3, "initial_backoff": "100ms"},
		"handler": map[string]any{"type": "custom", "name": "hangs"}})
	x := n1.WaitState(t, id, "succeeded", 20*time.Second)
	if !cut.Load() {
		t.Error("the hanging attempt's context did not end at its deadline")
	}
	if len(nodetest.Attempts(x)) != 2 || nodetest.Str(nodetest.Attempts(x)[0].Outcome) != "timed_out" || nodetest.Str(nodetest.Attempts(x)[1].Outcome) != "succeeded" {
		t.Fatalf("attempts: %+v", nodetest.Attempts(x))
	}
	a := nodetest.Attempts(x)[0]
	if d := a.FinishedAt.Sub(*a.StartedAt); d < 450*time.Millisecond || d > 2*time.Second {
		t.Errorf("the timed-out attempt ran %s, want about 500ms", d)
	}
}

func TestExecutorKilledMidAttemptIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	// The scheduler, API and recorder in this process; two executor
	// processes with a short ack wait, so a dead one's attempt lapses fast.
	n1 := e.StartWith(t, "n1", func(c *node.Config) { c.Roles = node.RolesOf(node.RoleAPI, node.RoleScheduler, node.RoleRecorder) })
	var hits atomic.Int32
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			select { // the first attempt hangs: its executor will die
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, "done")
	}))
	defer target.Close()
	defer close(release)
	procs := map[string]*nodetest.Node{}
	for _, name := range []string{"x1", "x2"} {
		procs[name] = e.StartProcess(t, name, "--roles", "executor", "--executor-ack-wait", "2s")
	}
	id := n1.RunOnce(t, map[string]any{"name": "long", "retry": map[string]any{"max_attempts": 3},
		"handler": map[string]any{"type": "http", "url": target.URL}})
	x := n1.WaitState(t, id, "running", 15*time.Second)
	victim := nodetest.Str(x.ExecutorId)
	p := procs[victim]
	if p == nil {
		t.Fatalf("running on %q, not on one of the executor processes", victim)
	}
	killed := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	x = n1.WaitState(t, id, "succeeded", 30*time.Second)
	t.Logf("finished %s after the kill", time.Since(killed))
	if x.Attempts != 2 || len(nodetest.Attempts(x)) != 2 {
		t.Fatalf("attempts %d: %+v", x.Attempts, nodetest.Attempts(x))
	}
	lost, second := nodetest.Attempts(x)[0], nodetest.Attempts(x)[1]
	if nodetest.Str(lost.Outcome) != "lost" || nodetest.Str(lost.ExecutorId) != victim {
		t.Errorf("attempt 1: %+v, want lost on %s", lost, victim)
	}
	if nodetest.Str(second.Outcome) != "succeeded" || nodetest.Str(second.ExecutorId) == victim || nodetest.Str(second.ExecutorId) == "" {
		t.Errorf("attempt 2: %+v, want succeeded on the other executor", second)
	}
}

func TestCancelRunningAndQueuedExecutions(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	started := make(chan string, 10)
	stopped := make(chan time.Time, 10)
	var seen calls
	e.Worker(t, executor.Config{Concurrency: 1}, "slow", func(ctx context.Context, x *executor.Execution) (string, error) {
		seen.add(x.ExecutionID)
		started <- x.ExecutionID
		<-ctx.Done()
		stopped <- time.Now()
		if !errors.Is(context.Cause(ctx), executor.ErrCancelled) {
			return "", fmt.Errorf("context ended with %v, not cancellation", context.Cause(ctx))
		}
		return "", context.Cause(ctx)
	})
	running := n1.RunOnce(t, map[string]any{"name": "running", "handler": map[string]any{"type": "custom", "name": "slow"}})
	select {
	case got := <-started:
		if got != running.String() {
			t.Fatalf("started %s, want %s", got, running)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first execution never started")
	}
	// The only slot is taken: the second execution waits in the queue.
	queued := n1.RunOnce(t, map[string]any{"name": "queued", "handler": map[string]any{"type": "custom", "name": "slow"}})
	nodetest.WaitFor(t, 30*time.Second, "the second execution published", func() bool { // generous: make test's load
		return n1.Execution(t, queued).DispatchedAt != nil
	})
	if code := nodetest.Code(n1.Client.CancelExecutionWithResponse(context.Background(), queued)); code != http.StatusOK {
		t.Fatalf("cancel queued: %d", code)
	}
	asked := time.Now()
	if code := nodetest.Code(n1.Client.CancelExecutionWithResponse(context.Background(), running)); code != http.StatusOK {
		t.Fatalf("cancel running: %d", code)
	}
	select {
	case at := <-stopped:
		t.Logf("handler stopped %s after the cancel request", at.Sub(asked))
		if at.Sub(asked) > time.Second {
			t.Errorf("handler stopped %s after the cancel, want within 1s", at.Sub(asked))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the running handler was not stopped")
	}
	// The API recorded the cancellation at once; the executor's report of
	// the stopped attempt follows.
	var x models.Execution
	// Wait for its end: its start may be recorded a moment before.
	nodetest.WaitFor(t, 10*time.Second, "the cancelled attempt recorded", func() bool {
		x = n1.Execution(t, running)
		return len(nodetest.Attempts(x)) > 0 && nodetest.Str(nodetest.Attempts(x)[0].Outcome) != ""
	})
	if x.State != "cancelled" || len(nodetest.Attempts(x)) != 1 || nodetest.Str(nodetest.Attempts(x)[0].Outcome) != "cancelled" {
		t.Errorf("running execution: %s, attempts %+v", x.State, nodetest.Attempts(x))
	}
	// The slot is free now; the cancelled queued execution must not use it.
	// A third one shows the executor is pulling again.
	third := n1.RunOnce(t, map[string]any{"name": "third", "handler": map[string]any{"type": "custom", "name": "slow"}})
	select {
	case got := <-started:
		if got != third.String() {
			t.Fatalf("started %s after the cancellations, want only %s", got, third)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third execution never started")
	}
	if n := len(seen.of(queued)); n != 0 {
		t.Errorf("the cancelled queued execution started %d times", n)
	}
	q := n1.Execution(t, queued)
	if q.State != "cancelled" || len(nodetest.Attempts(q)) != 0 {
		t.Errorf("queued execution: %s with attempts %+v", q.State, nodetest.Attempts(q))
	}
	// Cancelling again is harmless.
	for range 2 {
		if code := nodetest.Code(n1.Client.CancelExecutionWithResponse(context.Background(), third)); code != http.StatusOK {
			t.Errorf("cancel of the third execution: %d", code)
		}
	}
}

func TestDeadLettersAndRedrive(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	var healthy atomic.Bool
	var seen calls
	e.Worker(t, executor.Config{}, "picky", func(ctx context.Context, x *executor.Execution) (string, error) {
		seen.add(x.ExecutionID)
		if !healthy.Load() {
			return "", errors.New("downstream is down")
		}
		return fmt.Sprintf("attempt %d ok", x.Attempt), nil
	})
	id := n1.RunOnce(t, map[string]any{"name": "picky", "retry": map[string]any{"max_attempts": 2, "initial_backoff": "100ms"},
		"handler": map[string]any{"type": "custom", "name": "picky"}})
	x := n1.WaitState(t, id, "dead", 20*time.Second)
	if x.Attempts != 2 {
		t.Errorf("dead after %d attempts, want 2", x.Attempts)
	}
	if dead := n1.ExecutionsIn(t, "dead"); len(dead) != 1 || dead[0].Id != id {
		t.Fatalf("dead letters: %+v", dead)
	}

	healthy.Store(true)
	if code := nodetest.Code(n1.Client.RetryExecutionWithResponse(context.Background(), id)); code != http.StatusAccepted {
		t.Fatalf("re-drive: %d", code)
	}
	x = n1.WaitState(t, id, "succeeded", 20*time.Second)
	if x.Attempts != 3 || len(nodetest.Attempts(x)) != 3 || nodetest.Str(nodetest.Attempts(x)[2].Outcome) != "succeeded" || nodetest.Str(x.Output) != "attempt 3 ok" {
		t.Errorf("after re-drive: attempts %d, list %+v, output %q", x.Attempts, nodetest.Attempts(x), nodetest.Str(x.Output))
	}
	if dead := n1.ExecutionsIn(t, "dead"); len(dead) != 0 {
		t.Errorf("dead letters after the re-drive: %+v", dead)
	}
	if code := nodetest.Code(n1.Client.RetryExecutionWithResponse(context.Background(), id)); code != http.StatusConflict {
		t.Errorf("re-drive of a succeeded execution: %d, want 409", code)
	}
}

func TestBackoffFloodDoesNotDelayAHealthyJob(t *testing.T) {
	// Not parallel: its healthy job's lag bound (1s) is about this node
	// alone under a thousand executions in backoff.
	e := nodetest.New(t)
	// Breakers off: this test is about backoff, not about the breaker
	// that would otherwise stop the failing host being tried at all.
	n1 := e.StartWith(t, "n1", func(c *node.Config) { c.Breaker.Disabled = true })
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer failing.Close()
	var mu sync.Mutex
	lags := map[string]time.Duration{}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sched, err := time.Parse(wire.TimeFormat, r.Header.Get(wire.HeaderScheduledFor))
		if err == nil {
			mu.Lock()
			lags[r.Header.Get(wire.HeaderExecutionID)] = time.Since(sched)
			mu.Unlock()
		}
	}))
	defer healthy.Close()

	// A thousand executions fail once and wait out a ten-minute backoff,
	// all on the same queue (http) as the healthy job. The jobs are made
	// in one batch (one request at a time, they took 10 s).
	const flood = 1000
	jobs := make([]map[string]any, flood)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("flood-%04d", i),
			"retry":   map[string]any{"max_attempts": 3, "initial_backoff": "10m", "jitter": "none"},
			"handler": map[string]any{"type": "http", "url": failing.URL}}
	}
	var made models.JobBatchResult
	if code := nodetest.Call(t, http.MethodPost, n1.URL+"/v1/jobs:batch", map[string]any{"jobs": jobs}, &made); code != http.StatusOK || made.Created != flood {
		t.Fatalf("create the flood: status %d, %d jobs created, %d not", code, made.Created, made.Failed)
	}
	nodetest.WaitFor(t, 60*time.Second, "1000 executions waiting out their backoff", func() bool {
		return len(n1.ExecutionsIn(t, "failed")) >= flood
	})
	// None of them holds a JetStream slot.
	nc, err := nats.Connect(e.NATS.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(context.Background(), wire.ExecStream, wire.ConsumerName(domain.HandlerHTTP, domain.PriorityNormal))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("the http consumer holds %d ack-pending and %d pending messages during the backoff", info.NumAckPending, info.NumPending)
	}

	j := n1.CreateJob(t, map[string]any{"name": "healthy", "schedule": map[string]any{"cron": "* * * * * *"},
		"handler": map[string]any{"type": "http", "url": healthy.URL}})
	nodetest.WaitFor(t, 30*time.Second, "ten healthy runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lags) >= 10
	})
	mu.Lock()
	defer mu.Unlock()
	worst := time.Duration(0)
	for id, lag := range lags {
		worst = max(worst, lag)
		if lag > time.Second {
			t.Errorf("healthy execution %s started %s after its time, want under 1s", id, lag)
		}
	}
	t.Logf("healthy job %s: %d runs, worst fire-to-start lag %s, with %d executions in backoff", j.Id, len(lags), worst, flood)
}

func TestHighPriorityRunsFirstWhenSaturated(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	block := make(chan struct{})
	var mu sync.Mutex
	var order []string
	e.Worker(t, executor.Config{Concurrency: 1}, "busy", func(ctx context.Context, x *executor.Execution) (string, error) {
		if x.JobName == "blocker" {
			<-block
			return "", nil
		}
		mu.Lock()
		order = append(order, x.JobName)
		mu.Unlock()
		return "", nil
	})
	handler := map[string]any{"type": "custom", "name": "busy"}
	blocker := n1.RunOnce(t, map[string]any{"name": "blocker", "handler": handler})
	n1.WaitState(t, blocker, "running", 10*time.Second)

	// Queued oldest first: low, then normal, then high.
	var ids []uuid.UUID
	for _, p := range []string{"low", "normal", "high"} {
		for i := range 3 {
			ids = append(ids, n1.RunOnce(t, map[string]any{"name": fmt.Sprintf("%s-%d", p, i), "priority": p, "handler": handler}))
		}
	}
	// Generous: under make test's load (the race detector, the other
	// packages' tests beside these) the outbox took over 10 s once.
	nodetest.WaitFor(t, 30*time.Second, "all nine published", func() bool {
		for _, id := range ids {
			if n1.Execution(t, id).DispatchedAt == nil {
				return false
			}
		}
		return true
	})
	close(block)
	nodetest.WaitFor(t, 20*time.Second, "all nine run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 9
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("start order: %v", order)
	rank := map[byte]int{'h': 0, 'n': 1, 'l': 2}
	for i := 1; i < len(order); i++ {
		if rank[order[i][0]] < rank[order[i-1][0]] {
			t.Errorf("%s started after %s", order[i], order[i-1])
		}
	}
}

func TestBreakerOpensOnAFailingHandlerAndClosesWhenItRecovers(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.StartWith(t, "n1", func(c *node.Config) {
		c.Breaker = executor.BreakerConfig{FailureRate: 0.5, MinRequests: 4, Window: 30 * time.Second, OpenFor: 2 * time.Second}
	})
	var down atomic.Bool
	down.Store(true)
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer target.Close()

	const n = 20
	var ids []uuid.UUID
	for i := range n {
		ids = append(ids, n1.RunOnce(t, map[string]any{"name": fmt.Sprintf("call-%02d", i),
			"retry":   map[string]any{"max_attempts": 50, "initial_backoff": "200ms", "max_backoff": "1s"},
			"handler": map[string]any{"type": "http", "url": target.URL}}))
	}
	breaker := func() string {
		h, err := n1.Client.ListHandlersWithResponse(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.StatusCode() != http.StatusOK {
			t.Fatalf("GET /v1/handlers: %d", h.StatusCode())
		}
		for _, it := range h.JSON200.Items {
			if it.Handler == "http:"+target.Listener.Addr().String() {
				return string(it.Breaker)
			}
		}
		return ""
	}
	nodetest.WaitFor(t, 20*time.Second, "the breaker open", func() bool { return breaker() == "open" })
	// While open, the host is left alone: executions wait, not fail.
	before := hits.Load()
	time.Sleep(time.Second)
	if d := hits.Load() - before; d > 1 {
		t.Errorf("the open breaker let %d requests through in a second", d)
	}
	down.Store(false)
	for _, id := range ids {
		x := n1.WaitState(t, id, "succeeded", 60*time.Second)
		if x.State != "succeeded" {
			t.Errorf("execution %s ended %s", id, x.State)
		}
	}
	nodetest.WaitFor(t, 20*time.Second, "the breaker closed", func() bool { return breaker() == "closed" })
}

func TestDeletingAJobLetsItsRunningExecutionFinish(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.Start(t, "n1")
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var cut atomic.Bool
	e.Worker(t, executor.Config{}, "long", func(ctx context.Context, x *executor.Execution) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "finished anyway", nil
		case <-ctx.Done():
			cut.Store(true)
			return "", ctx.Err()
		}
	})
	j := n1.CreateJob(t, map[string]any{"name": "to-delete", "handler": map[string]any{"type": "custom", "name": "long"}})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the execution never started")
	}
	var id uuid.UUID
	nodetest.WaitFor(t, 10*time.Second, "the execution listed", func() bool {
		if xs := n1.Executions(t, j.Id); len(xs) == 1 {
			id = xs[0].Id
		}
		return id != uuid.Nil
	})
	if code := nodetest.Code(n1.Client.DeleteJobWithResponse(context.Background(), j.Id, nil)); code != http.StatusNoContent {
		t.Fatalf("delete job: %d", code)
	}
	time.Sleep(300 * time.Millisecond) // give a wrong implementation time to cut it
	close(release)
	x := n1.WaitState(t, id, "succeeded", 10*time.Second)
	if cut.Load() || nodetest.Str(x.Output) != "finished anyway" {
		t.Errorf("after the job was deleted: cut %v, execution %+v", cut.Load(), x)
	}
}
