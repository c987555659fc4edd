package scanner

// Unit tests with an in-memory store. The real-Postgres, real-NATS path is
// covered end to end in policy_e2e_test.go and window_e2e_test.go,
// and in package node.

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore keeps jobs in memory and fires with the same compare-and-set
// and fencing rules as the real store.
type fakeStore struct {
	mu        sync.Mutex
	jobs      map[uuid.UUID]*model.Job
	epochs    map[int]int64
	fired     []store.Firing
	firedAt   []time.Time   // when each firing was committed
	fence     map[int]bool  // buckets whose firings report Fenced
	blockOn   chan struct{} // if set, Fire waits for it to close
	inFire    chan struct{} // signalled when Fire starts
	notifyFn  func(channel, payload string)
	fireCalls int
	dueCalls  int // ListDueJobs calls (scans)
	// outboxReads records ListUndispatchedExecutions and ListRedispatches
	// calls.
	outboxReads []outboxRead
}

// outboxRead is one ListUndispatchedExecutions call: its buckets, its time bound, and
// when it was made.
type outboxRead struct {
	buckets  []int
	bound    time.Time
	calledAt time.Time
	firsts   bool // first dispatches too (ListUndispatchedExecutions)
}

func newFakeStore() *fakeStore {
	return &fakeStore{jobs: map[uuid.UUID]*model.Job{}, epochs: map[int]int64{}, fence: map[int]bool{}}
}

func (f *fakeStore) Now(context.Context) (time.Time, error) { return time.Now(), nil }

func (f *fakeStore) ClaimBucket(_ context.Context, b int, _ string, e int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epochs[b] = e
	return nil
}

func (f *fakeStore) ListCalendars(context.Context, string) ([]model.Calendar, error) {
	return nil, nil
}

func (f *fakeStore) ListDueJobs(_ context.Context, buckets []int, after, until time.Time, _ int) ([]model.Due, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dueCalls++
	in := map[int]bool{}
	for _, b := range buckets {
		in[b] = true
	}
	var out []model.Due
	for _, j := range f.jobs {
		if in[j.Bucket] && j.State == domain.JobActive && j.NextRunAt != nil && !j.NextRunAt.After(until) &&
			(after.IsZero() || j.NextRunAt.After(after)) {
			out = append(out, model.DueOf(j))
		}
	}
	return out, nil
}

func (f *fakeStore) GetJob(_ context.Context, id uuid.UUID) (*model.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	c := *j
	return &c, nil
}

func (f *fakeStore) Fire(_ context.Context, _ string, epochs map[int]int64, firings []store.Firing) (model.FireResult, error) {
	if f.inFire != nil {
		f.inFire <- struct{}{}
	}
	if f.blockOn != nil {
		<-f.blockOn
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fireCalls++
	var res model.FireResult
	fencedSeen := map[int]bool{}
	for _, x := range firings {
		if f.fence[x.Bucket] || f.epochs[x.Bucket] != epochs[x.Bucket] {
			if !fencedSeen[x.Bucket] {
				res.Fenced = append(res.Fenced, x.Bucket)
				fencedSeen[x.Bucket] = true
			}
			continue
		}
		j := f.jobs[x.JobID]
		if j == nil || j.State != domain.JobActive || j.NextRunAt == nil || !j.NextRunAt.Equal(x.ScheduledFor) {
			res.Skipped++
			continue
		}
		j.NextRunAt = x.Next
		if x.Next == nil {
			j.State = domain.JobCompleted
		}
		f.fired = append(f.fired, x)
		f.firedAt = append(f.firedAt, time.Now())
		res.Executions = append(res.Executions, &model.Execution{
			ID: domain.ExecutionID(j.ID, x.ScheduledFor), JobID: j.ID, Bucket: j.Bucket, ScheduledFor: x.ScheduledFor,
		})
	}
	return res, nil
}

func (f *fakeStore) ReleaseBufferedExecutions(context.Context, []int) (int, error) { return 0, nil }

func (f *fakeStore) ListUndispatchedExecutions(_ context.Context, buckets []int, _ int, until time.Time) ([]*model.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outboxReads = append(f.outboxReads, outboxRead{slices.Clone(buckets), until, time.Now(), true})
	return nil, nil
}

func (f *fakeStore) ListRedispatches(_ context.Context, buckets []int, _ int, until time.Time) ([]*model.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outboxReads = append(f.outboxReads, outboxRead{slices.Clone(buckets), until, time.Now(), false})
	return nil, nil
}

func (f *fakeStore) reads() []outboxRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outboxReads)
}

