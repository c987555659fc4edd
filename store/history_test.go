package store

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// historyExec is one execution seeded for the history tests.
type historyExec struct {
	id, job           uuid.UUID
	ns, handler       string
	at                time.Time
	state             domain.ExecState
	fireLag, startLag time.Duration
}

// seedHistory inserts n executions over [base, base+span), of 3 jobs in
// 2 namespaces and 2 handler queues, in every state, with known lags.
func seedHistory(t *testing.T, s *Store, base time.Time, n int, span time.Duration) []historyExec {
	t.Helper()
	ctx := context.Background()
	jobs := []struct {
		id          uuid.UUID
		ns, handler string
	}{{uuid.New(), "team-a", "http"}, {uuid.New(), "team-a", "mailer"}, {uuid.New(), "team-b", "mailer"}}
	states := []domain.ExecState{domain.ExecSucceeded, domain.ExecSucceeded, domain.ExecFailed, domain.ExecDead,
		domain.ExecSucceeded, domain.ExecCancelled, domain.ExecRunning, domain.ExecSucceeded, domain.ExecQueued}
	var out []historyExec
	for i := range n {
		j := jobs[i%len(jobs)]
		e := historyExec{job: j.id, ns: j.ns, handler: j.handler, state: states[i%len(states)],
			at:      base.Add(span * time.Duration(i) / time.Duration(n)).Truncate(time.Millisecond),
			fireLag: time.Duration(i%7) * 3 * time.Millisecond, startLag: time.Duration(i%13) * 70 * time.Millisecond}
		e.id = domain.ExecutionID(e.job, e.at)
		h := map[string]any{"type": "custom", "name": e.handler}
		if e.handler == "http" {
			h = map[string]any{"type": "http", "url": "http://example.test/x"}
		}
		var started, finished *time.Time
		if e.state != domain.ExecQueued {
			st := e.at.Add(e.startLag)
			started = &st
		}
		if e.state.Final() {
			fin := started.Add(time.Second)
			finished = &fin
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler, started_at, created_at, finished_at, attempts) VALUES ($1, $2, 0, $3, 'j', $4, $5, $6, $7, $8, $9, 1)`,
			e.id, e.job, e.ns, e.at, e.state, h, started, e.at.Add(e.fireLag), finished); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// rollup runs a history pass as of now over history from start.
func rollup(t *testing.T, s *Store, now, start time.Time) HistoryRollupResult {
	t.Helper()
	res, err := s.MaintainHistoryRollups(context.Background(), HistoryRollup{Now: now, Settle: time.Minute,
		Trailing: 5 * time.Minute, Open: 7 * 24 * time.Hour, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// series lists f's series or fails the test.
func series(t *testing.T, s *Store, f SeriesFilter) Series {
	t.Helper()
	got, err := s.ListExecutionSeries(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// rollupDigest is the content of the rollup tables, to compare passes.
func rollupDigest(t *testing.T, s *Store) string {
	t.Helper()
	var d string
	if err := s.pool.QueryRow(context.Background(), `SELECT
		(SELECT COALESCE(md5(string_agg(m::text, '|' ORDER BY minute, namespace, handler)), '') FROM history_minutes m) ||
		(SELECT COALESCE(md5(string_agg(h::text, '|' ORDER BY hour, namespace, handler)), '') FROM history_hours h)`).Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The rollup gives the series the executions give, for every interval
// and filter, with the counts and lags seeded; a second pass changes
// nothing.
func TestHistoryRollupEqualsLive(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	execs := seedHistory(t, s, base, 900, 3*time.Hour)
	now := base.Add(5 * time.Hour)
	res := rollup(t, s, now, base.Add(-time.Hour))
	if !res.Ran || res.Rows == 0 || !res.RolledThrough.Equal(now.Add(-time.Minute)) {
		t.Fatalf("pass: %+v", res)
	}
	for _, iv := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour} {
		for _, f := range []SeriesFilter{{}, {Namespace: "team-a"}, {Handler: "mailer"}, {Namespace: "team-b", Handler: "mailer"}} {
			f.Since, f.Until, f.Interval = base.Add(-time.Hour).Truncate(iv), base.Add(6*time.Hour), iv
			if iv == 24*time.Hour {
				f.Until = base.Add(24 * time.Hour)
			}
			rolled := series(t, s, f)
			f.Live = true
			live := series(t, s, f)
			if !reflect.DeepEqual(rolled.Points, live.Points) {
				t.Errorf("%s %+v: rollup and live differ:\n%+v\n%+v", iv, f, rolled.Points, live.Points)
			}
		}
	}
	// The hour after base, checked against the seed itself.
	got := series(t, s, SeriesFilter{Since: base, Until: base.Add(time.Hour), Interval: time.Hour, Namespace: "team-a"})
	want := map[domain.ExecState]int64{}
	var total int64
	for _, e := range execs {
		if e.ns == "team-a" && e.at.Before(base.Add(time.Hour)) {
			want[e.state]++
			total++
		}
	}
	p := got.Points[0]
	for st, n := range want {
		if p.Counts[st] != n {
			t.Errorf("%s: %d, want %d", st, p.Counts[st], n)
		}
	}
	if p.Total != total {
		t.Errorf("total %d, want %d", p.Total, total)
	}
	// Start lags are multiples of 70 ms up to 840 ms: p99 is in the
	// 750..1000 bucket, p50 under 500.
	p99, _ := LagPercentile(p.StartLag, 0.99)
	p50, _ := LagPercentile(p.StartLag, 0.5)
	if p99 < 750 || p99 > 1000 || p50 <= 0 || p50 > 500 {
		t.Errorf("start lag p50 %.1f, p99 %.1f", p50, p99)
	}
	before := rollupDigest(t, s)
	rollup(t, s, now, base.Add(-time.Hour))
	if after := rollupDigest(t, s); after != before {
		t.Error("a second pass changed the rollups")
	}
}

// An execution that ends after its minute was rolled up is counted as
// it ended: its minute is rolled up again while it is open, however
// long ago.
func TestHistoryLateEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	base := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	execs := seedHistory(t, s, base, 90, 30*time.Minute)
	rollup(t, s, base.Add(time.Hour), base)
	f := SeriesFilter{Since: base, Until: base.Add(30 * time.Minute), Interval: 30 * time.Minute}
	before := series(t, s, f).Points[0]
	if before.Counts[domain.ExecRunning] == 0 || before.Counts[domain.ExecQueued] == 0 {
		t.Fatalf("seed has nothing in flight: %+v", before.Counts)
	}
	// Everything in flight ends, two hours later (far past the trailing
	// window).
	tag, err := s.pool.Exec(ctx, `UPDATE executions SET state = 'succeeded', started_at = COALESCE(started_at, scheduled_for),
		finished_at = scheduled_for + interval '2 hours' WHERE state IN ('queued', 'running', 'failed')`)
	if err != nil {
		t.Fatal(err)
	}
	rollup(t, s, base.Add(3*time.Hour), base)
	after := series(t, s, f).Points[0]
	if after.Counts[domain.ExecSucceeded] != before.Counts[domain.ExecSucceeded]+tag.RowsAffected() ||
		after.Counts[domain.ExecRunning]+after.Counts[domain.ExecQueued]+after.Counts[domain.ExecFailed] != 0 ||
		after.Total != int64(len(execs)) {
		t.Errorf("after the late ends: %+v (before %+v, %d ended)", after.Counts, before.Counts, tag.RowsAffected())
	}
	f.Live = true
	if live := series(t, s, f).Points[0]; !reflect.DeepEqual(live, after) {
		t.Errorf("rollup %+v, live %+v", after, live)
	}
	// And none stays open: the next pass rolls up only its window.
	var open int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM history_minutes WHERE queued + running + failed + waiting > 0").Scan(&open); err != nil || open != 0 {
		t.Errorf("open minutes %d, %v", open, err)
	}
}

// Several nodes rolling up at once count every execution once.
func TestHistorySeveralNodes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	base := time.Now().UTC().Truncate(time.Hour).Add(-6 * time.Hour)
	execs := seedHistory(t, s, base, 600, 2*time.Hour)
	var wg sync.WaitGroup
	ran := make([]int, 4)
	errs := make([]error, 4)
	for node := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each node passes a few times, as of later and later.
			for i := range 5 {
				res, err := s.MaintainHistoryRollups(context.Background(), HistoryRollup{
					Now: base.Add(time.Duration(i+1) * 40 * time.Minute), Settle: time.Minute, Trailing: 5 * time.Minute,
					Open: 24 * time.Hour, Start: base, MaxRange: 30 * time.Minute})
				if err != nil {
					errs[node] = err
					return
				}
				if res.Ran {
					ran[node]++
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Then one more pass to finish the catch-up.
	for range 5 {
		rollup(t, s, base.Add(4*time.Hour), base)
	}
	got := series(t, s, SeriesFilter{Since: base, Until: base.Add(3 * time.Hour), Interval: time.Hour})
	var total int64
	for _, p := range got.Points {
		total += p.Total
	}
	if total != int64(len(execs)) {
		t.Errorf("%d executions counted, want %d (passes per node %v)", total, len(execs), ran)
	}
	if !got.RolledThrough.After(base.Add(3 * time.Hour)) {
		t.Errorf("rolled through %s", got.RolledThrough)
	}
}

// Bad series requests fail rather than guess.
func TestHistorySeriesLimits(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	at := time.Now().UTC().Truncate(time.Hour)
	for _, f := range []SeriesFilter{
		{Since: at, Until: at.Add(MaxSeriesPoints*time.Minute + time.Minute), Interval: time.Minute},
		{Since: at, Until: at, Interval: time.Minute},
		{Since: at, Until: at.Add(time.Hour), Interval: time.Second},
	} {
		if _, err := s.ListExecutionSeries(context.Background(), f); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
	if p, ok := LagPercentile(make([]int64, lagBuckets), 0.5); ok {
		t.Errorf("percentile of nothing: %v", p)
	}
	h := make([]int64, lagBuckets)
	h[len(h)-1] = 3
	if p, _ := LagPercentile(h, 0.99); p != LagBounds[len(LagBounds)-1] {
		t.Errorf("an hour or more: %v", fmt.Sprint(p))
	}
}

// A cluster's first pass starts at its oldest execution, not at Start
// (a new cluster has nothing to catch up), and a cluster without
// executions writes no mark, so that none of the executions still to come
// falls behind it.
func TestHistoryFirstPass(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC().Truncate(time.Minute)
	if res := rollup(t, s, now, now.Add(-90*24*time.Hour)); res.Minutes != 0 || !res.RolledThrough.IsZero() {
		t.Fatalf("a pass over no execution: %+v; want nothing rolled and no mark", res)
	}
	base := now.Add(-3 * time.Hour)
	seedHistory(t, s, base, 60, time.Hour)
	res := rollup(t, s, now, now.Add(-90*24*time.Hour))
	if !res.Ran || res.Minutes > 4*60 || !res.RolledThrough.Equal(now.Add(-time.Minute)) {
		t.Fatalf("the first pass: %+v; want from the oldest execution, 3 h back, to now", res)
	}
	// Whole hours, as the API rounds a range to its interval.
	f := SeriesFilter{Since: base.Truncate(time.Hour), Until: now.Truncate(time.Hour).Add(time.Hour), Interval: time.Hour}
	if got := series(t, s, f); total(got) != 60 {
		t.Errorf("the series holds %d executions, want 60 (pass %+v)", total(got), res)
	}
}

func total(s Series) int64 {
	var n int64
	for _, p := range s.Points {
		n += p.Total
	}
	return n
}
