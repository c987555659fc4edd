package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/wire"
)

// chaosSize is the chaos test's size: a short form in `make test`, the
// full one (TOCK_CHAOS_JOBS=2000 TOCK_CHAOS_DURATION=3m) in `make chaos`.
func chaosSize() (jobs int, d time.Duration) {
	return chaosEnvSize(200, 30*time.Second)
}

// chaosEnvSize is jobs and d unless TOCK_CHAOS_JOBS and
// TOCK_CHAOS_DURATION say otherwise.
func chaosEnvSize(jobs int, d time.Duration) (int, time.Duration) {
	if v, err := strconv.Atoi(os.Getenv("TOCK_CHAOS_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	if v, err := time.ParseDuration(os.Getenv("TOCK_CHAOS_DURATION")); err == nil && v > 0 {
		d = v
	}
	return jobs, d
}

// deliveries counts what the executor saw, per execution id and attempt.
type deliveries struct {
	mu    sync.Mutex
	first map[string]int // deliveries with attempt 1
	total map[string]int
}

func (d *deliveries) handle(_ context.Context, x *executor.Execution) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total[x.ExecutionID]++
	if x.Attempt == 1 {
		d.first[x.ExecutionID]++
	}
	return "", nil
}

type chaosNode struct {
	id    string
	proc  *nodetest.Node
	state string // running, paused, down
	until time.Time
}