func (f *fakeStore) notify(channel, payload string) {
	f.mu.Lock()
	fn := f.notifyFn
	f.mu.Unlock()
	if fn != nil {
		fn(channel, payload)
	}
}

func (f *fakeStore) Listen(ctx context.Context, fn func(channel, payload string), _ ...string) error {
	f.mu.Lock()
	f.notifyFn = fn
	f.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeStore) add(j *model.Job) {
	f.mu.Lock()
	f.jobs[j.ID] = j
	fn := f.notifyFn
	f.mu.Unlock()
	if fn != nil {
		fn(store.JobsChannel, strconv.Itoa(j.Bucket)+":"+j.ID.String())
	}
}

func (f *fakeStore) firedFor(id uuid.UUID) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Time
	for _, x := range f.fired {
		if x.JobID == id {
			out = append(out, x.ScheduledFor)
		}
	}
	return out
}

type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, []*model.Execution) {}

func (nopDispatcher) Hold(time.Time) func() { return func() {} }

func newScanner(t *testing.T, st *fakeStore, cfg Config) (*Scanner, func()) {
	t.Helper()
	cfg.Store, cfg.NodeID = st, "n1"
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = nopDispatcher{}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	return s, func() { cancel(); <-done }
}

func cronJob(bucket int, next time.Time) *model.Job {
	return &model.Job{
		ID: uuid.New(), Bucket: bucket, State: domain.JobActive, NextRunAt: &next,
		Schedule: schedule.Spec{Cron: "* * * * * *"},
	}
}

func TestFiresEverySecondOnTime(t *testing.T) {
	st := newFakeStore()
	first := time.Now().Truncate(time.Second).Add(time.Second)
	j := cronJob(1, first)
	st.add(j)
	s, stop := newScanner(t, st, Config{})
	defer stop()
	s.Acquire(1, 10)
	testenv.WaitFor(t, 5*time.Second, "3 firings", func() bool { return len(st.firedFor(j.ID)) >= 3 })
	got := st.firedFor(j.ID)
	for i, at := range got[:3] {
		if want := first.Add(time.Duration(i) * time.Second); !at.Equal(want) {
			t.Fatalf("firing %d at %s, want %s", i, at, want)
		}
	}
	// Each run is committed ahead of its time (FireLead), so that the
	// dispatcher can publish it on the dot.
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, x := range st.fired[:3] {
		if ahead := x.ScheduledFor.Sub(st.firedAt[i]); ahead <= 0 || ahead > time.Second {
			t.Errorf("run %s committed %s ahead of its time, want within the 500ms lead", x.ScheduledFor.Format(time.TimeOnly), ahead)
		}
	}
}

func TestNewJobInsideLookaheadFiresWithoutWaitingForAScan(t *testing.T) {
	st := newFakeStore()
	s, stop := newScanner(t, st, Config{Lookahead: 30 * time.Second, ScanInterval: 30 * time.Second})
	defer stop()
	s.Acquire(2, 1)
	testenv.WaitFor(t, 2*time.Second, "the listener", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.notifyFn != nil
	})
	time.Sleep(100 * time.Millisecond) // the first scan has run and found nothing
	due := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
	j := cronJob(2, due)
	j.Schedule = schedule.Spec{At: &due}
	st.add(j)
	testenv.WaitFor(t, 3*time.Second, "the new job to fire", func() bool { return len(st.firedFor(j.ID)) == 1 })
	if late := time.Since(due); late > 2*time.Second {
		t.Fatalf("fired %s late", late)
	}
}

