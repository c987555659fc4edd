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

	"github.com/google/uuid"
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
	// A follow of the killed attempt, whose log has no end chunk, ends
	// once the attempt is over and no chunk came for a while.
	began := time.Now()
	res, err := http.Get(n.URL + "/v1/executions/" + id + "/logs?follow=true&attempt=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body) // until the server ends the stream
	res.Body.Close()
	if !strings.Contains(string(body), "event: end\ndata: {\"attempt\":1,\"reason\":\"attempt over\"}") || time.Since(began) > 30*time.Second {
		t.Errorf("the follow of the killed attempt ended after %s with %q…; want its end, attempt over", time.Since(began), string(body)[max(0, len(body)-120):])
	}
	t.Logf("attempt 1: %d lines kept of %d written before the kill; attempt 2: whole", len(first), killedAt+1)
}

// The cap policies on a real node: head_tail keeps the first and the
// last lines and marks the cut between them with the bytes dropped (the
// recorder deleted the middle); fail ends the attempt, its error naming
// the cap.
func TestLogCapsEndToEnd(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	const lines = 2000 // of 50 bytes: 100,000
	e.Serve(t, "capped", func(ctx context.Context, x *executor.Execution) (string, error) {
		for i := range lines {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			fmt.Fprintf(executor.Log(ctx), "line %06d %s\n", i, strings.Repeat(".", 37))
			if i%100 == 0 {
				time.Sleep(50 * time.Millisecond) // several chunks
			}
		}
		return "", nil
	})
	job := func(name, policy string) string {
		j := n.CreateJob(t, map[string]any{"name": name, "schedule": map[string]any{"in": "1s"}, "retry": map[string]any{"max_attempts": 1},
			"handler": map[string]any{"type": "custom", "name": "capped", "log": map[string]any{"cap_bytes": 8192, "policy": policy}}})
		var id string
		nodetest.WaitFor(t, 60*time.Second, name+" to end", func() bool {
			xs := n.Executions(t, j.Id)
			if len(xs) == 1 && (xs[0].State == "succeeded" || xs[0].State == "dead") {
				id = xs[0].Id.String()
				return true
			}
			return false
		})
		return id
	}
	text := func(id string) string {
		req, _ := http.NewRequest("GET", n.URL+"/v1/executions/"+id+"/logs", nil)
		req.Header.Set("Accept", "text/plain")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}

	ht := job("head-tail", "head_tail")
	var got string
	nodetest.WaitFor(t, 10*time.Second, "the head and tail, trimmed", func() bool {
		got = text(ht)
		return strings.Contains(got, "[tock: ") && len(got) < 20000
	})
	head, rest, cut := strings.Cut(got, "[tock: ")
	marker, tail, _ := strings.Cut(rest, "\n")
	dropped, _ := strconv.Atoi(strings.TrimSuffix(marker, " bytes not kept]"))
	if !cut || !strings.HasPrefix(head, "line 000000 ") || !strings.HasSuffix(tail, fmt.Sprintf("line %06d %s\n", lines-1, strings.Repeat(".", 37))) {
		t.Fatalf("head and tail: %q … %q", head[:min(len(head), 60)], tail[max(0, len(tail)-60):])
	}
	if kept := len(head) + len(tail); kept+dropped != lines*50 || len(head) > 4096 {
		t.Errorf("kept %d (head %d) and dropped %d of %d bytes; want the head within half the cap, the rest adding up", kept, len(head), dropped, lines*50)
	}

	failed := job("fail", "fail")
	x := n.Execution(t, uuid.MustParse(failed))
	if x.State != "dead" || x.Error == nil || !strings.Contains(*x.Error, "log over its cap") || !strings.Contains(*x.Error, "8192") {
		t.Errorf("the fail policy's execution: %s, error %v; want dead, naming the cap", x.State, x.Error)
	}
}
