package maintenance

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tock-sched/tock/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lostStore records RequeueLostExecutions and ReleaseSilentSlots calls.
type lostStore struct {
	mu    sync.Mutex
	calls []lostCall
	slots []lostCall
	n     int // what each call reports re-queued
}

// lostCall is one RequeueLostExecutions call: its buckets, its time bound, and
// when it was made.
type lostCall struct {
	buckets  []int
	bound    time.Time
	calledAt time.Time
}

func (f *lostStore) RequeueLostExecutions(_ context.Context, buckets []int, olderThan time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, lostCall{slices.Clone(buckets), olderThan, time.Now()})
	return f.n, nil
}

func (f *lostStore) ReleaseSilentSlots(_ context.Context, buckets []int, olderThan time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slots = append(f.slots, lostCall{slices.Clone(buckets), olderThan, time.Now()})
	return 0, nil
}

func (f *lostStore) lost() []lostCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// The backstop checks the owned buckets every Interval, for executions
// silent since LostAfter; a negative LostAfter is refused.
func TestLostWorkBackstop(t *testing.T) {
	st := &lostStore{}
	r, err := NewLostWorkRescuer(LostWorkRescuerConfig{Store: st, Buckets: func() []int { return []int{2} },
		LostAfter: time.Minute, Interval: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testenv.WaitFor(t, 5*time.Second, "two lost-work checks", func() bool {
		n := 0
		for _, l := range st.lost() {
			if slices.Equal(l.buckets, []int{2}) {
				n++
			}
		}
		return n >= 2
	})
	lost := st.lost()
	l := lost[len(lost)-1]
	if back := l.calledAt.Sub(l.bound); back < time.Minute-time.Second || back > time.Minute+time.Second {
		t.Fatalf("re-queued what was silent since %s ago, want LostAfter (1m)", back)
	}
	// The same check frees the slots cancelled executions keep for
	// attempts as silent.
	st.mu.Lock()
	slots := slices.Clone(st.slots)
	st.mu.Unlock()
	if len(slots) == 0 || !slices.Equal(slots[0].buckets, []int{2}) || !slots[0].bound.Equal(lost[0].bound) {
		t.Fatalf("silent slots freed by %+v, want the owned buckets and the lost-work bound %s", slots, lost[0].bound)
	}
	if _, err := NewLostWorkRescuer(LostWorkRescuerConfig{Store: st, Buckets: func() []int { return nil }, LostAfter: -time.Second}); err == nil {
		t.Fatal("a negative LostAfter was accepted")
	}
}

// A node that owns no bucket asks nothing of the store.
func TestLostWorkWithoutBuckets(t *testing.T) {
	st := &lostStore{}
	r, err := NewLostWorkRescuer(LostWorkRescuerConfig{Store: st, Buckets: func() []int { return nil }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := st.lost(); len(calls) != 0 {
		t.Fatalf("RequeueLostExecutions called without buckets: %+v", calls)
	}
}