func TestFencedBucketStopsFiring(t *testing.T) {
	st := newFakeStore()
	j := cronJob(3, time.Now().Truncate(time.Second).Add(time.Second))
	st.add(j)
	st.fence[3] = true
	s, stop := newScanner(t, st, Config{FullScanEvery: 1})
	defer stop()
	s.Acquire(3, 5)
	testenv.WaitFor(t, 5*time.Second, "a fenced firing", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.fireCalls > 0
	})
	// Were the bucket still owned, every scan would reload the job (its
	// next run never advanced) and try again each second.
	time.Sleep(2500 * time.Millisecond)
	st.mu.Lock()
	calls := st.fireCalls
	st.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d firing attempts in a fenced bucket, want 1 and then none", calls)
	}
	if n := len(st.firedFor(j.ID)); n != 0 {
		t.Fatalf("fired %d times in a fenced bucket", n)
	}
}

func TestReleaseWaitsForTheFiringInFlight(t *testing.T) {
	st := newFakeStore()
	st.blockOn = make(chan struct{})
	st.inFire = make(chan struct{}, 1)
	j := cronJob(4, time.Now().Add(-time.Second).Truncate(time.Millisecond))
	st.add(j)
	s, stop := newScanner(t, st, Config{})
	defer stop()
	s.Acquire(4, 1)
	select {
	case <-st.inFire:
	case <-time.After(5 * time.Second):
		t.Fatal("no firing started")
	}
	released := make(chan struct{})
	go func() { s.Release(4); close(released) }()
	select {
	case <-released:
		t.Fatal("Release returned while a firing transaction was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(st.blockOn)
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not return after the firing finished")
	}
	n := len(st.firedFor(j.ID))
	time.Sleep(1500 * time.Millisecond)
	if m := len(st.firedFor(j.ID)); m != n {
		t.Fatalf("fired %d more times after Release", m-n)
	}
}

// The outbox is read ahead by one pass and a second (the dispatcher holds
// what is not due yet), and at once for a bucket ExecChannel names.
func TestOutboxReadsAheadAndOnNotify(t *testing.T) {
	st := newFakeStore()
	s, stop := newScanner(t, st, Config{OutboxInterval: time.Hour})
	defer stop()
	s.Acquire(3, 1)
	s.Acquire(5, 1)
	testenv.WaitFor(t, 5*time.Second, "outbox read of the acquired buckets", func() bool {
		reads := st.reads()
		return len(reads) >= 1
	})
	reads := st.reads()
	r := reads[0]
	if ahead := r.bound.Sub(r.calledAt); ahead < time.Hour || ahead > time.Hour+2*time.Second {
		t.Fatalf("outbox read up to %s ahead, want OutboxInterval + 1s", ahead)
	}
	testenv.WaitFor(t, 5*time.Second, "the listener", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.notifyFn != nil
	})
	n := len(reads)
	st.notify(store.ExecChannel, "5")
	st.notify(store.ExecChannel, "7") // not ours
	testenv.WaitFor(t, 5*time.Second, "outbox read after the notification", func() bool {
		reads := st.reads()
		return len(reads) > n
	})
	reads = st.reads()
	if got := reads[n].buckets; !slices.Equal(got, []int{5}) {
		t.Fatalf("notified outbox read of buckets %v, want [5]", got)
	}
	if !r.firsts || reads[n].firsts {
		t.Fatalf("first dispatches read on taking buckets %v, on a notification %v; want true, false", r.firsts, reads[n].firsts)
	}
}

// The regular outbox passes read fired executions' first dispatches
// every FirstDispatchEvery passes only: the node's own dispatcher
// publishes what it fires.
func TestOutboxReadsFirstDispatchesEveryFewPasses(t *testing.T) {
	st := newFakeStore()
	s, stop := newScanner(t, st, Config{OutboxInterval: 20 * time.Millisecond, FirstDispatchEvery: 3})
	defer stop()
	s.Acquire(3, 1)
	testenv.WaitFor(t, 10*time.Second, "a dozen outbox passes", func() bool { return len(st.reads()) >= 13 })
	firsts := 0
	reads := st.reads()[:13]
	for _, r := range reads {
		if r.firsts {
			firsts++
		}
	}
	// The acquisition's read, and one in three regular passes.
	if firsts < 4 || firsts > 6 {
		t.Fatalf("%d of %d outbox reads included first dispatches, want about one in three", firsts, len(reads))
	}
}

