package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// BenchmarkFire fires 1,000 jobs per Fire call, each job once per call
// at successive seconds, as a scanner firing a busy second would.
// Report jobs/s from ns/op: 1,000 firings per op.
func BenchmarkFire(b *testing.B) {
	const batch = 1000
	s := newStore(b)
	t0 := baseTime()
	epochs, jobs := benchJobs(b, s, batch, t0)
	fireLoop(b, s, epochs, jobs, t0)
}

// BenchmarkFireJittered is BenchmarkFire with every run jittered (up to
// 30 s), so that each firing takes the policy path (store/fire_policy.go)
// instead of the plain statement: what a million jobs at midnight with a
// jitter cost to fire. Report firings/s.
func BenchmarkFireJittered(b *testing.B) {
	const batch = 1000
	s := newStore(b)
	t0 := baseTime()
	epochs, jobs := benchJobs(b, s, batch, t0)
	fireLoopWith(b, s, epochs, jobs, t0, func(f *Firing, i int) {
		due := f.ScheduledFor.Add(time.Duration(i*29) * time.Millisecond)
		f.Runs = []model.Run{{At: f.ScheduledFor, Due: &due}}
	})
}

// fireLoop fires every job of jobs once per op, at successive seconds
// from t0, and reports firings/s.
func fireLoop(b *testing.B, s *Store, epochs map[int]int64, jobs []*model.Job, t0 time.Time) {
	fireLoopWith(b, s, epochs, jobs, t0, nil)
}

// fireLoopWith is fireLoop with each firing (of job i) changed by change.
func fireLoopWith(b *testing.B, s *Store, epochs map[int]int64, jobs []*model.Job, t0 time.Time, change func(f *Firing, i int)) {
	ctx := context.Background()
	firings := make([]Firing, len(jobs))
	at := t0
	for b.Loop() {
		next := at.Add(time.Second)
		for i, j := range jobs {
			firings[i] = Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next}
			if change != nil {
				change(&firings[i], i)
			}
		}
		res, err := s.Fire(ctx, "bench", epochs, firings)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Executions) != len(jobs) {
			b.Fatalf("%d executions, want %d (skipped %d, fenced %v)", len(res.Executions), len(jobs), res.Skipped, res.Fenced)
		}
		at = next
	}
	b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "firings/s")
}

