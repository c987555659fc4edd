package node_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// logExecutorEnv, set to a NATS URL, makes this test binary a custom
// executor (runLogExecutor) instead of running tests.
const logExecutorEnv = "TOCK_TEST_LOG_EXECUTOR"

// logAckWait is the ack wait of the "killable" queue: a killed
// executor's attempt comes back this soon.
const logAckWait = 3 * time.Second

// runLogExecutor serves "killable": a handler that writes a numbered
// line to its log every 10 ms, and says so on stdout after each, until
// it is killed.
func runLogExecutor(url string) {
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w, err := executor.New(executor.Config{NATS: nc, ExecutorID: "doomed", AckWait: logAckWait,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w.Handle("killable", func(ctx context.Context, x *executor.Execution) (string, error) {
		for i := 0; ; i++ {
			fmt.Fprintf(executor.Log(ctx), "attempt 1 line %d\n", i)
			fmt.Printf("wrote %d\n", i)
			time.Sleep(10 * time.Millisecond)
		}
	})
	_ = w.Run(context.Background())
}

// An executor killed (-9) in the middle of an attempt, and the retry
// another one makes: both attempts' logs are kept, each on its own. The
// killed one's holds every line up to about its last flush before the
// kill, in order, none twice, and has no end; the retry's is whole.
func TestKilledAttemptKeepsItsLog(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), logExecutorEnv+"="+e.NATSURL())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	var wrote atomic.Int64
	wrote.Store(-1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "wrote ")); err == nil {
				wrote.Store(int64(n))
			}
		}
	}()

	job := n.CreateJob(t, map[string]any{"name": "killable", "schedule": map[string]any{"in": "1s"},
		"retry": map[string]any{"max_attempts": 2}, "handler": map[string]any{"type": "custom", "name": "killable"}})
	nodetest.WaitFor(t, 60*time.Second, "the doomed executor to write 300 lines", func() bool { return wrote.Load() >= 300 })
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killedAt := wrote.Load()

	e.Worker(t, executor.Config{AckWait: logAckWait}, "killable", func(ctx context.Context, x *executor.Execution) (string, error) {
		for i := range 100 {
			fmt.Fprintf(executor.Log(ctx), "attempt %d line %d\n", x.Attempt, i)
		}
		return "", nil
	})
	var id string
	nodetest.WaitFor(t, 60*time.Second, "the retry to succeed", func() bool {
		xs := n.Executions(t, job.Id)
		if len(xs) == 1 && string(xs[0].State) == "succeeded" {
			id = xs[0].Id.String()
			return true
		}
		return false
	})
	text := func(attempt int) string {
		t.Helper()
		var got string
		nodetest.WaitFor(t, 10*time.Second, "attempt "+strconv.Itoa(attempt)+"'s log", func() bool {
			req, _ := http.NewRequest("GET", n.URL+"/v1/executions/"+id+"/logs?limit=1000&attempt="+strconv.Itoa(attempt), nil)
			req.Header.Set("Accept", "text/plain")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			got = string(b)
			return res.StatusCode == http.StatusOK && got != ""
		})
		return got
	}
	first := strings.Split(strings.TrimSuffix(text(1), "\n"), "\n")
	for i, l := range first {
		if l != fmt.Sprintf("attempt 1 line %d", i) {
			t.Fatalf("attempt 1's log, line %d: %q; want its lines in order, each once, no gap", i, l)
		}
	}
	// The writer flushes every 200 ms: what the killed executor wrote
	// in its last moments may be lost, no more (a second of lines here,
	// for a loaded machine).
	if kept := int64(len(first)); kept < killedAt-100 || kept > killedAt+50 {
		t.Errorf("attempt 1 kept %d lines; the executor had written %d when it was killed", kept, killedAt+1)
	}
	var second strings.Builder
	for i := range 100 {
		fmt.Fprintf(&second, "attempt 2 line %d\n", i)
	}
	if got := text(2); got != second.String() {
		t.Errorf("attempt 2's log %q…, want its 100 lines", got[:min(len(got), 80)])
	}
	t.Logf("attempt 1: %d lines kept of %d written before the kill; attempt 2: whole", len(first), killedAt+1)
}
