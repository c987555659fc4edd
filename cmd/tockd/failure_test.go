package main

// End-to-end tests of execution under failure (retries, error classes,
// timeouts, crashed executors, cancellation, dead letters, priorities,
// circuit breakers), through the REST API with real PostgreSQL and
// embedded etcd and NATS.

import (
	"github.com/tock-sched/tock/domain"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

// attempt is an attempt as GET /v1/executions/{id} shows it.
type attempt struct {
	Number     int        `json:"number"`
	ExecutorID string     `json:"executor_id"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error"`
	Output     string     `json:"output"`
}

// executionDetail is GET /v1/executions/{id}.
type executionDetail struct {
	execution
	Error       string    `json:"error"`
	AttemptList []attempt `json:"attempt_list"`
}

func getExecution(t *testing.T, base, id string) executionDetail {
	t.Helper()
	var x executionDetail
	if code := call(t, "GET", base+"/v1/executions/"+id, nil, &x); code != http.StatusOK {
		t.Fatalf("GET execution %s: status %d", id, code)
	}
	return x
}

// waitState waits until execution id is in state and returns it.
func waitState(t *testing.T, base, id, state string, within time.Duration) executionDetail {
	t.Helper()
	var x executionDetail
	testenv.WaitFor(t, within, "execution "+id+" "+state, func() bool {
		x = getExecution(t, base, id)
		return x.State == state
	})
	return x
}

// runOnce creates a job that runs once, now, and returns its only
// execution's id.
func runOnce(t *testing.T, base string, body map[string]any) string {
	t.Helper()
	j := createJob(t, base, body)
	var id string
	testenv.WaitFor(t, 10*time.Second, "the job's execution", func() bool {
		xs := executions(t, base, j.ID)
		if len(xs) > 0 {
			id = xs[0].ID
		}
		return id != ""
	})
	return id
}

// listExecutions follows every page of an execution listing; url has a
// query already ("...?" at least).
func listExecutions(t *testing.T, url string) []execution {
	t.Helper()
	var all []execution
	cursor := ""
	for {
		var page struct {
			Items      []execution `json:"items"`
			NextCursor string      `json:"next_cursor"`
		}
		u := url + "&limit=500"
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		if code := call(t, "GET", u, nil, &page); code != http.StatusOK {
			t.Fatalf("GET %s: status %d", u, code)
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// worker runs a custom executor with the SDK, as a user's program would.
func (e *env) worker(t *testing.T, cfg executor.Config, handler string, fn executor.Func) {
	t.Helper()
	nc, err := nats.Connect(e.nats.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS = nc
	if cfg.ExecutorID == "" {
		cfg.ExecutorID = "e2e-" + handler
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(handler, fn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		nc.Close()
	})
}

// calls records when a handler was called, per execution.
type calls struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (c *calls) add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string][]time.Time{}
	}
	c.at[id] = append(c.at[id], time.Now())
	return len(c.at[id])
}

func (c *calls) of(id string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[id])
}

func TestFailingTwiceThenSucceedingFollowsTheBackoff(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	var seen calls
	e.worker(t, executor.Config{}, "flaky", func(ctx context.Context, x *executor.Execution) (string, error) {
		if n := seen.add(x.ExecutionID); n <= 2 {
			return "", fmt.Errorf("failure %d", n)
		}
		return "third time lucky", nil
	})
	id := runOnce(t, base, map[string]any{
		"name":    "flaky",
		"handler": map[string]any{"type": "custom", "name": "flaky"},
		"retry": map[string]any{"max_attempts": 5, "initial_backoff": "1s", "multiplier": 2,
			"max_backoff": "1m", "jitter": "equal"},
	})
	x := waitState(t, base, id, "succeeded", 30*time.Second)
	if x.Attempts != 3 || len(x.AttemptList) != 3 || x.Output != "third time lucky" {
		t.Fatalf("execution: attempts %d, list %+v, output %q", x.Attempts, x.AttemptList, x.Output)
	}
	for i, a := range x.AttemptList {
		want := "failed"
		if i == 2 {
			want = "succeeded"
		}
		if a.Number != i+1 || a.Outcome != want || a.ExecutorID != "e2e-flaky" || a.StartedAt == nil || a.FinishedAt == nil {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
	}
	if x.AttemptList[0].Error != "failure 1" {
		t.Errorf("attempt 1 error %q", x.AttemptList[0].Error)
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
	e := newEnv(t)
	base := e.startNode(t, "n1")

	// A handler that fails permanently: dead after one attempt, despite
	// a policy of five.
	e.worker(t, executor.Config{}, "broken", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", executor.Permanent(errors.New("malformed payload"))
	})
	retry5 := map[string]any{"max_attempts": 5, "initial_backoff": "10s"}
	perm := runOnce(t, base, map[string]any{"name": "broken", "retry": retry5,
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
	bad := runOnce(t, base, map[string]any{"name": "bad-request", "retry": retry5,
		"handler": map[string]any{"type": "http", "url": target.URL + "/bad"}})
	busy := runOnce(t, base, map[string]any{"name": "busy", "retry": retry5,
		"handler": map[string]any{"type": "http", "url": target.URL + "/busy"}})

	for _, id := range []string{perm, bad} {
		x := waitState(t, base, id, "dead", 20*time.Second)
		if x.Attempts != 1 || len(x.AttemptList) != 1 || x.AttemptList[0].Outcome != "failed" {
			t.Errorf("execution %s: attempts %d, %+v", id, x.Attempts, x.AttemptList)
		}
	}
	x := waitState(t, base, busy, "succeeded", 20*time.Second)
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
	e := newEnv(t)
	base := e.startNode(t, "n1")
	var seen calls
	var cut atomic.Bool
	e.worker(t, executor.Config{}, "hangs", func(ctx context.Context, x *executor.Execution) (string, error) {
		if seen.add(x.ExecutionID) == 1 {
			<-ctx.Done() // hang until the deadline
			cut.Store(errors.Is(ctx.Err(), context.DeadlineExceeded))
			return "", ctx.Err()
		}
		return "quick this time", nil
	})
	id := runOnce(t, base, map[string]any{"name": "hangs", "timeout": "500ms",
		"retry":   map[string]any{"max_attempts": 3, "initial_backoff": "100ms"},
		"handler": map[string]any{"type": "custom", "name": "hangs"}})
	x := waitState(t, base, id, "succeeded", 20*time.Second)
	if !cut.Load() {
		t.Error("the hanging attempt's context did not end at its deadline")
	}
	if len(x.AttemptList) != 2 || x.AttemptList[0].Outcome != "timed_out" || x.AttemptList[1].Outcome != "succeeded" {
		t.Fatalf("attempts: %+v", x.AttemptList)
	}
	a := x.AttemptList[0]
	if d := a.FinishedAt.Sub(*a.StartedAt); d < 450*time.Millisecond || d > 2*time.Second {
		t.Errorf("the timed-out attempt ran %s, want about 500ms", d)
	}
}

func TestExecutorKilledMidAttemptIsFinishedByAnother(t *testing.T) {
	e := newEnv(t)
	// The scheduler, API and recorder in this process; two executor
	// processes with a short ack wait, so a dead one's attempt lapses fast.
	base := e.startNodeWith(t, "n1", func(c *Config) { delete(c.Roles, RoleExecutor) })
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
	procs := map[string]*exec.Cmd{}
	for _, name := range []string{"x1", "x2"} {
		_, procs[name] = e.startProcess(t, name, "--roles", "executor", "--executor-ack-wait", "2s")
	}
	id := runOnce(t, base, map[string]any{"name": "long", "retry": map[string]any{"max_attempts": 3},
		"handler": map[string]any{"type": "http", "url": target.URL}})
	x := waitState(t, base, id, "running", 15*time.Second)
	victim := x.ExecutorID
	p := procs[victim]
	if p == nil {
		t.Fatalf("running on %q, not on one of the executor processes", victim)
	}
	killed := time.Now()
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	x = waitState(t, base, id, "succeeded", 30*time.Second)
	t.Logf("finished %s after the kill", time.Since(killed))
	if x.Attempts != 2 || len(x.AttemptList) != 2 {
		t.Fatalf("attempts %d: %+v", x.Attempts, x.AttemptList)
	}
	lost, second := x.AttemptList[0], x.AttemptList[1]
	if lost.Outcome != "lost" || lost.ExecutorID != victim {
		t.Errorf("attempt 1: %+v, want lost on %s", lost, victim)
	}
	if second.Outcome != "succeeded" || second.ExecutorID == victim || second.ExecutorID == "" {
		t.Errorf("attempt 2: %+v, want succeeded on the other executor", second)
	}
}

func TestCancelRunningAndQueuedExecutions(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	started := make(chan string, 10)
	stopped := make(chan time.Time, 10)
	var seen calls
	e.worker(t, executor.Config{Concurrency: 1}, "slow", func(ctx context.Context, x *executor.Execution) (string, error) {
		seen.add(x.ExecutionID)
		started <- x.ExecutionID
		<-ctx.Done()
		stopped <- time.Now()
		if !errors.Is(context.Cause(ctx), executor.ErrCancelled) {
			return "", fmt.Errorf("context ended with %v, not cancellation", context.Cause(ctx))
		}
		return "", context.Cause(ctx)
	})
	running := runOnce(t, base, map[string]any{"name": "running", "handler": map[string]any{"type": "custom", "name": "slow"}})
	select {
	case got := <-started:
		if got != running {
			t.Fatalf("started %s, want %s", got, running)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first execution never started")
	}
	// The only slot is taken: the second execution waits in the queue.
	queued := runOnce(t, base, map[string]any{"name": "queued", "handler": map[string]any{"type": "custom", "name": "slow"}})
	testenv.WaitFor(t, 10*time.Second, "the second execution published", func() bool {
		return getExecution(t, base, queued).DispatchedAt != nil
	})
	if code := call(t, "POST", base+"/v1/executions/"+queued+"/cancel", nil, nil); code != http.StatusOK {
		t.Fatalf("cancel queued: %d", code)
	}
	asked := time.Now()
	if code := call(t, "POST", base+"/v1/executions/"+running+"/cancel", nil, nil); code != http.StatusOK {
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
	var x executionDetail
	// Wait for its end: its start may be recorded a moment before.
	testenv.WaitFor(t, 10*time.Second, "the cancelled attempt recorded", func() bool {
		x = getExecution(t, base, running)
		return len(x.AttemptList) > 0 && x.AttemptList[0].Outcome != ""
	})
	if x.State != "cancelled" || len(x.AttemptList) != 1 || x.AttemptList[0].Outcome != "cancelled" {
		t.Errorf("running execution: %s, attempts %+v", x.State, x.AttemptList)
	}
	// The slot is free now; the cancelled queued execution must not use it.
	// A third one shows the executor is pulling again.
	third := runOnce(t, base, map[string]any{"name": "third", "handler": map[string]any{"type": "custom", "name": "slow"}})
	select {
	case got := <-started:
		if got != third {
			t.Fatalf("started %s after the cancellations, want only %s", got, third)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third execution never started")
	}
	if n := len(seen.of(queued)); n != 0 {
		t.Errorf("the cancelled queued execution started %d times", n)
	}
	q := getExecution(t, base, queued)
	if q.State != "cancelled" || len(q.AttemptList) != 0 {
		t.Errorf("queued execution: %s with attempts %+v", q.State, q.AttemptList)
	}
	// Cancelling again is harmless.
	for range 2 {
		if code := call(t, "POST", base+"/v1/executions/"+third+"/cancel", nil, nil); code != http.StatusOK {
			t.Errorf("cancel of the third execution: %d", code)
		}
	}
}

func TestDeadLettersAndRedrive(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	var healthy atomic.Bool
	var seen calls
	e.worker(t, executor.Config{}, "picky", func(ctx context.Context, x *executor.Execution) (string, error) {
		seen.add(x.ExecutionID)
		if !healthy.Load() {
			return "", errors.New("downstream is down")
		}
		return fmt.Sprintf("attempt %d ok", x.Attempt), nil
	})
	id := runOnce(t, base, map[string]any{"name": "picky", "retry": map[string]any{"max_attempts": 2, "initial_backoff": "100ms"},
		"handler": map[string]any{"type": "custom", "name": "picky"}})
	x := waitState(t, base, id, "dead", 20*time.Second)
	if x.Attempts != 2 {
		t.Errorf("dead after %d attempts, want 2", x.Attempts)
	}
	var dead struct {
		Items []execution `json:"items"`
	}
	if code := call(t, "GET", base+"/v1/executions?state=dead", nil, &dead); code != 200 || len(dead.Items) != 1 || dead.Items[0].ID != id {
		t.Fatalf("dead letters: %d %+v", code, dead.Items)
	}

	healthy.Store(true)
	if code := call(t, "POST", base+"/v1/executions/"+id+"/retry", nil, nil); code != http.StatusAccepted {
		t.Fatalf("re-drive: %d", code)
	}
	x = waitState(t, base, id, "succeeded", 20*time.Second)
	if x.Attempts != 3 || len(x.AttemptList) != 3 || x.AttemptList[2].Outcome != "succeeded" || x.Output != "attempt 3 ok" {
		t.Errorf("after re-drive: attempts %d, list %+v, output %q", x.Attempts, x.AttemptList, x.Output)
	}
	if code := call(t, "GET", base+"/v1/executions?state=dead", nil, &dead); code != 200 || len(dead.Items) != 0 {
		t.Errorf("dead letters after the re-drive: %+v", dead.Items)
	}
	if code := call(t, "POST", base+"/v1/executions/"+id+"/retry", nil, nil); code != http.StatusConflict {
		t.Errorf("re-drive of a succeeded execution: %d, want 409", code)
	}
}

func TestBackoffFloodDoesNotDelayAHealthyJob(t *testing.T) {
	e := newEnv(t)
	// Breakers off: this test is about backoff, not about the breaker
	// that would otherwise stop the failing host being tried at all.
	base := e.startNodeWith(t, "n1", func(c *Config) { c.Breaker.Disabled = true })
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
	// all on the same queue (http) as the healthy job.
	const flood = 1000
	for i := range flood {
		createJob(t, base, map[string]any{"name": fmt.Sprintf("flood-%04d", i),
			"retry":   map[string]any{"max_attempts": 3, "initial_backoff": "10m", "jitter": "none"},
			"handler": map[string]any{"type": "http", "url": failing.URL}})
	}
	testenv.WaitFor(t, 60*time.Second, "1000 executions waiting out their backoff", func() bool {
		return len(listExecutions(t, base+"/v1/executions?state=failed")) >= flood
	})
	// None of them holds a JetStream slot.
	nc, err := nats.Connect(e.nats.URL())
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

	j := createJob(t, base, map[string]any{"name": "healthy", "schedule": map[string]any{"cron": "* * * * * *"},
		"handler": map[string]any{"type": "http", "url": healthy.URL}})
	testenv.WaitFor(t, 30*time.Second, "ten healthy runs", func() bool {
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
	t.Logf("healthy job %s: %d runs, worst fire-to-start lag %s, with %d executions in backoff", j.ID, len(lags), worst, flood)
}

func TestHighPriorityRunsFirstWhenSaturated(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	block := make(chan struct{})
	var mu sync.Mutex
	var order []string
	e.worker(t, executor.Config{Concurrency: 1}, "busy", func(ctx context.Context, x *executor.Execution) (string, error) {
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
	blocker := runOnce(t, base, map[string]any{"name": "blocker", "handler": handler})
	waitState(t, base, blocker, "running", 10*time.Second)

	// Queued oldest first: low, then normal, then high.
	var ids []string
	for _, p := range []string{"low", "normal", "high"} {
		for i := range 3 {
			ids = append(ids, runOnce(t, base, map[string]any{"name": fmt.Sprintf("%s-%d", p, i), "priority": p, "handler": handler}))
		}
	}
	testenv.WaitFor(t, 10*time.Second, "all nine published", func() bool {
		for _, id := range ids {
			if getExecution(t, base, id).DispatchedAt == nil {
				return false
			}
		}
		return true
	})
	close(block)
	testenv.WaitFor(t, 20*time.Second, "all nine run", func() bool {
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
	e := newEnv(t)
	base := e.startNodeWith(t, "n1", func(c *Config) {
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
	var ids []string
	for i := range n {
		ids = append(ids, runOnce(t, base, map[string]any{"name": fmt.Sprintf("call-%02d", i),
			"retry":   map[string]any{"max_attempts": 50, "initial_backoff": "200ms", "max_backoff": "1s"},
			"handler": map[string]any{"type": "http", "url": target.URL}}))
	}
	type handlers struct {
		Items []struct {
			Handler string `json:"handler"`
			Breaker string `json:"breaker"`
		} `json:"items"`
	}
	breaker := func() string {
		var h handlers
		if code := call(t, "GET", base+"/v1/handlers", nil, &h); code != http.StatusOK {
			t.Fatalf("GET /v1/handlers: %d", code)
		}
		for _, it := range h.Items {
			if it.Handler == "http:"+target.Listener.Addr().String() {
				return it.Breaker
			}
		}
		return ""
	}
	testenv.WaitFor(t, 20*time.Second, "the breaker open", func() bool { return breaker() == "open" })
	// While open, the host is left alone: executions wait, not fail.
	before := hits.Load()
	time.Sleep(time.Second)
	if d := hits.Load() - before; d > 1 {
		t.Errorf("the open breaker let %d requests through in a second", d)
	}
	down.Store(false)
	for _, id := range ids {
		x := waitState(t, base, id, "succeeded", 60*time.Second)
		if x.State != "succeeded" {
			t.Errorf("execution %s ended %s", id, x.State)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the breaker closed", func() bool { return breaker() == "closed" })
}

func TestDeletingAJobLetsItsRunningExecutionFinish(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var cut atomic.Bool
	e.worker(t, executor.Config{}, "long", func(ctx context.Context, x *executor.Execution) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "finished anyway", nil
		case <-ctx.Done():
			cut.Store(true)
			return "", ctx.Err()
		}
	})
	j := createJob(t, base, map[string]any{"name": "to-delete", "handler": map[string]any{"type": "custom", "name": "long"}})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the execution never started")
	}
	var id string
	testenv.WaitFor(t, 10*time.Second, "the execution listed", func() bool {
		if xs := executions(t, base, j.ID); len(xs) == 1 {
			id = xs[0].ID
		}
		return id != ""
	})
	if code := call(t, "DELETE", base+"/v1/jobs/"+j.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete job: %d", code)
	}
	time.Sleep(300 * time.Millisecond) // give a wrong implementation time to cut it
	close(release)
	x := waitState(t, base, id, "succeeded", 10*time.Second)
	if cut.Load() || x.Output != "finished anyway" {
		t.Errorf("after the job was deleted: cut %v, execution %+v", cut.Load(), x)
	}
}
