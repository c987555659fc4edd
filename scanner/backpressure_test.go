package scanner

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

func TestBacklogCounted(t *testing.T) {
	q := func(waiting int, rate float64) dispatcher.QueueBacklog {
		return dispatcher.QueueBacklog{Consumer: "c", Waiting: waiting, Rate: rate}
	}
	cases := []struct {
		name                 string
		b                    dispatcher.Backlog
		wantWaiting, wantLim int
	}{
		{"nothing", dispatcher.Backlog{}, 0, 5000},
		{"busy queue: limit of its rate", dispatcher.Backlog{Queues: []dispatcher.QueueBacklog{q(20_000, 6000)}}, 20_000, 18_000},
		{"busy queue far behind: capped at twice its limit", dispatcher.Backlog{Queues: []dispatcher.QueueBacklog{q(143_000, 6000)}}, 36_000, 18_000},
		{"slow rate: the floor", dispatcher.Backlog{Queues: []dispatcher.QueueBacklog{q(4000, 1000)}}, 4000, 5000},
		{"no executors (rate 0): counts nothing", dispatcher.Backlog{Queues: []dispatcher.QueueBacklog{q(50_000, 0)}}, 0, 5000},
		{"slow custom queue beside a busy one", dispatcher.Backlog{Queues: []dispatcher.QueueBacklog{q(100_000, 10), q(3000, 6000)}}, 3060, 18_030},
		{"the dispatcher's unpublished count whole", dispatcher.Backlog{Unpublished: 7000}, 7000, 5000},
	}
	for _, c := range cases {
		w, l := backlogCounted(c.b, 3*time.Second, 5000)
		if w != c.wantWaiting || l != c.wantLim {
			t.Errorf("%s: counted %d of limit %d, want %d of %d", c.name, w, l, c.wantWaiting, c.wantLim)
		}
	}
}

// fakeBacklog is a backlog reading a test sets.
type fakeBacklog struct {
	mu sync.Mutex
	b  dispatcher.Backlog
	ok bool
}

func (f *fakeBacklog) Backlog() (dispatcher.Backlog, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b, f.ok
}

// read makes a new reading: unpublished executions (counted whole), as
// of now.
func (f *fakeBacklog) read(unpublished int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b, f.ok = dispatcher.Backlog{At: time.Now(), Unpublished: unpublished}, ok
}

// yearlyJob is a job due at next whose run after is a year away.
func yearlyJob(bucket int, next time.Time) *model.Job {
	j := cronJob(bucket, next)
	j.Schedule = schedule.Spec{Cron: "0 0 0 1 1 *"}
	return j
}

func (f *fakeStore) firedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fired)
}

// waitHeld waits until firing has been held back for d more.
func waitHeld(t *testing.T, s *Scanner, d time.Duration) {
	t.Helper()
	from := testutil.ToFloat64(s.m.heldSeconds)
	testenv.WaitFor(t, 10*time.Second, "firing held back for "+d.String(), func() bool {
		return testutil.ToFloat64(s.m.heldSeconds)-from >= d.Seconds()
	})
}

// Over the limit nothing fires; under it, no more than the limit fires
// per reading (the runs fired since a reading count until the next one
// includes them); without a reading everything fires; and every run fires
// once.
func TestFiringIsHeldBackByTheBacklog(t *testing.T) {
	st := newFakeStore()
	due := time.Now().Add(-time.Second)
	const n = 3000
	for range n {
		st.add(yearlyJob(1, due))
	}
	bl := &fakeBacklog{}
	bl.read(5000, true) // over MinBacklog
	s, stop := newScanner(t, st, Config{Backlog: bl, MinBacklog: 1000, BatchSize: 100})
	defer stop()
	s.Acquire(1, 10)
	waitHeld(t, s, 300*time.Millisecond)
	if got := st.firedCount(); got != 0 {
		t.Fatalf("fired %d with the backlog over its limit", got)
	}

	bl.read(0, true)
	testenv.WaitFor(t, 10*time.Second, "a limit's worth fired", func() bool { return st.firedCount() >= 1000 })
	waitHeld(t, s, 300*time.Millisecond)
	if got := st.firedCount(); got != 1000 {
		t.Fatalf("fired %d on one reading of an empty backlog, want the limit, 1000", got)
	}

	bl.read(0, true)
	testenv.WaitFor(t, 10*time.Second, "another limit's worth fired", func() bool { return st.firedCount() >= 2000 })
	waitHeld(t, s, 300*time.Millisecond)
	if got := st.firedCount(); got != 2000 {
		t.Fatalf("fired %d after two readings, want 2000", got)
	}

	bl.read(0, false) // NATS cannot be read: fail open
	testenv.WaitFor(t, 10*time.Second, "the rest fired", func() bool { return st.firedCount() >= n })
	st.mu.Lock()
	defer st.mu.Unlock()
	seen := map[string]bool{}
	for _, x := range st.fired {
		k := x.JobID.String() + x.ScheduledFor.String()
		if seen[k] {
			t.Fatalf("job %s fired twice at %s", x.JobID, x.ScheduledFor)
		}
		seen[k] = true
	}
	if len(st.fired) != n {
		t.Fatalf("fired %d, want %d", len(st.fired), n)
	}
}

// A burst fired ahead of its second (the adaptive lead) waits in the
// dispatcher for its time, not for executors: it does not count, and an
// empty backlog lets all of it fire ahead, however small the limit.
func TestBurstFiredAheadIsNotHeldBack(t *testing.T) {
	st := newFakeStore()
	at := time.Now().Truncate(time.Second).Add(5 * time.Second)
	const n = 5000
	for range n {
		st.add(cronJob(1, at))
	}
	bl := &fakeBacklog{}
	bl.read(0, true) // never read again: whatever fires is counted until the next reading
	s, stop := newScanner(t, st, Config{Backlog: bl, MinBacklog: 1000})
	defer stop()
	s.Acquire(1, 10)
	testenv.WaitFor(t, 15*time.Second, "the burst fired", func() bool { return st.firedCount() >= n })
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, x := range st.fired {
		if ahead := at.Sub(st.firedAt[i]); x.ScheduledFor.Equal(at) && ahead < 500*time.Millisecond {
			t.Fatalf("a run of the burst committed %s ahead of its second: held back by the backlog", ahead)
		}
	}
}

// While firing is held back, the heap already holds more due runs than
// may fire, and a scan would only add later ones: scans are put off
// until the held runs have fired, then one comes at once.
func TestScansWaitWhileFiringIsHeldBack(t *testing.T) {
	st := newFakeStore()
	due := time.Now().Add(-time.Second)
	for range 500 {
		st.add(yearlyJob(1, due))
	}
	bl := &fakeBacklog{}
	bl.read(5000, true)
	s, stop := newScanner(t, st, Config{Backlog: bl, MinBacklog: 1000, ScanInterval: 100 * time.Millisecond, Lookahead: time.Second})
	defer stop()
	s.Acquire(1, 10)
	waitHeld(t, s, 100*time.Millisecond)
	st.mu.Lock()
	scans := st.dueCalls
	st.mu.Unlock()
	waitHeld(t, s, 500*time.Millisecond) // five scan intervals
	st.mu.Lock()
	during := st.dueCalls - scans
	st.mu.Unlock()
	if during > 1 {
		t.Fatalf("%d scans while firing was held back, want none (or the one under way)", during)
	}
	bl.read(0, true)
	testenv.WaitFor(t, 10*time.Second, "the held runs fired and a scan after", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.fired) == 500 && st.dueCalls > scans+during
	})
}
