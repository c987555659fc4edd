package scanner_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// maxInWindow is the most times of ts (sorted) in any half-open window
// [t, t+w).
func maxInWindow(ts []time.Time, w time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// TestRateLimitEndToEnd is issue 43's rate-limit run, at a tenth of its
// window: 1,000 one-shot jobs sharing the key "partner" under 100 per
// second, all due at the same instant, on a real node and executor.
// Every one runs, and at most 100 are dispatched in any second (what tock
// limits: the release; its guard band, 50 ms here, absorbs the spread of
// publishing). Starts follow dispatches by the executor's pickup delay, so
// the test checks them over windows of per - D, where D is the longest
// pickup delay (start minus dispatch) measured, by the handlers' own
// clock and by the attempts' recorded starts: a start in [t, t+w) was
// dispatched in (t-D, t+w), a window of per. Unloaded, D is ~10 ms and
// the windows nearly per; under a loaded machine's longer pickups more
// than 100 can start in some second, and the test logs by how much.
// TOCK_RATE_PER=10s runs the issue's own figure, 100 per 10 s (about 95
// s; docs/bench.md has its result).
func TestRateLimitEndToEnd(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	var (
		mu     sync.Mutex
		starts = map[string]time.Time{}
	)
	e.Worker(t, executor.Config{Concurrency: 200}, "partner", func(ctx context.Context, x *executor.Execution) (string, error) {
		mu.Lock()
		if _, ok := starts[x.ExecutionID]; !ok {
			starts[x.ExecutionID] = time.Now()
		}
		mu.Unlock()
		return "ok", nil
	})
	const total, limit = 1000, 100
	per := time.Second
	if v := os.Getenv("TOCK_RATE_PER"); v != "" {
		var err error
		if per, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TOCK_RATE_PER: %v", err)
		}
	}
	at := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second)
	jobs := make([]map[string]any, total)
	for i := range jobs {
		jobs[i] = map[string]any{
			"name":       fmt.Sprintf("call-%04d", i),
			"schedule":   map[string]any{"at": at.Format(time.RFC3339)},
			"handler":    map[string]any{"type": "custom", "name": "partner"},
			"rate_limit": map[string]any{"key": "partner", "limit": limit, "per": per.String()},
		}
	}
	if code := nodetest.Call(t, "POST", n.URL+"/v1/jobs:batch", map[string]any{"jobs": jobs}, nil); code != 201 && code != 200 {
		t.Fatalf("batch create: %d", code)
	}
	st := nodetest.OpenStore(t, e.PG)
	nodetest.WaitFor(t, 60*time.Second+12*per, "every execution succeeds", func() bool {
		var done int
		if err := st.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM executions WHERE state = 'succeeded' AND rate_limit IS NOT NULL").Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done == total
	})
	rows, err := st.Pool().Query(context.Background(), `SELECT id::text, dispatched_at, attempt_started_at FROM executions
		WHERE rate_limit IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	var dispatched, recorded, handled []time.Time
	var delayRecorded, delayHandled time.Duration
	mu.Lock()
	for rows.Next() {
		var id string
		var d, s time.Time
		if err := rows.Scan(&id, &d, &s); err != nil {
			t.Fatal(err)
		}
		dispatched, recorded = append(dispatched, d), append(recorded, s)
		delayRecorded = max(delayRecorded, s.Sub(d))
		if h, ok := starts[id]; ok {
			handled = append(handled, h)
			delayHandled = max(delayHandled, h.Sub(d))
		}
	}
	ran := len(starts)
	mu.Unlock()
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(dispatched, time.Time.Compare)
	slices.SortFunc(recorded, time.Time.Compare)
	slices.SortFunc(handled, time.Time.Compare)
	t.Logf("%d executions over %s; the most in any %s: %d dispatched, %d started by the attempts, %d by the handlers; pickup delay up to %s (attempts), %s (handlers)",
		len(dispatched), dispatched[len(dispatched)-1].Sub(dispatched[0]).Round(time.Millisecond), per,
		maxInWindow(dispatched, per), maxInWindow(recorded, per), maxInWindow(handled, per),
		delayRecorded.Round(time.Millisecond), delayHandled.Round(time.Millisecond))
	if n := maxInWindow(dispatched, per); n > limit {
		t.Errorf("%d executions dispatched in one window of %s; the limit is %d", n, per, limit)
	}
	for _, c := range []struct {
		what  string
		ts    []time.Time
		delay time.Duration
	}{{"started (attempts)", recorded, delayRecorded}, {"started (handlers)", handled, delayHandled}} {
		w := per - max(c.delay, 0)
		if w < per/2 {
			t.Errorf("pickup delay up to %s (%s): too long for the start windows to say anything", c.delay, c.what)
			continue
		}
		if n := maxInWindow(c.ts, w); n > limit {
			t.Errorf("%d executions %s in one window of %s (per less the longest pickup); the limit is %d", n, c.what, w, limit)
		}
	}
	if ran < total {
		t.Errorf("%d handlers ran; want %d", ran, total)
	}
	if span := dispatched[len(dispatched)-1].Sub(dispatched[0]); span < 9*per {
		t.Errorf("1,000 executions at 100 per %s released over %s; want at least %s", per, span, 9*per)
	}
}
