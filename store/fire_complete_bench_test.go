package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/tock-sched/tock/store/model"
)

// BenchmarkFireCompleting fires 1,000 one-shot jobs per Fire call, each
// completed by its firing: the firing that changes a job's state, which
// job_names' copy of it follows (migration 37's trigger). The jobs are
// created outside the timer. Report firings/s.
func BenchmarkFireCompleting(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	s := newStore(b)
	epochs := map[int]int64{}
	for bk := range testBuckets {
		claim(b, s, "bench", 1, bk)
		epochs[bk] = 1
	}
	t0 := baseTime()
	firings := make([]Firing, batch)
	fired := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		jobs := make([]*model.Job, batch)
		for k := range jobs {
			jobs[k] = testJob(fmt.Sprintf("once-%06d-%04d", i, k), &t0)
		}
		if err := s.CopyJobs(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		for k, j := range jobs {
			firings[k] = Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0}
		}
		b.StartTimer()
		res, err := s.Fire(ctx, "bench", epochs, firings)
		if err != nil || len(res.Executions) != batch {
			b.Fatalf("fire: %d executions, %v", len(res.Executions), err)
		}
		fired += batch
	}
	b.ReportMetric(float64(fired)/b.Elapsed().Seconds(), "firings/s")
}
