package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkFire fires 1,000 jobs per Fire call, each job once per call
// at successive seconds, as a scanner firing a busy second would.
// Report jobs/s from ns/op: 1,000 firings per op.
func BenchmarkFire(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	s := newStore(b)
	t0 := baseTime()
	epochs := map[int]int64{}
	for bk := range testBuckets {
		claim(b, s, "bench", 1, bk)
		epochs[bk] = 1
	}
	jobs := make([]*Job, batch)
	for i := range jobs {
		jobs[i] = mustCreate(b, s, testJob(fmt.Sprintf("bench-%04d", i), &t0))
	}
	firings := make([]Firing, batch)
	at := t0
	for b.Loop() {
		next := at.Add(time.Second)
		for i, j := range jobs {
			firings[i] = Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next}
		}
		res, err := s.Fire(ctx, "bench", epochs, firings)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Executions) != batch {
			b.Fatalf("%d executions, want %d (skipped %d, fenced %v)", len(res.Executions), batch, res.Skipped, res.Fenced)
		}
		at = next
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "firings/s")
}
