package scanner_test

// Backpressure against real Postgres and NATS JetStream: the scanner, the
// dispatcher and the backlog watch as tockd wires them, with the test as
// a slow executor.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/scanner"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

// runGroup runs fns until the test ends.
func runGroup(t *testing.T, fns ...func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// With more due than the executors take, the scanner fires about as
// fast as they take (the backlog stays near its limit), a queue nobody
// executes does not hold firing back, and once the executors catch up
// every run fires, exactly once.
func TestBackpressureHoldsFiringNearTheLimit(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t, 4)
	nc, err := nats.Connect(testenv.NATS(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	work, err := wire.EnsureConsumer(ctx, js, "bp", domain.PriorityNormal, wire.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.EnsureConsumer(ctx, js, "nobody", domain.PriorityNormal, wire.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}

	// 1,500 runs/s due for 8 s on queue bp, executed at 500/s; and 2,000
	// runs due at once on a queue no executor serves, which stay in
	// JetStream: counted, they would hold firing back for ever.
	const (
		perSecond = 1500
		seconds   = 8
		dead      = 2000
		execRate  = 500
		minLimit  = 500
	)
	start := time.Now().Truncate(time.Second).Add(4 * time.Second)
	var jobs []*model.Job
	job := func(i int, queue string, at time.Time) *model.Job {
		return &model.Job{Name: fmt.Sprintf("%s-%05d", queue, i), Schedule: schedule.Spec{Cron: "0 0 0 1 1 *"},
			Handler: domain.Handler{Type: domain.HandlerCustom, Name: queue}, NextRunAt: &at}
	}
	for i := range perSecond * seconds {
		jobs = append(jobs, job(i, "bp", start.Add(time.Duration(i)*time.Second/perSecond)))
	}
	for i := range dead {
		jobs = append(jobs, job(i, "nobody", start))
	}
	if err := st.CopyJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clock.New(st.Now, clock.Options{})
	disp, err := dispatcher.New(dispatcher.Config{JS: js, Store: st, Clock: clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := dispatcher.NewBacklogWatch(dispatcher.BacklogConfig{JS: js, Dispatcher: disp, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := scanner.New(scanner.Config{Store: st, Dispatcher: disp, Clock: clk, NodeID: "n1", Logger: log,
		Lookahead: 2 * time.Second, ScanInterval: 500 * time.Millisecond,
		Backlog: watch, BacklogFor: time.Second, MinBacklog: minLimit})
	if err != nil {
		t.Fatal(err)
	}

	// The executor: execRate a second while slow, as fast as it can once
	// fast is set; it records every execution id it is handed.
	var (
		fast     atomic.Bool
		executed atomic.Int64
		mu       sync.Mutex
		seen     = map[string]int{}
	)
	executor := func(ctx context.Context) error {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			n := execRate / 10
			if fast.Load() {
				n = 500
			} else {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
			batch, err := work.FetchNoWait(n)
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				_ = m.Ack()
				mu.Lock()
				seen[m.Headers().Get(wire.HeaderExecutionID)]++
				mu.Unlock()
				executed.Add(1)
			}
			if fast.Load() && batch.Error() == nil {
				time.Sleep(10 * time.Millisecond) // empty: do not spin
			}
		}
		return nil
	}
	runGroup(t, disp.Run, watch.Run, scan.Run, executor)
	for b := range 4 {
		scan.Acquire(b, 1)
	}

	count := func(where string) int64 {
		var n int64
		if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM executions WHERE "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Every bp run is due by the window's end: without backpressure all
	// of them would have fired, 8,000 more than executed; with it, about
	// the limit more (and what was fired ahead before the backlog grew).
	end := start.Add(seconds * time.Second)
	maxGap := int64(0)
	for time.Now().Before(end) {
		gap := count("job_name LIKE 'bp-%'") - executed.Load()
		if time.Now().After(start.Add(3 * time.Second)) {
			maxGap = max(maxGap, gap)
		}
		time.Sleep(200 * time.Millisecond)
	}
	firedBP, done := count("job_name LIKE 'bp-%'"), executed.Load()
	t.Logf("at the window's end: fired %d of %d, executed %d; most fired ahead of execution from 3s in: %d",
		firedBP, perSecond*seconds, done, maxGap)
	if firedBP-done > 3000 || firedBP > perSecond*seconds-4000 {
		t.Fatalf("fired %d, executed %d: firing ran ahead of execution (%d waiting), want it held near the limit",
			firedBP, done, firedBP-done)
	}

	// The executors catch up: everything fires, once.
	fast.Store(true)
	testenv.WaitFor(t, 30*time.Second, "every run fired and executed", func() bool {
		return executed.Load() >= perSecond*seconds && count("true") >= perSecond*seconds+dead
	})
	want := map[string]time.Time{}
	for _, j := range jobs {
		want[j.ID.String()] = *j.NextRunAt
	}
	rows, err := st.Pool().Query(ctx, "SELECT job_id::text, scheduled_for, id::text FROM executions")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var jobID, id string
		var at time.Time
		if err := rows.Scan(&jobID, &at, &id); err != nil {
			t.Fatal(err)
		}
		if w, ok := want[jobID]; !ok || !w.Equal(at) {
			t.Fatalf("execution %s of job %s at %s, not a run of the test (want %s)", id, jobID, at, w)
		}
		got[jobID]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		if got[id] != 1 {
			t.Fatalf("job %s fired %d times, want once", id, got[id])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != perSecond*seconds {
		t.Fatalf("the executor was handed %d executions, want %d", len(seen), perSecond*seconds)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("execution %s handed to the executor %d times", id, n)
		}
	}
}