// Owned reports the buckets whose epoch is recorded
// (maintenance.LostWorkRescuer re-queues lost work in them), and forgets
// a released one.
func TestOwnedReportsClaimedBuckets(t *testing.T) {
	st := newFakeStore()
	s, stop := newScanner(t, st, Config{})
	defer stop()
	s.Acquire(2, 1)
	s.Acquire(5, 1)
	testenv.WaitFor(t, 5*time.Second, "buckets 2 and 5 owned", func() bool { return slices.Equal(s.Owned(), []int{2, 5}) })
	s.Release(2)
	if got := s.Owned(); !slices.Equal(got, []int{5}) {
		t.Fatalf("owned after releasing bucket 2: %v, want [5]", got)
	}
}

// holdLog is a Dispatcher that logs Hold, Dispatch and release in order.
type holdLog struct {
	mu  sync.Mutex
	log []string
	at  []time.Time // the floor of each Hold
}

func (h *holdLog) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, s)
}

func (h *holdLog) Dispatch(_ context.Context, execs []*model.Execution) {
	if len(execs) > 0 { // an empty outbox read hands over nothing
		h.add("dispatch")
	}
}

func (h *holdLog) Hold(floor time.Time) func() {
	h.mu.Lock()
	h.log = append(h.log, "hold")
	h.at = append(h.at, floor)
	h.mu.Unlock()
	return func() { h.add("release") }
}

// Every firing transaction holds the dispatcher's publish positions from
// before it starts until its executions are handed over, so a position
// never passes executions still being fired.
func TestFiringHoldsThePublishPositions(t *testing.T) {
	st := newFakeStore()
	j := cronJob(1, time.Now().Truncate(time.Second).Add(time.Second))
	st.add(j)
	h := &holdLog{}
	before := time.Now().Add(-time.Minute)
	s, stop := newScanner(t, st, Config{Dispatcher: h})
	s.Acquire(1, 10)
	testenv.WaitFor(t, 5*time.Second, "2 firings", func() bool { return len(st.firedFor(j.ID)) >= 2 })
	stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	held := 0
	for i, e := range h.log {
		switch e {
		case "hold":
			held++
		case "dispatch":
			if held != 1 {
				t.Fatalf("dispatch outside a hold: %v", h.log)
			}
		case "release":
			if held != 1 || i == 0 || h.log[i-1] != "dispatch" {
				t.Fatalf("released before its executions were dispatched: %v", h.log)
			}
			held--
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, floor := range h.at {
		if floor.Before(before) || i < len(st.firedAt) && floor.After(st.firedAt[i]) {
			t.Fatalf("hold %d at %v, not just before its firing at %v", i, floor, st.firedAt[i])
		}
	}
}

// A job announced changed while a firing of it is in flight is read
// again once the firing is done: the firing's result, which puts back the
// job as read before the change, does not hide the change until the next
// full scan (a chain created on an every-second job missed its first
// runs so, in TestDependentJobsUnderKillsAndRedelivery).
func TestChangeAnnouncedDuringAFiringIsReadAgain(t *testing.T) {
	st := newFakeStore()
	st.blockOn = make(chan struct{})
	st.inFire = make(chan struct{}, 100)
	j := cronJob(5, time.Now().Add(300*time.Millisecond).Truncate(time.Second).Add(time.Second))
	st.add(j)
	s, stop := newScanner(t, st, Config{Lookahead: 30 * time.Second, ScanInterval: 30 * time.Second})
	defer stop()
	testenv.WaitFor(t, 2*time.Second, "the listener", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.notifyFn != nil
	})
	s.Acquire(5, 1)
	select {
	case <-st.inFire:
	case <-time.After(5 * time.Second):
		t.Fatal("no firing started")
	}
	// A chain is created on it meanwhile: its row says so, and it is
	// announced.
	st.mu.Lock()
	changed := *st.jobs[j.ID]
	changed.Chains = true
	st.mu.Unlock()
	st.add(&changed)
	time.Sleep(300 * time.Millisecond) // the announcement arrives while the firing waits
	close(st.blockOn)
	testenv.WaitFor(t, 5*time.Second, "two more firings", func() bool { return len(st.firedFor(j.ID)) >= 3 })
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, x := range st.fired[1:] {
		if !x.Chains {
			t.Errorf("the run at %s fired without the job's chains", x.ScheduledFor.Format(time.TimeOnly))
		}
	}
}
