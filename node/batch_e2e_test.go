package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// An executor process killed with kill -9 halfway through batch messages
// (several executions fired for one instant in one JetStream message):
// the members it finished are not run again, those it was running are
// finished by another executor as attempt 2 (attempt 1 lost), and each
// execution succeeds exactly once.
func TestExecutorKilledHalfwayThroughABatch(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.StartWith(t, "n1", func(c *node.Config) { c.Roles = node.RolesOf(node.RoleAPI, node.RoleScheduler, node.RoleRecorder) })
	var (
		mu   sync.Mutex
		hits = map[string]int{}
	)
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/slow/") && r.Header.Get("Tock-Attempt") == "1" {
			select { // its executor dies meanwhile
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, "done")
	}))
	defer target.Close()
	defer close(release)
	x1 := e.StartProcess(t, "x1", "--roles", "executor", "--executor-ack-wait", "2s", "--executor-concurrency", "64")

	// 48 one-shot jobs due at one instant: about three in each of the 16
	// buckets, so most are fired in batches.
	at := time.Now().Add(4 * time.Second).Truncate(time.Second).UTC()
	kinds := map[uuid.UUID]string{}
	for i := range 48 {
		kind := []string{"fast", "slow"}[i%2]
		j := n1.CreateJob(t, map[string]any{
			"name":     fmt.Sprintf("%s-%d", kind, i),
			"schedule": map[string]any{"at": at.Format(time.RFC3339Nano)},
			"retry":    map[string]any{"max_attempts": 3},
			"handler":  map[string]any{"type": "http", "url": fmt.Sprintf("%s/%s/%d", target.URL, kind, i)},
		})
		kinds[j.Id] = kind
	}
	state := func(id uuid.UUID) (string, int) {
		xs := n1.Executions(t, id)
		if len(xs) != 1 {
			return "", 0
		}
		return string(xs[0].State), xs[0].Attempts
	}
	nodetest.WaitFor(t, 30*time.Second, "the fast ones succeeded and the slow ones running", func() bool {
		for id, kind := range kinds {
			s, _ := state(id)
			if (kind == "fast" && s != "succeeded") || (kind == "slow" && s != "running") {
				return false
			}
		}
		return true
	})
	conn, err := pgxpool.New(context.Background(), e.PG)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var batched int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM executions WHERE batch IS NOT NULL").Scan(&batched); err != nil {
		t.Fatal(err)
	}
	if batched < 10 {
		t.Fatalf("%d of 48 executions fired in batches, want most", batched)
	}
	if err := x1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.StartProcess(t, "x2", "--roles", "executor", "--executor-ack-wait", "2s", "--executor-concurrency", "64")

	nodetest.WaitFor(t, 60*time.Second, "every execution succeeded", func() bool {
		for id := range kinds {
			if s, _ := state(id); s != "succeeded" {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // anything run twice shows by now
	mu.Lock()
	defer mu.Unlock()
	for id, kind := range kinds {
		xs := n1.Executions(t, id)
		if len(xs) != 1 {
			t.Fatalf("job %s has %d executions", id, len(xs))
		}
		x := n1.Execution(t, xs[0].Id)
		atts := nodetest.Attempts(x)
		switch kind {
		case "fast":
			if x.Attempts != 1 || len(atts) != 1 || nodetest.Str(atts[0].Outcome) != "succeeded" || nodetest.Str(atts[0].ExecutorId) != "x1" {
				t.Errorf("fast execution %s: %d attempts %+v, want one, succeeded on x1, not run again", x.Id, x.Attempts, atts)
			}
		case "slow":
			if x.Attempts != 2 || len(atts) != 2 || nodetest.Str(atts[0].Outcome) != "lost" ||
				nodetest.Str(atts[1].Outcome) != "succeeded" || nodetest.Str(atts[1].ExecutorId) != "x2" {
				t.Errorf("slow execution %s: %d attempts %+v, want attempt 1 lost, attempt 2 succeeded on x2", x.Id, x.Attempts, atts)
			}
		}
	}
	for path, n := range hits {
		want := 1
		if strings.HasPrefix(path, "/slow/") {
			want = 2
		}
		if n != want {
			t.Errorf("%s was called %d times, want %d", path, n, want)
		}
	}
	if len(hits) != 48 {
		t.Errorf("%d targets called, want 48", len(hits))
	}
}
