package store

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
)

// BenchmarkSearchJobsAtScale times GET /v1/jobs' store calls against a
// database seeded by scripts/seed-scale.sh (namespaces default, billing,
// reports and etl; labels team, env, tier and tock.io/alert), named by
// TOCK_SEARCH_BENCH_URL:
//
//	TOCK_SEARCH_BENCH_URL=postgres://postgres@127.0.0.1:5432/tock_search_1m go test ./store/ -run '^$' -bench SearchJobsAtScale -benchtime 1x -v
//
// For each filter, alone and combined, it logs the median of 7 calls of
// the first page, a deep page (from 90 % of the way through the
// namespace's names) and the count, and, with TOCK_SEARCH_BENCH_PLANS
// set, each one's EXPLAIN (ANALYZE, BUFFERS) (docs/bench.md, "Finding
// jobs").
func BenchmarkSearchJobsAtScale(b *testing.B) {
	url := os.Getenv("TOCK_SEARCH_BENCH_URL")
	if url == "" {
		b.Skip("set TOCK_SEARCH_BENCH_URL to a database seeded by scripts/seed-scale.sh (docs/bench.md)")
	}
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Init(ctx, 256); err != nil {
		b.Fatal(err)
	}
	const ns = "default"
	var deep string
	if err := s.pool.QueryRow(ctx, `SELECT name FROM job_names WHERE namespace = $1 ORDER BY name
		OFFSET (SELECT count(*) * 9 / 10 FROM job_names WHERE namespace = $1) LIMIT 1`, ns).Scan(&deep); err != nil {
		b.Fatal(err)
	}
	sel := func(s string) domain.Selector {
		r, err := domain.ParseSelector(s)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		f    JobFilter
	}{
		{"none", JobFilter{}},
		{"state=paused", JobFilter{State: domain.JobPaused}},
		{"state=completed", JobFilter{State: domain.JobCompleted}},
		{"state=active", JobFilter{State: domain.JobActive}},
		{"handler=report-mail", JobFilter{Handler: "report-mail"}},
		{"handler=nobody", JobFilter{Handler: "nobody"}},
		{"prefix", JobFilter{NamePrefix: deep[:len(deep)-2]}},
		{"team=payments", JobFilter{Selector: sel("team=payments")}},
		{"team=nobody", JobFilter{Selector: sel("team=nobody")}},
		{"tock.io/alert=true", JobFilter{Selector: sel("tock.io/alert=true")}},
		{"tier", JobFilter{Selector: sel("tier")}},
		{"!tier", JobFilter{Selector: sel("!tier")}},
		{"!team", JobFilter{Selector: sel("!team")}},
		{"team!=payments", JobFilter{Selector: sel("team!=payments")}},
		{"team in (search,ops)", JobFilter{Selector: sel("team in (search,ops)")}},
		{"team notin (payments,growth)", JobFilter{Selector: sel("team notin (payments,growth)")}},
		{"next run within 1h", JobFilter{NextRunAfter: now, NextRunBefore: now.Add(time.Hour)}},
		{"next run within 30d", JobFilter{NextRunBefore: now.Add(30 * 24 * time.Hour)}},
		{"next run after 1y", JobFilter{NextRunAfter: now.Add(365 * 24 * time.Hour)}},
		{"paused,team=search", JobFilter{State: domain.JobPaused, Selector: sel("team=search")}},
		{"paused,handler=http,!tier", JobFilter{State: domain.JobPaused, Handler: "http", Selector: sel("!tier")}},
		{"alert,env=staging", JobFilter{Selector: sel("tock.io/alert=true,env=staging")}},
		{"tier=batch,team=search,env=prod", JobFilter{Selector: sel("tier=batch,team=search,env=prod")}},
		{"handler=http,next 1h", JobFilter{Handler: "http", NextRunAfter: now, NextRunBefore: now.Add(time.Hour)}},
		{"team=payments,next 30d", JobFilter{Selector: sel("team=payments"), NextRunBefore: now.Add(30 * 24 * time.Hour)}},
	} {
		tc.f.Namespace = ns
		median := func(call func() error) time.Duration {
			var ds []time.Duration
			for range 7 {
				start := time.Now()
				if err := call(); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			slices.Sort(ds)
			return ds[3]
		}
		var n, got int
		var exact bool
		first := median(func() (err error) {
			jobs, _, err := s.ListJobs(ctx, tc.f)
			got = len(jobs)
			return err
		})
		d := tc.f
		d.Cursor = encodeCursor([2]string{ns, deep})
		deepT := median(func() (err error) { _, _, err = s.ListJobs(ctx, d); return err })
		count := median(func() (err error) { n, exact, err = s.CountJobsMatching(ctx, tc.f); return err })
		more := ""
		if !exact {
			more = "+"
		}
		b.Logf("%-34s first page %7.1f ms (%2d jobs)  deep page %7.1f ms  count %7.1f ms (%d%s)",
			tc.name, millis(first), got, millis(deepT), millis(count), n, more)
		if os.Getenv("TOCK_SEARCH_BENCH_PLANS") != "" {
			for _, page := range []bool{true, false} {
				q, err := s.searchJobs(ctx, tc.f, page)
				if err != nil || q.none {
					continue
				}
				sql := "SELECT " + jobRead("j") + q.from + " ORDER BY " + q.order + " LIMIT 51"
				if q.names {
					sql = "SELECT n.bucket, n.job_id" + q.from + " ORDER BY " + q.order + " LIMIT 51"
				}
				if !page {
					sql = "SELECT count(*) FROM (SELECT 1" + q.from + " LIMIT 1001) x"
				}
				rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, q.args...)
				if err != nil {
					b.Fatal(err)
				}
				var plan []string
				for rows.Next() {
					var l string
					_ = rows.Scan(&l)
					if !strings.Contains(l, "jobs_b") && !strings.Contains(l, "(bucket = n.bucket)") {
						plan = append(plan, l)
					}
				}
				rows.Close()
				b.Logf("%s (page %v):\n%s", tc.name, page, strings.Join(plan, "\n"))
			}
		}
	}
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
