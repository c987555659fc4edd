package maintenance

import (
	"context"
	"errors"
	"slices"
	"testing"
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
