package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BenchmarkHistoryAtScale seeds TOCK_HISTORY_BENCH_DAYS days of
// TOCK_HISTORY_BENCH_PER_DAY executions (default 1,000,000) into a
// database of its own (tock_history_bench, dropped at the end unless
// TOCK_HISTORY_BENCH_KEEP is set), rolls them up, and times the series
// the dashboard asks for (docs/bench.md, "History as pictures"):
//
//	TOCK_HISTORY_BENCH_DAYS=30 go test ./store/ -run '^$' -bench HistoryAtScale -benchtime 1x -timeout 2h -v
//
// It logs its figures rather than reporting ns/op: a seed this large is
// made once, the queries are timed N times each.
func BenchmarkHistoryAtScale(b *testing.B) {
	days, _ := strconv.Atoi(os.Getenv("TOCK_HISTORY_BENCH_DAYS"))
	if days <= 0 {
		b.Skip("set TOCK_HISTORY_BENCH_DAYS to seed that many days (docs/bench.md)")
	}
	perDay := 1_000_000
	if n, _ := strconv.Atoi(os.Getenv("TOCK_HISTORY_BENCH_PER_DAY")); n > 0 {
		perDay = n
	}
	ctx := context.Background()
	base := "postgres://postgres@127.0.0.1:5432"
	if u := os.Getenv("TOCK_HISTORY_BENCH_PGBASE"); u != "" {
		base = u
	}
	const db = "tock_history_bench"
	admin, err := pgx.Connect(ctx, base+"/postgres?sslmode=disable")
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	if os.Getenv("TOCK_HISTORY_BENCH_REUSE") == "" {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			b.Fatal(err)
		}
	}
	if os.Getenv("TOCK_HISTORY_BENCH_KEEP") == "" {
		defer func() {
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
				b.Error(err)
			}
		}()
	}
	s, err := Open(ctx, base+"/"+db+"?sslmode=disable")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Init(ctx, 256); err != nil {
		b.Fatal(err)
	}
	now, err := s.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	today := now.UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -days)
	if os.Getenv("TOCK_HISTORY_BENCH_REUSE") == "" {
		var dayTimes []time.Time
		for d := first; !d.After(today); d = d.AddDate(0, 0, 1) {
			dayTimes = append(dayTimes, d)
		}
		if err := s.EnsureHistoryPartitions(ctx, dayTimes...); err != nil {
			b.Fatal(err)
		}
		// 4 handler specs, 1,000 jobs in 10 namespaces, each run every
		// 86.4 s (at 1,000,000 a day); 0.1 % dead, 0.05 % cancelled, the rest succeeded; fire
		// lag 0–19 ms, start lag 5–101 ms (a few slow minutes: 2–12 s).
		if _, err := s.pool.Exec(ctx, `INSERT INTO job_specs (id, handler, retry, timeout_ms)
			SELECT md5('spec' || k)::uuid, CASE k WHEN 0 THEN '{"type":"http","url":"http://x.invalid/"}'::jsonb
				WHEN 1 THEN '{"type":"nats","subject":"a.b"}'::jsonb ELSE jsonb_build_object('type', 'custom', 'name', 'worker-' || k) END,
				'{}', 0 FROM generate_series(0, 3) k`); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for d := first; d.Before(today) || d.Equal(today); d = d.AddDate(0, 0, 1) {
			n := perDay
			if d.Equal(today) {
				n = int(float64(perDay) * now.Sub(today).Hours() / 24)
			}
			t0 := time.Now()
			if _, err := s.pool.Exec(ctx, `
INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, state, attempts, spec_id,
	created_at, started_at, finished_at)
SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || substr(md5(i::text || $1::text), 1, 20))::uuid,
	md5('job' || j)::uuid, j % 256, 'ns-' || (j % 10), 'job-' || j, t,
	CASE WHEN t > now() - interval '2 minutes' THEN 'running' WHEN i % 1000 = 7 THEN 'dead' WHEN i % 2000 = 3 THEN 'cancelled' ELSE 'succeeded' END,
	CASE WHEN i % 1000 = 7 THEN 3 ELSE 1 END, md5('spec' || (j % 4))::uuid,
	t + (i % 20) * interval '1 ms',
	t + CASE WHEN (i / 60000) % 97 = 0 THEN 2000 + (i % 10000) ELSE 5 + (i % 97) END * interval '1 ms',
	CASE WHEN t > now() - interval '2 minutes' THEN NULL ELSE t + interval '300 ms' END
FROM (SELECT i, i % 1000 AS j, $2::timestamptz + i * ($4::float8 * interval '1 ms') AS t FROM generate_series(0, $3::int - 1) i) g`,
				d.Format("2006-01-02"), d, n, 86_400_000/float64(perDay)); err != nil {
				b.Fatal(err)
			}
			b.Logf("seeded %s: %d executions in %s", d.Format("2006-01-02"), n, time.Since(t0).Round(time.Millisecond))
		}
		b.Logf("seed: %s", time.Since(start).Round(time.Second))
		t0 := time.Now()
		if _, err := s.pool.Exec(ctx, "VACUUM (ANALYZE) executions"); err != nil {
			b.Fatal(err)
		}
		b.Logf("vacuum analyze: %s", time.Since(t0).Round(time.Second))
	}
	// The rollup: a catch-up of the whole history a day per pass, then a
	// pass as every 10 s in steady state.
	opts := HistoryRollup{Settle: time.Minute, Trailing: 5 * time.Minute, Open: 7 * 24 * time.Hour,
		Start: first, MaxRange: 24 * time.Hour}
	t0 := time.Now()
	var passes []time.Duration
	for {
		opts.Now, _ = s.Now(ctx)
		p0 := time.Now()
		res, err := s.MaintainHistoryRollups(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		passes = append(passes, time.Since(p0))
		if !res.RolledThrough.Before(opts.Now.Add(-opts.Settle).Truncate(time.Minute)) {
			break
		}
	}
	b.Logf("rollup catch-up: %d passes, %s (a day's pass p50 %s, max %s)", len(passes), time.Since(t0).Round(time.Millisecond),
		pct(passes, 0.5), pct(passes, 1))
	var steady []time.Duration
	for range 10 {
		opts.Now, _ = s.Now(ctx)
		p0 := time.Now()
		if _, err := s.MaintainHistoryRollups(ctx, opts); err != nil {
			b.Fatal(err)
		}
		steady = append(steady, time.Since(p0))
	}
	b.Logf("steady pass: p50 %s, max %s", pct(steady, 0.5), pct(steady, 1))
	var rows, hrs int64
	_ = s.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM history_minutes), (SELECT count(*) FROM history_hours)").Scan(&rows, &hrs)
	var size string
	_ = s.pool.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size('history_minutes') + pg_total_relation_size('history_hours'))").Scan(&size)
	b.Logf("rollups: %d minute rows, %d hour rows, %s", rows, hrs, size)

	now, _ = s.Now(ctx)
	job := uuid.UUID(md5UUID(b, s, "job7"))
	queries := []struct {
		name string
		f    SeriesFilter
	}{
		{"a day per minute", SeriesFilter{Since: now.Add(-24 * time.Hour).Truncate(time.Minute), Until: now, Interval: time.Minute}},
		{"a day per minute, one namespace", SeriesFilter{Namespace: "ns-3", Since: now.Add(-24 * time.Hour).Truncate(time.Minute), Until: now, Interval: time.Minute}},
		{"a week per hour", SeriesFilter{Since: now.Add(-7 * 24 * time.Hour).Truncate(time.Hour), Until: now, Interval: time.Hour}},
		{"a week per hour, one handler", SeriesFilter{Handler: "worker-2", Since: now.Add(-7 * 24 * time.Hour).Truncate(time.Hour), Until: now, Interval: time.Hour}},
		{"30 days per day", SeriesFilter{Since: now.Add(-30 * 24 * time.Hour).Truncate(24 * time.Hour), Until: now, Interval: 24 * time.Hour}},
		{"a job's week per hour (live)", SeriesFilter{JobID: &job, Since: now.Add(-7 * 24 * time.Hour).Truncate(time.Hour), Until: now, Interval: time.Hour}},
		{"a day per minute, live (no rollup)", SeriesFilter{Live: true, Since: now.Add(-24 * time.Hour).Truncate(time.Minute), Until: now, Interval: time.Minute}},
	}
	const n = 20
	for _, q := range queries {
		var ts []time.Duration
		reps := n
		if q.f.Live {
			reps = 3
		}
		var total int64
		for range reps {
			t0 := time.Now()
			got, err := s.ListExecutionSeries(ctx, q.f)
			if err != nil {
				b.Fatal(err)
			}
			ts = append(ts, time.Since(t0))
			total = 0
			for _, p := range got.Points {
				total += p.Total
			}
		}
		b.Logf("%-36s %6d executions: first %s, p50 %s, p99 %s (%d calls)", q.name, total, ts[0].Round(10*time.Microsecond),
			pct(ts, 0.5), pct(ts, 0.99), reps)
	}
	fmt.Fprintln(os.Stderr, "done")
}

// pct is the p-quantile of ts (nearest rank).
func pct(ts []time.Duration, p float64) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	i := int(p*float64(len(s)) + 0.5)
	if i >= len(s) {
		i = len(s) - 1
	}
	if i > 0 && p < 1 {
		i--
	}
	return s[i].Round(10 * time.Microsecond)
}

// md5UUID is md5(text)::uuid, as the seed makes job ids.
func md5UUID(b *testing.B, s *Store, text string) uuid.UUID {
	var id uuid.UUID
	if err := s.pool.QueryRow(context.Background(), "SELECT md5($1)::uuid", text).Scan(&id); err != nil {
		b.Fatal(err)
	}
	return id
}
