package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

func TestCreateJobBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	taken := mustCreate(t, s, testJob("taken", nil))
	next := baseTime().Add(time.Hour)

	jobs := []*model.Job{
		testJob("b-0", &next),
		testJob("taken", &next), // a stored job's name
		testJob("b-2", nil),
		testJob("b-0", &next), // an earlier job's name
		testJob("", &next),    // no name
		testJob("b-5", &next),
		testJob("b-6", &next), // a stored job's id
	}
	jobs[2].Namespace, jobs[2].State, jobs[2].NextRunAt = "team", domain.JobPaused, nil
	jobs[6].ID = taken.ID
	before := time.Now().Add(-time.Second)
	errs, err := s.CreateJobBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != len(jobs) {
		t.Fatalf("%d results for %d jobs", len(errs), len(jobs))
	}
	for i, want := range []error{nil, ErrConflict, nil, ErrConflict, errors.New("any"), nil, ErrConflict} {
		switch {
		case want == nil && errs[i] != nil:
			t.Errorf("job %d: %v, want stored", i, errs[i])
		case want == ErrConflict && !errors.Is(errs[i], ErrConflict):
			t.Errorf("job %d: %v, want ErrConflict", i, errs[i])
		case want != nil && want != ErrConflict && (errs[i] == nil || errors.Is(errs[i], ErrConflict)):
			t.Errorf("job %d: %v, want a plain error", i, errs[i])
		}
	}
	for _, i := range []int{0, 2, 5} {
		j := jobs[i]
		if j.CreatedAt.Before(before) || !j.UpdatedAt.Equal(j.CreatedAt) || j.CreatedAt.Location() != time.UTC {
			t.Errorf("job %d: created %v, updated %v", i, j.CreatedAt, j.UpdatedAt)
		}
		got, err := s.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Errorf("stored job %d differs from the one created:\n got %+v\nwant %+v", i, got, j)
		}
	}
	for _, i := range []int{1, 3, 6} {
		if !jobs[i].CreatedAt.IsZero() {
			t.Errorf("job %d has CreatedAt set but was not stored", i)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != 4 {
		t.Errorf("%d jobs stored, want 4 (taken and three of the batch)", n)
	}
	if n := count(t, s, "SELECT count(*) FROM job_names"); n != 4 {
		t.Errorf("%d job names stored, want 4", n)
	}
	if got, err := s.GetJob(ctx, taken.ID); err != nil || got.Name != "taken" {
		t.Errorf("the stored job whose id a batch job reused: %+v, %v", got, err)
	}

	// Nothing to store is not an error.
	if errs, err := s.CreateJobBatch(ctx, []*model.Job{testJob("taken", nil)}); err != nil || !errors.Is(errs[0], ErrConflict) {
		t.Errorf("a batch of one taken name: %v, %v", errs, err)
	}
	if errs, err := s.CreateJobBatch(ctx, nil); err != nil || len(errs) != 0 {
		t.Errorf("an empty batch: %v, %v", errs, err)
	}
}

// Batches racing for the same names store each name once; the losers are
// told so, and no transaction deadlocks.
func TestCreateJobBatchConcurrentNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const names, batches = 200, 4
	var wg sync.WaitGroup
	results := make([][]error, batches)
	failures := make([]error, batches)
	for b := range batches {
		jobs := make([]*model.Job, names)
		for i, k := range rand.Perm(names) {
			jobs[i] = testJob(fmt.Sprintf("race-%03d", k), nil)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[b], failures[b] = s.CreateJobBatch(ctx, jobs)
		}()
	}
	wg.Wait()
	stored, conflicts := 0, 0
	for b := range batches {
		if failures[b] != nil {
			t.Fatalf("batch %d: %v", b, failures[b])
		}
		for _, err := range results[b] {
			switch {
			case err == nil:
				stored++
			case errors.Is(err, ErrConflict):
				conflicts++
			default:
				t.Errorf("batch %d: %v", b, err)
			}
		}
	}
	if stored != names || conflicts != names*(batches-1) {
		t.Errorf("%d stored and %d conflicts, want %d and %d", stored, conflicts, names, names*(batches-1))
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != names {
		t.Errorf("%d jobs stored, want %d", n, names)
	}
}

// Jobs due soon are announced on JobsChannel so that a scanner loads them
// at once: each one when there are few, one full scan for many; jobs due
// later are not announced.
func TestCreateJobBatchNotifies(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	got := listenJobs(t, s)
	ctx := context.Background()
	soon, later := baseTime().Add(2*time.Second), baseTime().Add(time.Hour)
	next := func() string {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
			return ""
		}
	}
	batch := func(prefix string, n int, at *time.Time) []*model.Job {
		jobs := make([]*model.Job, n)
		for i := range jobs {
			jobs[i] = testJob(fmt.Sprintf("%s-%03d", prefix, i), at)
		}
		if errs, err := s.CreateJobBatch(ctx, jobs); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("CreateJobBatch: %v, %v", err, errors.Join(errs...))
		}
		return jobs
	}

	few := batch("few", 3, &soon)
	want := map[string]bool{}
	for _, j := range few {
		want[fmt.Sprintf("%d:%s", j.Bucket, j.ID)] = true
	}
	for range few {
		if n := next(); !want[n] {
			t.Errorf("notification %q, want one of the batch's jobs", n)
		}
	}

	batch("later", 3, &later)
	paused := testJob("paused", &soon)
	paused.State, paused.NextRunAt = domain.JobPaused, nil
	if errs, err := s.CreateJobBatch(ctx, []*model.Job{paused}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	batch("many", notifyEach+1, &soon)
	if n := next(); n != "*" {
		t.Errorf("notification %q after a batch of %d due soon (one due later, one paused before it), want a full scan %q",
			n, notifyEach+1, "*")
	}
}

