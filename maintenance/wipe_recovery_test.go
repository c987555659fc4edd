package maintenance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

// wipeStore records RequeueWipedExecutions calls and re-queues n each time.
type wipeStore struct {
	mu     sync.Mutex
	calls  []lostCall
	n      int
	failed error
}

func (f *wipeStore) RequeueWipedExecutions(_ context.Context, buckets []int, before time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, lostCall{slices.Clone(buckets), before, time.Now()})
	return f.n, f.failed
}

// A missing exec stream is created again; once the new stream is Grace
// old, the owned buckets' executions published before it existed (within
// clockSlack) are re-queued and counted; before Grace, nothing is; a
// failed re-queue is returned.
func TestWipeRecoveryRunOnce(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	st := &wipeStore{n: 3}
	buckets := []int{1, 4}
	newRecovery := func(grace time.Duration) *WipeRecovery {
		r, err := NewWipeRecovery(WipeRecoveryConfig{JS: js, Store: st, Buckets: func() []int { return buckets },
			Grace: grace, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := newRecovery(time.Hour)
	if err := r.RunOnce(ctx); err != nil {
		t.Fatalf("a pass without streams: %v", err)
	}
	if _, err := js.Stream(ctx, wire.ExecStream); err != nil {
		t.Fatalf("the exec stream was not created again: %v", err)
	}
	if err := r.RunOnce(ctx); err != nil || len(st.calls) != 0 {
		t.Fatalf("a pass within the grace: %v, re-queued %+v; want nothing", err, st.calls)
	}

	r = newRecovery(time.Nanosecond)
	inc, err := wire.CurrentIncarnation(ctx, js, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(st.calls) != 1 || !slices.Equal(st.calls[0].buckets, buckets) {
		t.Fatalf("re-queued %+v, want one call for buckets %v", st.calls, buckets)
	}
	created := st.calls[0].calledAt.Add(-inc.Age)
	if d := st.calls[0].bound.Sub(created); d < clockSlack-time.Second || d > clockSlack+time.Second {
		t.Errorf("re-queued what was published before creation + %s, want + clockSlack (%s)", d, clockSlack)
	}
	if got := testutil.ToFloat64(r.requeued); got != 3 {
		t.Errorf("tock_wipe_requeued_total = %v, want 3", got)
	}

	st.failed = errors.New("postgres down")
	if err := r.RunOnce(ctx); !errors.Is(err, st.failed) {
		t.Errorf("a failed re-queue: %v, want it returned", err)
	}
	if _, err := NewWipeRecovery(WipeRecoveryConfig{JS: js, Store: st}); err == nil {
		t.Error("a wipe recovery without Buckets was accepted")
	}
}
