package backfill

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dispatched collects what the runner hands to the dispatcher.
type dispatched struct {
	mu    sync.Mutex
	execs []*model.Execution
}

func (d *dispatched) Dispatch(_ context.Context, execs []*model.Execution) {
	d.mu.Lock()
	d.execs = append(d.execs, execs...)
	d.mu.Unlock()
}

func (d *dispatched) all() []*model.Execution {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*model.Execution(nil), d.execs...)
}

// setup stores an every-second job owned by node n1 at epoch 1 and
// returns it with the store.
func setup(t *testing.T) (*store.Store, *model.Job) {
	t.Helper()
	st := storetest.New(t, 4)
	next := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	j := &model.Job{Name: "every-second", Schedule: schedule.Spec{Cron: "* * * * * *"},
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "h"}, NextRunAt: &next}
	if err := st.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimBucket(context.Background(), j.Bucket, "n1", 1); err != nil {
		t.Fatal(err)
	}
	return st, j
}

// run runs a Runner for cfg until the test ends.
func run(t *testing.T, cfg Config) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func TestRunnerFiresTheRangeOnceAtItsRate(t *testing.T) {
	st, j := setup(t)
	ctx := context.Background()
	from := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	b, err := st.CreateBackfill(ctx, j.ID, from, from.Add(60*time.Second), 60)
	if err != nil {
		t.Fatal(err)
	}
	d := &dispatched{}
	const rate = 40
	start := time.Now()
	run(t, Config{Store: st, Dispatcher: d, NodeID: "n1", Rate: rate, Refresh: 100 * time.Millisecond,
		Owned:  func() map[int]int64 { return map[int]int64{j.Bucket: 1} },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var got *model.Backfill
	testenv.WaitFor(t, 20*time.Second, "backfill done", func() bool {
		l, _, err := st.ListBackfills(ctx, j.ID, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		got = l[0]
		return got.State == model.BackfillDone
	})
	took := time.Since(start)
	if got.ID != b.ID || got.Fired != 60 || !got.NextAt.Equal(from.Add(60*time.Second)) {
		t.Fatalf("backfill %+v", got)
	}
	// 60 runs at 40 a second, after a burst of at most two ticks' worth
	// (8): at least 1.3 s.
	if took < 1300*time.Millisecond {
		t.Errorf("60 runs took %s at %d a second", took, rate)
	}
	xs := d.all()
	if len(xs) != 60 {
		t.Fatalf("%d executions dispatched, want 60", len(xs))
	}
	for i, x := range xs {
		if want := from.Add(time.Duration(i) * time.Second); !x.ScheduledFor.Equal(want) || !x.Backfill {
			t.Errorf("execution %d: scheduled %s (want %s, oldest first), backfill %v", i, x.ScheduledFor, want, x.Backfill)
		}
	}
	t.Logf("60 runs at %d/s took %s", rate, took)
}

func TestRunnerFailsABackfillOfADeletedJobAndSkipsUnownedBuckets(t *testing.T) {
	st, j := setup(t)
	ctx := context.Background()
	from := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	b, err := st.CreateBackfill(ctx, j.ID, from, from.Add(10*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		owned = map[int]int64{j.Bucket: 0} // a stale epoch: n1 claimed it at 1
	)
	d := &dispatched{}
	run(t, Config{Store: st, Dispatcher: d, NodeID: "n1", Refresh: 100 * time.Millisecond,
		Owned: func() map[int]int64 {
			mu.Lock()
			defer mu.Unlock()
			return map[int]int64{j.Bucket: owned[j.Bucket]}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Owned at a stale epoch: fenced, nothing fires.
	time.Sleep(300 * time.Millisecond) // a few ticks that must do nothing
	if n := len(d.all()); n != 0 {
		t.Fatalf("fenced runner dispatched %d executions", n)
	}
	if _, err := st.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	owned[j.Bucket] = 1
	mu.Unlock()
	testenv.WaitFor(t, 10*time.Second, "backfill failed", func() bool {
		l, _, err := st.ListBackfills(ctx, j.ID, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		return l[0].ID == b.ID && l[0].State == model.BackfillFailed && l[0].Error == "the job was deleted"
	})
	if n := len(d.all()); n != 0 {
		t.Fatalf("dispatched %d executions of a deleted job", n)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{},
		{Store: &store.Store{}, Dispatcher: &dispatched{}, NodeID: "n"},
		{Store: &store.Store{}, Dispatcher: &dispatched{}, NodeID: "n", Owned: func() map[int]int64 { return nil },
			Tick: time.Second, Refresh: time.Millisecond},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	c := Config{}.WithDefaults()
	if c.Rate != DefaultRate || c.Tick != 100*time.Millisecond || c.Refresh != time.Second || c.MaxChunk != 1000 {
		t.Errorf("defaults: %+v", c)
	}
}