func TestChaosKillRestartPause(t *testing.T) {
	nJobs, duration := chaosSize()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("chaos: %d jobs every second, %s of kills, restarts and pauses across 3 nodes (seed %d)", nJobs, duration, seed)

	e := nodetest.New(t)
	cli := e.EtcdClient(t)
	nodes := []*chaosNode{{id: "n1"}, {id: "n2"}, {id: "n3"}}
	for _, n := range nodes {
		n.proc = e.StartProcess(t, n.id)
		n.state = "running"
	}
	nodetest.WaitFor(t, 30*time.Second, "3 nodes to share the buckets", func() bool { return len(nodetest.Owners(t, cli)) == 3 })

	// The custom executor, as a user would run it, counting deliveries.
	seen := &deliveries{first: map[string]int{}, total: map[string]int{}}
	nc, err := nats.Connect(e.NATS.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w, err := executor.New(executor.Config{NATS: nc, Concurrency: 256, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("chaos", seen.handle)
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wcancel(); <-wdone }()

	jobs := createJobsConcurrently(t, nodes[len(nodes)-1].proc, "chaos", nJobs)
	start := time.Now()

	// Chaos: every 2-5 s one node is killed (-9), stopped (SIGSTOP) past
	// its lease, or terminated (SIGTERM); each comes back 1-4 s later.
	end := start.Add(duration)
	actions := map[string]int{}
	for time.Now().Before(end) {
		time.Sleep(time.Duration(2000+rng.IntN(3000)) * time.Millisecond)
		now := time.Now()
		for _, n := range nodes {
			if n.state != "running" && now.After(n.until) {
				switch n.state {
				case "paused":
					_ = n.proc.Cmd.Process.Signal(syscall.SIGCONT)
				case "down":
					n.proc = e.StartProcess(t, n.id)
				}
				n.state = "running"
			}
		}
		n := nodes[rng.IntN(len(nodes))]
		if n.state != "running" {
			continue
		}
		switch rng.IntN(3) {
		case 0:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGKILL)
			_ = n.proc.Cmd.Wait()
			n.state, n.until = "down", now.Add(time.Duration(1000+rng.IntN(3000))*time.Millisecond)
			actions["kill -9"]++
		case 1:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGSTOP)
			n.state, n.until = "paused", now.Add(testTTL+time.Duration(500+rng.IntN(2500))*time.Millisecond)
			actions["pause"]++
		case 2:
			_ = n.proc.Cmd.Process.Signal(syscall.SIGTERM)
			_ = n.proc.Cmd.Wait()
			n.state, n.until = "down", now.Add(time.Duration(1000+rng.IntN(2000))*time.Millisecond)
			actions["terminate"]++
		}
	}
	for _, n := range nodes {
		switch n.state {
		case "paused":
			_ = n.proc.Cmd.Process.Signal(syscall.SIGCONT)
		case "down":
			n.proc = e.StartProcess(t, n.id)
		}
	}
	t.Logf("chaos actions: %s", sortedKeys(actions))
	nodetest.WaitFor(t, 30*time.Second, "3 nodes to share the buckets again", func() bool {
		o := nodetest.Owners(t, cli)
		return len(o) == 3 && o["n1"]+o["n2"]+o["n3"] == 16
	})
	time.Sleep(5 * time.Second)
	stop := time.Now().Add(-3 * time.Second)

	// Every job, every second after the first 10 s: exactly one execution.
	nodetest.AssertExactlyOnce(t, e.PG, jobs, start.Add(10*time.Second), stop)

	// The executor saw each execution once, except redeliveries, which
	// carry a higher attempt number.
	st := nodetest.OpenStore(t, e.PG)
	unfinished := func() int {
		var n int
		_ = st.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM executions WHERE scheduled_for <= $1 AND state IN ('queued', 'running', 'failed')", stop).Scan(&n)
		return n
	}
	caughtUp := time.Now()
	deadline := caughtUp.Add(30 * time.Second)
	for n := unfinished(); n > 0; n = unfinished() {
		if time.Now().After(deadline) {
			rows, err := st.Pool().Query(context.Background(), `SELECT id, state, attempts, dispatches, dispatched_at IS NOT NULL,
				executor_id, error FROM executions WHERE scheduled_for <= $1 AND state IN ('queued', 'running', 'failed') LIMIT 10`, stop)
			if err == nil {
				for rows.Next() {
					var (
						id                   string
						state, executor, msg string
						attempts, dispatches int
						dispatched           bool
					)
					_ = rows.Scan(&id, &state, &attempts, &dispatches, &dispatched, &executor, &msg)
					seen.mu.Lock()
					handled := seen.total[id]
					seen.mu.Unlock()
					t.Logf("unfinished: %s %s attempts=%d dispatches=%d dispatched=%v executor=%q error=%q handled %d times",
						id, state, attempts, dispatches, dispatched, executor, msg, handled)
				}
				rows.Close()
			}
			logConsumers(t, e.NATS.URL())
			t.Fatalf("%d executions of the window still unfinished 30 s after the chaos", n)
		}
		time.Sleep(time.Second)
	}
	t.Logf("every execution of the window finished %s after the chaos ended", time.Since(caughtUp).Round(time.Second))
	seen.mu.Lock()
	defer seen.mu.Unlock()
	redelivered := 0
	for id, n := range seen.first {
		if n > 1 {
			t.Errorf("execution %s delivered as attempt 1 %d times", id, n)
		}
	}
	for _, n := range seen.total {
		if n > 1 {
			redelivered++
		}
	}
	t.Logf("executor: %d executions, %d of them redelivered (recorded with attempt > 1)", len(seen.total), redelivered)
}

// createJobsConcurrently creates n every-second jobs through the API.
func createJobsConcurrently(t *testing.T, node *nodetest.Node, handler string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				body := fmt.Sprintf(`{"name":"%s-%05d","schedule":{"cron":"* * * * * *"},"handler":{"type":"custom","name":%q}}`, handler, i, handler)
				resp, err := node.Client.CreateJobWithBodyWithResponse(context.Background(), nil, "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				if resp.JSON201 == nil {
					errs <- fmt.Errorf("create job %d: status %d: %s", i, resp.StatusCode(), resp.Body)
					continue
				}
				ids[i] = resp.JSON201.Id
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// logConsumers logs the state of every consumer of tock's streams.
func logConsumers(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Logf("consumers: %v", err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, stream := range []string{wire.ExecStream, wire.EventStream} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Logf("stream %s: %v", stream, err)
			continue
		}
		t.Logf("stream %s: %d messages", stream, s.CachedInfo().State.Msgs)
		for info := range s.ListConsumers(ctx).Info() {
			t.Logf("consumer %s: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %d/%d, ack floor %d",
				info.Name, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting,
				info.Delivered.Consumer, info.Delivered.Stream, info.AckFloor.Stream)
		}
	}
}
