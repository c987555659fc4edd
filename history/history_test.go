package history

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tock-sched/tock/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore counts passes and answers a fixed clock.
type fakeStore struct {
	now    time.Time
	passes atomic.Int32
	last   atomic.Pointer[store.HistoryRollup]
}

func (f *fakeStore) Now(context.Context) (time.Time, error) { return f.now, nil }

func (f *fakeStore) MaintainHistoryRollups(_ context.Context, o store.HistoryRollup) (store.HistoryRollupResult, error) {
	f.passes.Add(1)
	f.last.Store(&o)
	return store.HistoryRollupResult{Ran: true, RolledThrough: o.Now.Add(-o.Settle)}, nil
}

// A Roller passes its settings to the store, from the database's clock,
// repeats until its context ends, and rejects nonsense.
func TestRoller(t *testing.T) {
	fs := &fakeStore{now: time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)}
	r, err := New(Config{Store: fs, Interval: 10 * time.Millisecond, Backfill: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for fs.passes.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fs.passes.Load() < 3 {
		t.Fatalf("%d passes", fs.passes.Load())
	}
	o := fs.last.Load()
	if !o.Now.Equal(fs.now) || !o.Start.Equal(fs.now.Add(-48*time.Hour)) || o.Settle != time.Minute ||
		o.MinuteRetention != 35*24*time.Hour || o.HourRetention != 400*24*time.Hour {
		t.Errorf("pass options %+v", o)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("no store accepted")
	}
	short, err := New(Config{Store: fs, HourRetention: 7 * 24 * time.Hour})
	if err != nil || short.cfg.MinuteRetention != 7*24*time.Hour {
		t.Errorf("minutes kept %s with hours kept a week (%v)", short.cfg.MinuteRetention, err)
	}
}
