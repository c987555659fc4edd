package maintenance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
)

// fakeLock is a Locker that another node may hold.
type fakeLock struct {
	held  bool // by another node
	waits []bool
}

func (l *fakeLock) Maintenance(ctx context.Context, wait bool, fn func(context.Context) error) (bool, error) {
	l.waits = append(l.waits, wait)
	if l.held && !wait {
		return false, nil
	}
	return true, fn(ctx)
}

// step is a Service that records its pass in a shared log.
type step struct {
	name string
	log  *[]string
	err  error
}

func (s step) RunOnce(context.Context) error {
	*s.log = append(*s.log, s.name)
	return s.err
}

// A pass runs its services in order under the lock and stops at the
// first failure; a pass that finds the lock held skips, unless told to
// wait.
func TestPassRunsServicesInOrderUnderTheLock(t *testing.T) {
	ctx := context.Background()
	var ran []string
	broken := errors.New("broken")
	lock := &fakeLock{}
	p, err := NewPass(PassConfig{Lock: lock, Logger: quiet(), Services: []Service{
		step{"partitions", &ran, nil}, step{"audit", &ran, broken}, step{"retention", &ran, nil},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunOnce(ctx); !errors.Is(err, broken) {
		t.Fatalf("pass: %v, want the audit step's error", err)
	}
	if want := []string{"partitions", "audit"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}

	ran = nil
	lock.held = true
	if err := p.RunOnce(ctx); err != nil || len(ran) != 0 {
		t.Fatalf("pass with the lock held elsewhere: %v, ran %v; want a skip", err, ran)
	}
	w, err := NewPass(PassConfig{Lock: lock, Wait: true, Logger: quiet(), Services: []Service{step{"partitions", &ran, nil}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RunOnce(ctx); err != nil || !slices.Equal(ran, []string{"partitions"}) {
		t.Fatalf("waiting pass: %v, ran %v", err, ran)
	}
	if want := []bool{false, false, true}; !slices.Equal(lock.waits, want) {
		t.Fatalf("lock taken with wait %v, want %v", lock.waits, want)
	}
	if _, err := NewPass(PassConfig{}); err == nil {
		t.Fatal("a pass without a lock was accepted")
	}
}

// keyStore is an IdempotencyStore that counts its passes.
type keyStore struct{ passes atomic.Int32 }

func (*keyStore) Now(context.Context) (time.Time, error) { return time.Now(), nil }

func (k *keyStore) ExpireIdempotencyKeys(context.Context, time.Time) (int64, error) {
	k.passes.Add(1)
	return 0, nil
}

// A cluster-wide service run on its own takes the lock for each pass, and
// skips the pass while another node holds it.
func TestServiceRunTakesTheLock(t *testing.T) {
	for _, held := range []bool{false, true} {
		st := &keyStore{}
		lock := &syncLock{fakeLock: fakeLock{held: held}}
		p, err := NewIdempotencyPruner(IdempotencyPrunerConfig{Store: st, Lock: lock, Interval: 10 * time.Millisecond, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		testenv.WaitFor(t, 5*time.Second, "three tries of the lock", func() bool { return lock.tries() >= 3 })
		cancel()
		<-done
		if n := st.passes.Load(); held != (n == 0) {
			t.Errorf("lock held elsewhere %t: %d passes", held, n)
		}
	}
}

// syncLock is a fakeLock safe for Run's goroutine and the test's.
type syncLock struct {
	mu sync.Mutex
	fakeLock
}

func (l *syncLock) Maintenance(ctx context.Context, wait bool, fn func(context.Context) error) (bool, error) {
	l.mu.Lock()
	held := l.held
	l.waits = append(l.waits, wait)
	l.mu.Unlock()
	if held && !wait {
		return false, nil
	}
	return true, fn(ctx)
}

func (l *syncLock) tries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waits)
}
