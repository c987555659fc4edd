package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// BenchmarkDueAfter reads 10,000 due jobs spread over 256 buckets, as a
// scanner's full scan of its look-ahead does. Report jobs/s.
func BenchmarkDueAfter(b *testing.B) {
	const buckets, n = 256, 10_000
	ctx := context.Background()
	s := newStoreWith(b, buckets)
	t0 := baseTime().Add(time.Hour)
	jobs := make([]*model.Job, n)
	for i := range jobs {
		next := t0.Add(time.Duration(i%60) * time.Second)
		jobs[i] = testJob(fmt.Sprintf("due-%05d", i), &next)
	}
	if err := s.CopyJobs(ctx, jobs); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	all := make([]int, buckets)
	for i := range all {
		all[i] = i
	}
	for b.Loop() {
		due, err := s.ListDueJobs(ctx, all, time.Time{}, t0.Add(time.Minute), n+1)
		if err != nil || len(due) != n {
			b.Fatalf("%d due, %v", len(due), err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "jobs/s")
}
