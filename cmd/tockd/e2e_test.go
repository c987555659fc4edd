package main

// End-to-end tests: real PostgreSQL, embedded etcd and NATS JetStream,
// tockd in-process or as a child process, driven through the REST API only
// (plus the custom-executor SDK, as a user would run it).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// TestMain lets the test binary play tockd: a test re-runs it with
// TOCKD_E2E_CHILD=1 to get a real process it can kill -9.
func TestMain(m *testing.M) {
	if os.Getenv("TOCKD_E2E_CHILD") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// env is one test's dependencies.
type env struct {
	pg   string
	etcd *embedded.Etcd
	nats *embedded.NATS
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// A migrated database: tockd's own Migrate then finds nothing to do
	// (TestServeFlagsSecureAPINATSAndEtcd starts one on an empty one).
	return &env{pg: storetest.Postgres(t), etcd: testenv.Etcd(t), nats: testenv.NATS(t)}
}

func (e *env) config(node string, ln net.Listener) Config {
	return Config{
		NodeID:        node,
		HTTPAddr:      ln.Addr().String(),
		Listener:      ln,
		PostgresURL:   e.pg,
		EtcdEndpoints: []string{e.etcd.Endpoint()},
		NATSURL:       e.nats.URL(),
		Cluster:       "e2e",
		Roles:         map[string]bool{RoleAPI: true, RoleScheduler: true, RoleExecutor: true, RoleRecorder: true},
		Buckets:       16,
		LeaseTTL:      2 * time.Second,
		Migrate:       true,
		Pprof:         true,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Authentication has its own tests (auth_test.go); the others
		// call the API without keys.
		AuthNone: true,
		// The tests' HTTP targets are httptest servers on loopback, which
		// serve refuses by default; tock's own addresses, on loopback
		// too, stay refused.
		HTTPAllow: []string{testTargets},
	}
}

// testTargets is where the tests' HTTP targets listen (httptest servers),
// allowed on every node the tests start.
const testTargets = "127.0.0.1"

// startNode runs tockd in this process and returns its API base URL.
func (e *env) startNode(t *testing.T, node string) string {
	t.Helper()
	return e.startNodeWith(t, node, nil)
}

// startNodeWith is startNode with a change to the node's Config.
func (e *env) startNodeWith(t *testing.T, node string, change func(*Config)) string {
	t.Helper()
	base, _ := e.startStoppable(t, node, change)
	return base
}

// startStoppable is startNodeWith for a node the test stops itself: it
// returns the API base URL and a stop that waits for the node's end
// (also called at cleanup, if the test did not).
func (e *env) startStoppable(t *testing.T, node string, change func(*Config)) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	cfg := e.config(node, ln)
	if change != nil {
		change(&cfg)
	}
	cfg.Ready = ready
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("tockd %s: %v", node, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("tockd %s not ready after 60s", node)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("tockd %s: %v", node, err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// startProcess runs tockd as a child process (this test binary in child
// mode) and returns its API base URL and the process.
func (e *env) startProcess(t *testing.T, node string, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(os.Args[0], e.serveArgs(node, addr, extra...)...)
	cmd.Env = append(os.Environ(), "TOCKD_E2E_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("tockd %s stderr:\n%s", node, stderr.String())
		}
	})
	base := "http://" + addr
	testenv.WaitFor(t, 60*time.Second, "child tockd ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return base, cmd
}

// serveArgs are the arguments of a child tockd serve on addr, with the
// API open (--auth none) unless extra says otherwise.
func (e *env) serveArgs(node, addr string, extra ...string) []string {
	args := []string{"serve",
		"--node-id", node, "--http-addr", addr, "--postgres-url", e.pg,
		"--etcd-endpoints", e.etcd.Endpoint(), "--nats-url", e.nats.URL(),
		"--cluster", "e2e", "--buckets", "16", "--lease-ttl", "2s", "--log-level", "warn",
		"--http-allow", testTargets}
	if !slices.Contains(extra, "--auth") {
		args = append(args, "--auth", "none")
	}
	return append(args, extra...)
}

// runExecutor serves a custom handler with the SDK, as a user's program
// would, and returns the execution ids it saw, in order.
func (e *env) runExecutor(t *testing.T, handler string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	e.serveHandler(t, handler, func(ctx context.Context, x *executor.Execution) (string, error) {
		mu.Lock()
		seen = append(seen, x.ExecutionID)
		mu.Unlock()
		return "done " + x.ExecutionID, nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// serveHandler serves handler with fn through the SDK, in its own
// executor process's stead, until the test ends.
func (e *env) serveHandler(t *testing.T, handler string, fn executor.Func) {
	t.Helper()
	nc, err := nats.Connect(e.nats.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w, err := executor.New(executor.Config{NATS: nc, ExecutorID: "e2e-" + handler, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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

// call sends a JSON request and decodes a JSON answer into out (if not nil).
func call(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, raw, err)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

type job struct {
	ID        string     `json:"id"`
	Bucket    int        `json:"bucket"`
	State     string     `json:"state"`
	NextRunAt *time.Time `json:"next_run_at"`
}

type execution struct {
	ID           string     `json:"id"`
	JobID        string     `json:"job_id"`
	ScheduledFor time.Time  `json:"scheduled_for"`
	Manual       bool       `json:"manual"`
	State        string     `json:"state"`
	Attempts     int        `json:"attempts"`
	DispatchedAt *time.Time `json:"dispatched_at"`
	StartedAt    *time.Time `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	ExecutorID   string     `json:"executor_id"`
	FiredBy      string     `json:"fired_by"`
	Output       string     `json:"output"`
}

func createJob(t *testing.T, base string, body map[string]any) job {
	t.Helper()
	var j job
	if code := call(t, "POST", base+"/v1/jobs", body, &j); code != http.StatusCreated {
		t.Fatalf("create job: status %d", code)
	}
	return j
}

func executions(t *testing.T, base, jobID string) []execution {
	t.Helper()
	return listExecutions(t, base+"/v1/jobs/"+jobID+"/executions?")
}

func succeeded(xs []execution) []execution {
	var out []execution
	for _, x := range xs {
		if x.State == "succeeded" {
			out = append(out, x)
		}
	}
	return out
}

func TestEveryCronSecondRunsOnACustomExecutor(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	seen := e.runExecutor(t, "e2e-echo")

	j := createJob(t, base, map[string]any{
		"name":     "every-second",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "e2e-echo"},
		"payload":  map[string]any{"hello": "world"},
	})
	var xs []execution
	testenv.WaitFor(t, 20*time.Second, "3 succeeded executions", func() bool {
		xs = succeeded(executions(t, base, j.ID))
		return len(xs) >= 3
	})
	sort.Slice(xs, func(a, b int) bool { return xs[a].ScheduledFor.Before(xs[b].ScheduledFor) })
	for i, x := range xs {
		if x.ScheduledFor.Nanosecond() != 0 {
			t.Errorf("execution %s scheduled at %s, not on a whole second", x.ID, x.ScheduledFor)
		}
		if i > 0 && x.ScheduledFor.Sub(xs[i-1].ScheduledFor) != time.Second {
			t.Errorf("executions %d and %d are %s apart, want 1s", i-1, i, x.ScheduledFor.Sub(xs[i-1].ScheduledFor))
		}
		if x.DispatchedAt == nil || x.StartedAt == nil || x.FinishedAt == nil {
			t.Fatalf("execution %s lacks times: %+v", x.ID, x)
		}
		if x.Output != "done "+x.ID || x.ExecutorID != "e2e-e2e-echo" || x.Attempts != 1 || x.FiredBy != "n1" {
			t.Errorf("execution %s: output %q executor %q attempts %d fired by %q", x.ID, x.Output, x.ExecutorID, x.Attempts, x.FiredBy)
		}
		t.Logf("fire lag: scheduled→dispatched %s, scheduled→started %s",
			x.DispatchedAt.Sub(x.ScheduledFor), x.StartedAt.Sub(x.ScheduledFor))
	}
	// --pprof serves the profiler beside the API.
	if resp, err := http.Get(base + "/debug/pprof/cmdline"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /debug/pprof/cmdline: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	var one execution
	if code := call(t, "GET", base+"/v1/executions/"+xs[0].ID, nil, &one); code != 200 || one.State != "succeeded" {
		t.Fatalf("GET execution: %d %+v", code, one)
	}
	if len(seen()) < 3 {
		t.Fatalf("executor saw %d executions", len(seen()))
	}

	// The node's member key and its bucket owner keys, as etcdctl shows them.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.etcd.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
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
	e := newEnv(t)
	base := e.startNode(t, "n1")
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

	j := createJob(t, base, map[string]any{
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
	var xs []execution
	testenv.WaitFor(t, 10*time.Second, "the execution to succeed", func() bool {
		xs = succeeded(executions(t, base, j.ID))
		return len(xs) == 1
	})
	if h.idem != xs[0].ID || h.header != xs[0].ID {
		t.Errorf("target got Idempotency-Key %q and Tock-Execution-Id %q, want %s", h.idem, h.header, xs[0].ID)
	}
	if xs[0].Output != "thanks" {
		t.Errorf("output %q, want the response body", xs[0].Output)
	}
}

func TestAtJobFiresOnceOnTimeThenCompletes(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	e.runExecutor(t, "once")
	at := time.Now().Add(2 * time.Second).Truncate(time.Millisecond).UTC()
	j := createJob(t, base, map[string]any{
		"name":     "once",
		"schedule": map[string]any{"at": at.Format(time.RFC3339Nano)},
		"handler":  map[string]any{"type": "custom", "name": "once"},
	})
	var xs []execution
	testenv.WaitFor(t, 15*time.Second, "the execution to succeed", func() bool {
		xs = succeeded(executions(t, base, j.ID))
		return len(xs) == 1
	})
	x := xs[0]
	if !x.ScheduledFor.Equal(at) {
		t.Errorf("scheduled for %s, want %s", x.ScheduledFor, at)
	}
	if lag := x.DispatchedAt.Sub(at); lag < 0 || lag > time.Second {
		t.Errorf("dispatched %s after its time, want within 1s", lag)
	}
	var got job
	call(t, "GET", base+"/v1/jobs/"+j.ID, nil, &got)
	if got.State != "completed" || got.NextRunAt != nil {
		t.Errorf("job after firing: state %s next %v, want completed and none", got.State, got.NextRunAt)
	}
	time.Sleep(2 * time.Second)
	if n := len(executions(t, base, j.ID)); n != 1 {
		t.Errorf("%d executions, want exactly 1", n)
	}
}

func TestPauseResumeRunDelete(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	e.runExecutor(t, "ctl")
	j := createJob(t, base, map[string]any{
		"name":     "ctl",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "ctl"},
	})
	testenv.WaitFor(t, 15*time.Second, "first execution", func() bool { return len(executions(t, base, j.ID)) >= 1 })

	if code := call(t, "POST", base+"/v1/jobs/"+j.ID+"/pause", nil, nil); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	time.Sleep(1500 * time.Millisecond) // a firing in flight at pause time may still land
	paused := len(executions(t, base, j.ID))
	time.Sleep(2500 * time.Millisecond)
	if n := len(executions(t, base, j.ID)); n != paused {
		t.Fatalf("paused job fired: %d executions, then %d", paused, n)
	}

	var x execution
	if code := call(t, "POST", base+"/v1/jobs/"+j.ID+"/run", nil, &x); code != http.StatusAccepted {
		t.Fatalf("run: %d", code)
	}
	testenv.WaitFor(t, 10*time.Second, "the manual run to succeed", func() bool {
		var got execution
		call(t, "GET", base+"/v1/executions/"+x.ID, nil, &got)
		return got.State == "succeeded" && got.Manual
	})

	if code := call(t, "POST", base+"/v1/jobs/"+j.ID+"/resume", nil, nil); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	before := len(executions(t, base, j.ID))
	testenv.WaitFor(t, 10*time.Second, "firing after resume", func() bool { return len(executions(t, base, j.ID)) >= before+2 })

	if code := call(t, "DELETE", base+"/v1/jobs/"+j.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	time.Sleep(1500 * time.Millisecond)
	after := countExecutions(t, e.pg, j.ID)
	time.Sleep(2500 * time.Millisecond)
	if n := countExecutions(t, e.pg, j.ID); n != after {
		t.Fatalf("deleted job fired: %d executions, then %d", after, n)
	}
}

func TestKillAndRestartNeitherDoublesNorLosesFirings(t *testing.T) {
	e := newEnv(t)
	base, proc := e.startProcess(t, "n1")
	seen := e.runExecutor(t, "kill")
	j := createJob(t, base, map[string]any{
		"name":     "survivor",
		"schedule": map[string]any{"cron": "* * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "kill"},
	})
	testenv.WaitFor(t, 15*time.Second, "3 executions before the kill", func() bool {
		return len(succeeded(executions(t, base, j.ID))) >= 3
	})
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()

	// Leave behind what a node that fired but died before publishing leaves:
	// an execution row in the outbox, fired under the dead node's epoch.
	orphan := fireUnpublished(t, e.pg, j.ID)

	base, _ = e.startProcess(t, "n1")
	testenv.WaitFor(t, 20*time.Second, "the orphaned execution to be published and run", func() bool {
		var x execution
		call(t, "GET", base+"/v1/executions/"+orphan, nil, &x)
		return x.State == "succeeded"
	})
	testenv.WaitFor(t, 15*time.Second, "3 more executions after the restart", func() bool {
		return len(succeeded(executions(t, base, j.ID))) >= 8
	})

	xs := executions(t, base, j.ID)
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
	for id, n := range counts {
		if n > 1 {
			t.Logf("execution %s delivered %d times (at-least-once redelivery)", id, n)
		}
	}
}

func openStore(t *testing.T, pg string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Init(context.Background(), 16); err != nil {
		t.Fatal(err)
	}
	return st
}

func countExecutions(t *testing.T, pg, jobID string) int {
	t.Helper()
	var n int
	st := openStore(t, pg)
	if err := st.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM executions WHERE job_id = $1", jobID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fireUnpublished fires the job's next run the way its owner would, but
// publishes nothing, and returns the execution id.
func fireUnpublished(t *testing.T, pg, jobID string) string {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, pg)
	j, err := st.GetJob(ctx, uuid.MustParse(jobID))
	if err != nil {
		t.Fatal(err)
	}
	var node string
	var epoch int64
	if err := st.Pool().QueryRow(ctx, "SELECT node, epoch FROM bucket_owners WHERE bucket = $1", j.Bucket).Scan(&node, &epoch); err != nil {
		t.Fatal(err)
	}
	next := j.NextRunAt.Add(time.Second)
	res, err := st.Fire(ctx, node, map[int]int64{j.Bucket: epoch},
		[]store.Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: *j.NextRunAt, Next: &next}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %v %+v", err, res)
	}
	return res.Executions[0].ID.String()
}