// listenJobs listens on JobsChannel and returns its payloads, once the
// listener is listening.
func listenJobs(t *testing.T, s *Store) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 1024)
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func(_, payload string) { got <- payload }, JobsChannel) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN "tock_jobs"%' AND state = 'idle'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// BenchmarkCreateJobBatch stores 1,000 jobs per CreateJobBatch call, the
// most POST /v1/jobs:batch sends. Report jobs/s.
func BenchmarkCreateJobBatch(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	s := newStore(b)
	next := baseTime().Add(time.Hour)
	round := 0
	for b.Loop() {
		b.StopTimer()
		jobs := make([]*model.Job, batch)
		for i := range jobs {
			jobs[i] = testJob(fmt.Sprintf("bench-%04d-%04d", round, i), &next)
		}
		round++
		b.StartTimer()
		errs, err := s.CreateJobBatch(ctx, jobs)
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(round*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// Concurrent CreateJob calls are stored together, yet each caller gets
// the outcome it would have got alone: its job stored, its name taken, or
// its id taken (which fails its whole combined batch in the database, so
// the batch is retried call by call), and a refused job refuses no other.
func TestCreateJobConcurrentCallsKeepTheirOwnOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	existing := testJob("existing", nil)
	mustCreate(t, s, existing)

	type call struct {
		job  *model.Job
		want string // "stored", "conflict" or "refused"
	}
	var calls []call
	for i := range 96 {
		calls = append(calls, call{testJob(fmt.Sprintf("own-%02d", i), nil), "stored"})
	}
	for i := range 8 { // two calls per name: one is stored, one conflicts
		calls = append(calls, call{testJob(fmt.Sprintf("pair-%d", i), nil), "pair"}, call{testJob(fmt.Sprintf("pair-%d", i), nil), "pair"})
	}
	calls = append(calls, call{testJob("existing", nil), "conflict"})
	dupID := testJob("fresh-name-taken-id", nil)
	dupID.ID = existing.ID
	calls = append(calls, call{dupID, "conflict"}, call{testJob("", nil), "refused"})
	rand.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	// A second wave: Postgres refuses these payloads (jsonb has no
	// \u0000), failing any batch they are in as a whole.
	wave2 := len(calls)
	for i := range 3 {
		bad := testJob(fmt.Sprintf("nul-%d", i), nil)
		bad.Payload = []byte(`{"s":"\u0000"}`)
		calls = append(calls, call{bad, "refused"})
	}
	for i := range 40 {
		calls = append(calls, call{testJob(fmt.Sprintf("wave2-%02d", i), nil), "stored"})
	}
	rand.Shuffle(len(calls)-wave2, func(i, j int) { calls[wave2+i], calls[wave2+j] = calls[wave2+j], calls[wave2+i] })

	// Each wave all at once, so that many calls arrive while others are
	// being stored.
	errs := make([]error, len(calls))
	for _, wave := range [][2]int{{0, wave2}, {wave2, len(calls)}} {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := wave[0]; i < wave[1]; i++ {
			wg.Go(func() {
				<-start
				errs[i] = s.CreateJob(ctx, calls[i].job)
			})
		}
		close(start)
		wg.Wait()
		if wave[0] == 0 && s.creates.combined.Load() == 0 {
			t.Fatal("no calls were combined into a batch: the test proves nothing")
		}
	}
	if s.creates.retried.Load() == 0 {
		t.Fatal("no batch was retried call by call: the test proves nothing")
	}
	pairStored := map[string]int{}
	for i, c := range calls {
		err := errs[i]
		switch c.want {
		case "stored":
			if err != nil {
				t.Errorf("create %q: %v, want it stored", c.job.Name, err)
				continue
			}
			got, gerr := s.GetJob(ctx, c.job.ID)
			if gerr != nil || got.Name != c.job.Name || got.Schedule != c.job.Schedule || !got.CreatedAt.Equal(c.job.CreatedAt) {
				t.Errorf("create %q returned %+v; stored %+v, %v", c.job.Name, c.job, got, gerr)
			}
		case "pair":
			if err == nil {
				pairStored[c.job.Name]++
			} else if !errors.Is(err, ErrConflict) {
				t.Errorf("create %q: %v, want nil or ErrConflict", c.job.Name, err)
			}
		case "conflict":
			if !errors.Is(err, ErrConflict) {
				t.Errorf("create %q (id %s): %v, want ErrConflict", c.job.Name, c.job.ID, err)
			}
		case "refused":
			if err == nil || errors.Is(err, ErrConflict) {
				t.Errorf("create %q: %v, want a refusal", c.job.Name, err)
			}
		}
	}
	for i := range 8 {
		if n := pairStored[fmt.Sprintf("pair-%d", i)]; n != 1 {
			t.Errorf("pair-%d stored %d times, want once", i, n)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != 1+96+8+40 {
		t.Errorf("%d jobs stored, want %d", n, 1+96+8+40)
	}
}