// BenchmarkRecordEvents records batches of 500 events as the recorder
// writes them, three batches in flight at once (recorder.Writers): each
// op fires 3×500 executions (not timed), then records a start for each
// (three concurrent RecordAttemptEvents calls) and then an end (quick attempts
// report only the end, with its start; this records both to count the
// slower life). Report events/s.
func BenchmarkRecordEvents(b *testing.B) {
	const batch, writers = 500, 3
	ctx := context.Background()
	s := newStore(b)
	t0 := baseTime()
	epochs, jobs := benchJobs(b, s, batch*writers, t0)
	at := t0
	starts, ends := make([]model.AttemptEvent, batch*writers), make([]model.AttemptEvent, batch*writers)
	for b.Loop() {
		b.StopTimer()
		next := at.Add(time.Second)
		res := fireEvery(b, s, epochs, jobs, at, next)
		for i, e := range res.Executions {
			starts[i] = model.AttemptEvent{Type: domain.EventStarted, ID: e.ID, Attempt: 1, Executor: "x", At: at}
			ends[i] = model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", At: at, Type: domain.EventSucceeded, Output: "ok"}
		}
		at = next
		b.StartTimer()
		for _, evs := range [][]model.AttemptEvent{starts, ends} {
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					if _, err := s.RecordAttemptEvents(ctx, evs[w*batch:(w+1)*batch]); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	}
	b.ReportMetric(float64(b.N*2*batch*writers)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRecordSucceeded records the common case as the recorder
// writes it: batches of 200 succeeded events (quick attempts, reporting
// their starts in their ends), each for a fresh queued execution, with
// the fast path (executions_fast.go) and with the rules alone. Each op
// fires 200 executions (not timed), then records their successes in one
// RecordAttemptEvents call (allocs/op are that call's). Besides ns/event
// it reports pg-ns/event, the CPU time the database's backends spent in
// those calls (from /proc/<pid>/stat, in clock ticks of 10 ms: a sum over
// many ops, and only where Postgres runs on this machine).
// pg_stat_statements would say which statements; it is not loaded here.
func BenchmarkRecordSucceeded(b *testing.B) {
	for _, path := range []struct {
		name string
		slow bool
	}{{"rules", true}, {"fast", false}} {
		b.Run(path.name, func(b *testing.B) {
			const batch = 200
			ctx := context.Background()
			s := newStore(b)
			s.recordStats.slowOnly = path.slow
			at := baseTime().Add(-time.Hour)
			epochs, jobs := benchJobs(b, s, batch, at)
			events := make([]model.AttemptEvent, batch)
			var pgTicks int64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				next := at.Add(time.Second)
				res := fireEvery(b, s, epochs, jobs, at, next)
				pub := at.Add(5 * time.Millisecond)
				for i, e := range res.Executions {
					events[i] = model.AttemptEvent{ID: e.ID, Attempt: 1, Executor: "x", Type: domain.EventSucceeded,
						At: at.Add(40 * time.Millisecond), StartedAt: ptr(at.Add(10 * time.Millisecond)), PublishedAt: &pub, Output: "ok"}
				}
				at = next
				pids := backends(b, s)
				before := cpuTicks(pids)
				b.StartTimer()
				if _, err := s.RecordAttemptEvents(ctx, events); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				pgTicks += cpuTicks(pids) - before
				b.StartTimer()
			}
			n := float64(b.N * batch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
			b.ReportMetric(float64(pgTicks)*float64(10*time.Millisecond)/n, "pg-ns/event")
			if fast := s.recordStats.fast.Load(); path.slow != (fast == 0) {
				b.Fatalf("%d executions recorded by the fast path", fast)
			}
		})
	}
}

// backends are the process ids of the store's database's backends.
func backends(b *testing.B, s *Store) []int {
	rows, err := s.pool.Query(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'")
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		b.Fatal(err)
	}
	return pids
}

// cpuTicks is the CPU time (user and system, in clock ticks) that the
// processes pids have used, as far as /proc shows them.
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is the
		// 3rd field of the line, utime and stime the 14th and 15th.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + k
	}
	return sum
}

// benchJobs claims every test bucket for node "bench" at epoch 1 and
// creates n jobs due at t0.
func benchJobs(b testing.TB, s *Store, n int, t0 time.Time) (map[int]int64, []*model.Job) {
	epochs := map[int]int64{}
	for bk := range testBuckets {
		claim(b, s, "bench", 1, bk)
		epochs[bk] = 1
	}
	jobs := make([]*model.Job, n)
	for i := range jobs {
		jobs[i] = mustCreate(b, s, testJob(fmt.Sprintf("bench-%04d", i), &t0))
	}
	return epochs, jobs
}

// BenchmarkFireSpread fires as a busy scanner does with many buckets:
// 256 buckets, 2,048 jobs spread over them (about 8 per bucket), all
// fired in one Fire call per op at successive seconds, with 100,000 jobs
// stored (the rest due tomorrow). Report firings/s.
func BenchmarkFireSpread(b *testing.B) {
	const buckets, batch, stored = 256, 2048, 100_000
	ctx := context.Background()
	s := newStoreWith(b, buckets)
	epochs := map[int]int64{}
	for bk := range buckets {
		if err := s.ClaimBucket(ctx, bk, "bench", 1); err != nil {
			b.Fatal(err)
		}
		epochs[bk] = 1
	}
	t0 := baseTime()
	later := t0.Add(24 * time.Hour)
	jobs := make([]*model.Job, stored)
	for i := range jobs {
		next := &t0
		if i >= batch {
			next = &later
		}
		jobs[i] = testJob(fmt.Sprintf("spread-%06d", i), next)
	}
	for i := 0; i < len(jobs); i += 10_000 {
		if err := s.CopyJobs(ctx, jobs[i:min(i+10_000, len(jobs))]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	fireLoop(b, s, epochs, jobs[:batch], t0)
}

// fireEvery fires every job of jobs (benchJobs) at at, moving each to next,
// and fails unless each made an execution.
func fireEvery(tb testing.TB, s *Store, epochs map[int]int64, jobs []*model.Job, at, next time.Time) model.FireResult {
	tb.Helper()
	firings := make([]Firing, len(jobs))
	for i, j := range jobs {
		firings[i] = Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next}
	}
	res, err := s.Fire(context.Background(), "bench", epochs, firings)
	if err != nil || len(res.Executions) != len(jobs) {
		tb.Fatalf("fire: %d executions, %v", len(res.Executions), err)
	}
	return res
}
