package store

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// percentileCont is Postgres's percentile_cont: linear interpolation
// between the closest ranks.
func percentileCont(v []float64, p float64) float64 {
	slices.Sort(v)
	pos := p * float64(len(v)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(v) {
		return v[lo]
	}
	return v[lo] + (pos-float64(lo))*(v[lo+1]-v[lo])
}

// Statistics match a direct count of the data set, for every grouping.
func TestExecutionStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	rows := searchData(t, s)
	since, until := rows[0].at, rows[len(rows)-1].at.Add(time.Second)
	keyOf := map[string]func(r row) string{
		GroupByJob:       func(r row) string { return r.job.String() },
		GroupByHandler:   func(r row) string { return r.handler },
		GroupByNamespace: func(r row) string { return r.ns },
		GroupByHour:      func(r row) string { return r.at.UTC().Truncate(time.Hour).Format("2006-01-02T15:04:05Z") },
	}
	for _, by := range GroupBys {
		got, err := s.ListExecutionStats(ctx, StatsFilter{Since: since, Until: until, GroupBy: by})
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string][]row{}
		for _, r := range rows {
			k := keyOf[by](r)
			groups[k] = append(groups[k], r)
		}
		if len(got) != len(groups) {
			t.Errorf("by %s: %d groups, want %d", by, len(got), len(groups))
		}
		for _, g := range got {
			checkGroup(t, by, g, groups[g.Key])
		}
	}
	// Filters: one namespace, one job, a range.
	job := rows[2].job
	got, err := s.ListExecutionStats(ctx, StatsFilter{Namespace: "team-b", JobID: &job, Since: rows[10].at, Until: until, GroupBy: GroupByJob})
	if err != nil {
		t.Fatal(err)
	}
	var want []row
	for _, r := range rows[10:] {
		if r.job == job && r.ns == "team-b" {
			want = append(want, r)
		}
	}
	if len(got) != 1 || got[0].JobName != "beta" {
		t.Fatalf("one job's stats: %+v", got)
	}
	checkGroup(t, "job, filtered", got[0], want)
	if _, err := s.ListExecutionStats(ctx, StatsFilter{Since: since, Until: until, GroupBy: "day"}); err == nil {
		t.Error("grouping by day accepted")
	}
}

// checkGroup compares a group's statistics with its rows.
func checkGroup(t *testing.T, by string, g model.ExecStats, rows []row) {
	t.Helper()
	counts := map[domain.ExecState]int64{}
	var durations, lags []float64
	var attempts, ended float64
	for _, r := range rows {
		counts[r.state]++
		if r.state.Final() {
			attempts += float64(r.attempts)
			ended++
		}
		if r.finished != nil && (r.state == domain.ExecSucceeded || r.state == domain.ExecDead) {
			durations = append(durations, float64(r.finished.Sub(*r.started).Milliseconds()))
		}
		if r.started != nil {
			lags = append(lags, float64(r.started.Sub(r.at).Milliseconds()))
		}
	}
	for st, n := range counts {
		if g.Counts[st] != n {
			t.Errorf("by %s, %s: %d %s, want %d", by, g.Key, g.Counts[st], st, n)
		}
	}
	if g.Total != int64(len(rows)) {
		t.Errorf("by %s, %s: total %d, want %d", by, g.Key, g.Total, len(rows))
	}
	ok, dead := counts[domain.ExecSucceeded], counts[domain.ExecDead]
	if ok+dead > 0 && (g.SuccessRate == nil || math.Abs(*g.SuccessRate-float64(ok)/float64(ok+dead)) > 1e-9) {
		t.Errorf("by %s, %s: success rate %v, want %d/%d", by, g.Key, g.SuccessRate, ok, ok+dead)
	}
	if ended > 0 && (g.AttemptsPerExecution == nil || math.Abs(*g.AttemptsPerExecution-attempts/ended) > 1e-9) {
		t.Errorf("by %s, %s: attempts per execution %v, want %v", by, g.Key, g.AttemptsPerExecution, attempts/ended)
	}
	near := func(what string, got []float64, v []float64, ps ...float64) {
		if len(v) == 0 {
			if got != nil {
				t.Errorf("by %s, %s: %s %v, want none", by, g.Key, what, got)
			}
			return
		}
		for i, p := range ps {
			if want := percentileCont(slices.Clone(v), p); len(got) != len(ps) || math.Abs(got[i]-want) > 0.5 {
				t.Errorf("by %s, %s: %s p%v = %v, want %v", by, g.Key, what, p*100, got, want)
			}
		}
	}
	near("duration", g.Duration, durations, 0.5, 0.95, 0.99)
	near("lag", g.Lag, lags, 0.5, 0.99)
}
