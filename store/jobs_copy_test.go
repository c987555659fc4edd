package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

func TestBulkCreateJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	next := baseTime().Add(time.Hour)
	given := idInBucket(3)

	a := testJob("bulk-a", &next)
	b := testJob("bulk-b", nil)
	b.Namespace, b.ID, b.State, b.NextRunAt, b.Payload = "team", given, domain.JobPaused, nil, nil
	c := testJob("bulk-c", &next)
	c.Schedule.Cron, c.Timeout = "0 * * * * *", 0
	before := time.Now().Add(-time.Second)
	if err := s.CopyJobs(ctx, []*model.Job{a, b, c}); err != nil {
		t.Fatal(err)
	}

	if a.Namespace != "default" || a.State != domain.JobActive || a.ID.Version() != 7 {
		t.Errorf("a: namespace %q, state %q, id version %d; want default, active, 7", a.Namespace, a.State, a.ID.Version())
	}
	if b.ID != given || b.Namespace != "team" || b.State != domain.JobPaused {
		t.Errorf("b: id %s, namespace %q, state %q; want the given %s, team, paused", b.ID, b.Namespace, b.State, given)
	}
	for _, j := range []*model.Job{a, b, c} {
		if j.Bucket != domain.BucketOf(j.ID, testBuckets) {
			t.Errorf("%s: bucket %d, want %d", j.Name, j.Bucket, domain.BucketOf(j.ID, testBuckets))
		}
		if j.CreatedAt.Before(before) || !j.UpdatedAt.Equal(j.CreatedAt) || j.CreatedAt.Location() != time.UTC {
			t.Errorf("%s: created %v, updated %v", j.Name, j.CreatedAt, j.UpdatedAt)
		}
		got, err := s.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Errorf("stored job differs from the one created:\n got %+v\nwant %+v", got, j)
		}
	}
	// job_names rows: names are taken, and ListJobs finds the jobs.
	if err := s.CreateJob(ctx, testJob("bulk-a", nil)); !errors.Is(err, ErrConflict) {
		t.Errorf("CreateJob of a bulk-created name: %v, want ErrConflict", err)
	}
	list, _, err := s.ListJobs(ctx, JobFilter{Namespace: "default", NamePrefix: "bulk-"})
	if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != c.ID {
		t.Errorf("ListJobs = %d jobs, %v; want bulk-a and bulk-c", len(list), err)
	}
	// The scanner's query sees them.
	due, err := s.dueJobs(ctx, allBuckets(), next, 10)
	if err != nil || len(due) != 2 {
		t.Errorf("DueJobs = %d jobs, %v; want 2 (b is paused)", len(due), err)
	}

	if err := s.CopyJobs(ctx, nil); err != nil {
		t.Errorf("CopyJobs(nil) = %v", err)
	}
}

func TestBulkCreateJobsConflictRollsBackAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	taken := mustCreate(t, s, testJob("taken", nil))

	batch := func(names ...string) []*model.Job {
		var js []*model.Job
		for _, n := range names {
			js = append(js, testJob(n, nil))
		}
		return js
	}
	cases := map[string][]*model.Job{
		"name taken by a stored job": batch("x1", "x2", "taken", "x3"),
		"name twice in the batch":    batch("y1", "y2", "y1"),
		"id of a stored job": func() []*model.Job {
			js := batch("z1", "z2")
			js[1].ID = taken.ID
			return js
		}(),
		"id twice in the batch": func() []*model.Job {
			js := batch("w1", "w2")
			js[1].ID = uuid.Must(uuid.NewV7())
			js[0].ID = js[1].ID
			return js
		}(),
	}
	for name, jobs := range cases {
		err := s.CopyJobs(ctx, jobs)
		if !errors.Is(err, ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", name, err)
		}
		for _, j := range jobs {
			if !j.CreatedAt.IsZero() {
				t.Errorf("%s: %s has CreatedAt set after a failed call", name, j.Name)
			}
		}
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("%d jobs stored, want only the first one", n)
	}
	if n := count(t, s, "SELECT count(*) FROM job_names"); n != 1 {
		t.Errorf("%d job names stored, want only the first one", n)
	}

	if err := s.CopyJobs(ctx, []*model.Job{testJob("ok", nil), testJob("", nil)}); err == nil || errors.Is(err, ErrConflict) {
		t.Errorf("empty name: %v, want a plain error", err)
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("%d jobs stored after an invalid batch, want 1", n)
	}
}

func TestBulkCreateJobsTenThousand(t *testing.T) {
	t.Parallel()
	const n = 10_000
	ctx := context.Background()
	s := newStore(t)
	next := baseTime().Add(time.Hour)
	jobs := make([]*model.Job, n)
	for i := range jobs {
		jobs[i] = testJob(fmt.Sprintf("many-%05d", i), &next)
	}
	start := time.Now()
	if err := s.CopyJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d jobs in %s: %.0f jobs/s", n, took.Round(time.Millisecond), n/took.Seconds())
	if got := count(t, s, "SELECT count(*) FROM jobs WHERE next_run_at = $1", next); got != n {
		t.Errorf("%d jobs stored, want %d", got, n)
	}
	if got := count(t, s, "SELECT count(*) FROM job_names"); got != n {
		t.Errorf("%d job names stored, want %d", got, n)
	}
	// A sanity bound, an order of magnitude above what a small machine
	// does even under the race detector; BenchmarkBulkCreateJobs measures.
	if took > 10*time.Second {
		t.Errorf("10,000 jobs took %s", took)
	}
}

// BenchmarkBulkCreateJobs stores 10,000 jobs per CopyJobs call.
// Report jobs/s.
func BenchmarkBulkCreateJobs(b *testing.B) {
	const batch = 10_000
	ctx := context.Background()
	s := newStore(b)
	next := baseTime().Add(time.Hour)
	round := 0
	for b.Loop() {
		b.StopTimer()
		jobs := make([]*model.Job, batch)
		for i := range jobs {
			jobs[i] = testJob(fmt.Sprintf("bench-%03d-%05d", round, i), &next)
		}
		round++
		b.StartTimer()
		if err := s.CopyJobs(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(round*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// allBuckets is every bucket of a test store.
func allBuckets() []int {
	bs := make([]int, testBuckets)
	for i := range bs {
		bs[i] = i
	}
	return bs
}
