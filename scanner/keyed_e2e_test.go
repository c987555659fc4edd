package scanner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// TestConcurrencyKeysAcrossNodes is issue 43's end-to-end run of
// concurrency by key: 3 scheduler nodes fire every-second jobs of two
// customers, whose keys allow 2 (acme: 4 jobs, the key from a label) and
// 1 (globex: 2 jobs, the key from the payload) executions at once; the
// attempts take 0.2-0.9 s, some fail and are retried, some time out,
// running and waiting ones are cancelled through the API; an executor is
// stopped (its attempts handed back) and another started; a node is
// stopped. Then the jobs pause. Every execution ends (none is left
// waiting), no slot is held afterwards, and at no moment did more
// attempts of a key run than its limit: neither in the handlers (counted
// from their start until they return or tock ends them) nor in the
// attempts' recorded start and end times. A cancelled running execution
// keeps its slot until its executor has stopped the attempt and said so
// (migration 36): without that, the next waiter started while the
// cancelled attempt still ran (seen: 3 at once for a limit of 2).
func TestConcurrencyKeysAcrossNodes(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	nodes := []*nodetest.Node{e.Start(t, "n1"), e.Start(t, "n2"), e.Start(t, "n3")}
	limits := map[string]int{"acme": 2, "globex": 1}

	var (
		mu      sync.Mutex
		running = map[string]int{}
		peak    = map[string]int{}
	)
	handler := func(ctx context.Context, x *executor.Execution) (string, error) {
		var p struct{ Customer string }
		_ = json.Unmarshal(x.Payload, &p)
		mu.Lock()
		running[p.Customer]++
		peak[p.Customer] = max(peak[p.Customer], running[p.Customer])
		mu.Unlock()
		// An attempt runs until tock ends it (its ctx: a cancel, the
		// timeout, the executor's stop) or it returns.
		var once sync.Once
		done := func() {
			once.Do(func() {
				mu.Lock()
				running[p.Customer]--
				mu.Unlock()
			})
		}
		defer done()
		d := time.Duration(200+rand.IntN(700)) * time.Millisecond
		fail := rand.IntN(10) == 0
		if rand.IntN(10) == 0 {
			d = 3 * time.Second // beyond the job's timeout
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), executor.ErrCancelled) {
				// A handler takes a moment to stop: its slot is not
				// the next waiter's until it has.
				time.Sleep(300 * time.Millisecond)
			}
			done()
			return "", context.Cause(ctx)
		}
		if fail {
			return "", fmt.Errorf("boom")
		}
		return "ok", nil
	}
	stopFirst := e.StoppableWorker(t, executor.Config{ExecutorID: "first", ShutdownTimeout: 200 * time.Millisecond}, "keyed", handler)
	e.Worker(t, executor.Config{ExecutorID: "second"}, "keyed", handler)

	var jobs []uuid.UUID
	for i := range 6 {
		customer, key := "acme", "{{ .labels.customer }}"
		if i >= 4 {
			customer, key = "globex", "{{ .payload.customer }}"
		}
		j := nodes[i%3].CreateJob(t, map[string]any{
			"name":        fmt.Sprintf("keyed-%d", i),
			"schedule":    map[string]any{"cron": "* * * * * *"},
			"handler":     map[string]any{"type": "custom", "name": "keyed"},
			"payload":     map[string]any{"customer": customer},
			"labels":      map[string]string{"customer": customer},
			"timeout":     "1s",
			"retry":       map[string]any{"max_attempts": 2, "initial_backoff": "100ms"},
			"concurrency": map[string]any{"key": key, "limit": limits[customer]},
		})
		jobs = append(jobs, j.Id)
	}

	// Twelve seconds of firing, with the faults.
	start := time.Now()
	cancelled := map[string]int{}
	for tick := 0; time.Since(start) < 12*time.Second; tick++ {
		time.Sleep(time.Second)
		switch tick {
		case 4:
			if err := stopFirst(); err != nil {
				t.Errorf("stop the first executor: %v", err)
			}
		case 6:
			e.Worker(t, executor.Config{ExecutorID: "third"}, "keyed", handler)
			nodes[1].Stop()
		}
		// Every other second a waiting execution is cancelled (its place
		// in the key's queue goes), the others a running one (its slot
		// goes to the next once its attempt stopped).
		state := "waiting"
		if tick%2 == 0 {
			state = "running"
		}
		for _, x := range nodes[0].ExecutionsIn(t, state) {
			if slices.Contains(jobs, x.JobId) {
				if code := nodetest.Call(t, "POST", nodes[0].URL+"/v1/executions/"+x.Id.String()+"/cancel", nil, nil); code == 200 {
					cancelled[state]++
				}
				break
			}
		}
	}
	for _, id := range jobs {
		nodetest.Call(t, "POST", nodes[0].URL+"/v1/jobs/"+id.String()+"/pause", nil, nil)
	}

	// Every execution ends: the waiting ones run in turn.
	var execs []models.Execution
	nodetest.WaitFor(t, 120*time.Second, "every execution of the keyed jobs ends", func() bool {
		execs = execs[:0]
		for _, id := range jobs {
			execs = append(execs, nodes[0].Executions(t, id)...)
		}
		for _, x := range execs {
			switch x.State {
			case "succeeded", "dead", "cancelled":
			default:
				return false
			}
		}
		return true
	})
	// The last cancelled attempts' slots go once their executors said
	// they stopped.
	var keys models.ConcurrencyKeyList
	nodetest.WaitFor(t, 30*time.Second, "no concurrency key held or waited for", func() bool {
		code := nodetest.Call(t, "GET", nodes[0].URL+"/v1/concurrency", nil, &keys)
		return code == 200 && len(keys.Items) == 0
	})

	// The attempts' recorded times, key by key: a sweep over their
	// starts and ends.
	type edge struct {
		at    time.Time
		delta int
	}
	edges := map[string][]edge{}
	states := map[string]int{}
	for _, x := range execs {
		states[string(x.State)]++
		customer := "acme"
		if x.ConcurrencyKey != nil && *x.ConcurrencyKey == "ns:default:globex" {
			customer = "globex"
		} else if x.ConcurrencyKey == nil || *x.ConcurrencyKey != "ns:default:acme" {
			t.Fatalf("execution %s carries key %v", x.Id, x.ConcurrencyKey)
		}
		for _, a := range nodetest.Attempts(nodes[0].Execution(t, x.Id)) {
			if a.StartedAt == nil || a.FinishedAt == nil {
				continue
			}
			edges[customer] = append(edges[customer], edge{*a.StartedAt, 1}, edge{*a.FinishedAt, -1})
		}
	}
	for customer, es := range edges {
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.delta - b.delta // an end before a start at the same instant
		})
		n, most := 0, 0
		for _, e := range es {
			n += e.delta
			most = max(most, n)
		}
		if most > limits[customer] {
			t.Errorf("%s: %d attempts ran at once by their recorded times; its limit is %d", customer, most, limits[customer])
		}
		t.Logf("%s: %d attempts, at most %d at once (limit %d); %d at once at most in the handlers",
			customer, len(es)/2, most, limits[customer], peak[customer])
	}
	for customer, n := range peak {
		if n > limits[customer] {
			t.Errorf("%s: %d handlers ran at once; its limit is %d", customer, n, limits[customer])
		}
	}
	t.Logf("%d executions: %v; cancelled through the API: %v", len(execs), states, cancelled)
	if cancelled["waiting"] == 0 || cancelled["running"] == 0 {
		t.Errorf("cancelled through the API: %v; want waiting and running executions", cancelled)
	}
	if states["succeeded"] == 0 || len(execs) < 20 {
		t.Errorf("executions %v: want a run that did work", states)
	}
}
