package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// LagBounds are the bounds, in milliseconds, of the lag histograms of
// the history rollups (history_minutes, history_hours) and of the series
// computed live: bucket 0 holds lags below 1 ms, bucket i lags in
// [LagBounds[i-1], LagBounds[i]), the last bucket lags of an hour or
// more. Fixed, so that histograms of different minutes and groups add up.
// Changing them needs a migration that rolls the history up again.
var LagBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500,
	10000, 15000, 20000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000}

// lagBuckets is the number of buckets of a lag histogram.
var lagBuckets = len(LagBounds) + 1

// LagPercentile estimates the p-quantile (0 < p ≤ 1) of the lags counted
// in hist (a histogram over LagBounds), in milliseconds, interpolating
// linearly inside the bucket that holds it; the last, unbounded bucket
// answers its lower bound. ok is false when hist counts nothing.
func LagPercentile(hist []int64, p float64) (ms float64, ok bool) {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return 0, false
	}
	rank := int64(math.Ceil(p * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var before int64
	for i, c := range hist {
		if before+c >= rank {
			lo := 0.0
			if i > 0 {
				lo = LagBounds[i-1]
			}
			if i >= len(LagBounds) {
				return lo, true
			}
			hi := LagBounds[i]
			return lo + (hi-lo)*float64(rank-before)/float64(c), true
		}
		before += c
	}
	return LagBounds[len(LagBounds)-1], true
}

// SeriesFilter selects the executions ListExecutionSeries counts: those
// scheduled in [Since, Until), of one namespace, one job, one handler
// queue when set, per Interval (a whole number of minutes that divides a
// day, or a whole number of days; Since and Until multiples of it since
// the Unix epoch, as the API aligns them).
type SeriesFilter struct {
	Namespace    string
	JobID        *uuid.UUID
	Handler      string
	Since, Until time.Time
	Interval     time.Duration
	// Live computes every point from the executions, ignoring the
	// rollups (tests compare the two).
	Live bool
}

// MaxSeriesPoints caps the points of one series.
const MaxSeriesPoints = 1500

// Series is a statistics series: its points, every interval of the
// range, and how far the rollups reached (the points from RolledThrough
// on were computed live; zero when the rollups were not used).
type Series struct {
	Points        []model.SeriesPoint
	RolledThrough time.Time
}

// historyCounts are the count columns of history_minutes and
// history_hours, in domain.ExecStates' order.
var historyCounts = []string{"queued", "running", "succeeded", "failed", "cancelled", "dead", "waiting"}

// histArray is the SQL of a lag histogram over LagBounds of the rows'
// bucket index col (width_bucket's 0..len(LagBounds)), as an integer[].
func histArray(col string) string {
	parts := make([]string, lagBuckets)
	for i := range parts {
		parts[i] = "count(*) FILTER (WHERE " + col + " = " + strconv.Itoa(i) + ")"
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::integer[]"
}

// histSum is the SQL of the element-wise sum of the integer[] column col.
func histSum(col string) string {
	parts := make([]string, lagBuckets)
	for i := range parts {
		parts[i] = "COALESCE(sum(" + col + "[" + strconv.Itoa(i+1) + "]), 0)"
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::bigint[]"
}

// countsOf is the SQL of the state counts of executions rows.
func countsOf() string {
	parts := make([]string, len(historyCounts))
	for i, st := range historyCounts {
		parts[i] = "count(*) FILTER (WHERE state = '" + st + "') AS " + st
	}
	return strings.Join(parts, ", ")
}

// countSums is the SQL of the sums of the count columns.
func countSums() string {
	parts := make([]string, len(historyCounts))
	for i, st := range historyCounts {
		parts[i] = "COALESCE(sum(" + st + "), 0)::bigint AS " + st
	}
	return strings.Join(parts, ", ")
}

// lagBoundsSQL is LagBounds as an SQL array literal.
func lagBoundsSQL() string {
	parts := make([]string, len(LagBounds))
	for i, b := range LagBounds {
		parts[i] = strconv.FormatFloat(b, 'f', -1, 64)
	}
	return "'{" + strings.Join(parts, ",") + "}'::float8[]"
}

// lagBucketsSQL are the histogram bucket indexes of an executions row x:
// fb its fire lag's (scheduled time to its creation, the firing's commit;
// NULL for a backfill, fired late by design), sb its start lag's (due
// time to its attempt's start, as ListExecutionStats' lag; NULL before it
// starts).
var lagBucketsSQL = `CASE WHEN NOT x.backfill THEN width_bucket(date_part('epoch', x.created_at - x.scheduled_for) * 1000, ` +
	lagBoundsSQL() + `) END AS fb,
	CASE WHEN x.started_at IS NOT NULL THEN width_bucket(date_part('epoch', x.started_at - COALESCE(x.due_at, x.scheduled_for)) * 1000, ` +
	lagBoundsSQL() + `) END AS sb`

// idFloorSQL is the smallest execution id of the time t (an SQL
// timestamptz): ids begin with their scheduled time in Unix milliseconds
// (domain.ExecutionID), so a time range of executions is a range of the
// primary key, read from its index without a scan of the day.
func idFloorSQL(t string) string {
	return "(lpad(to_hex((extract(epoch FROM " + t + ") * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid"
}

// rollupSQL rolls up the executions scheduled in the ranges
// [$1[i], $2[i]) into history_minutes, replacing those minutes' rows.
var rollupSQL = `
INSERT INTO history_minutes AS h (minute, namespace, handler, ` + strings.Join(historyCounts, ", ") + `, fire_lag, start_lag)
SELECT minute, namespace, handler, ` + countsOf() + `, ` + histArray("fb") + `, ` + histArray("sb") + ` FROM (
	SELECT date_trunc('minute', x.scheduled_for) AS minute, x.namespace, ` + strings.ReplaceAll(handlerKey, "executions.", "x.") + ` AS handler,
		x.state, ` + lagBucketsSQL + `
	FROM unnest($1::timestamptz[], $2::timestamptz[]) AS r(lo, hi)
	JOIN executions x ON x.id >= ` + idFloorSQL("r.lo") + ` AND x.id < ` + idFloorSQL("r.hi") + `
		AND x.scheduled_for >= r.lo AND x.scheduled_for < r.hi) e
GROUP BY minute, namespace, handler
ON CONFLICT (minute, namespace, handler) DO UPDATE SET ` + conflictSet() + `
`

// conflictSet is the SET list of an upsert into a rollup table.
func conflictSet() string {
	cols := append(slices.Clone(historyCounts), "fire_lag", "start_lag")
	for i, c := range cols {
		cols[i] = c + " = EXCLUDED." + c
	}
	return strings.Join(cols, ", ")
}

// rollupHoursSQL sums the minutes of the hours $1 into history_hours,
// replacing those hours' rows.
var rollupHoursSQL = `
INSERT INTO history_hours AS h (hour, namespace, handler, ` + strings.Join(historyCounts, ", ") + `, fire_lag, start_lag)
SELECT hr, namespace, handler, ` + strings.Join(historyCounts, ", ") + `, fl::integer[], sl::integer[] FROM (
	SELECT u.hr, m.namespace, m.handler, ` + countSums() + `, ` + histSum("m.fire_lag") + ` AS fl, ` + histSum("m.start_lag") + ` AS sl
	FROM unnest($1::timestamptz[]) AS u(hr)
	JOIN history_minutes m ON m.minute >= u.hr AND m.minute < u.hr + interval '1 hour'
	GROUP BY u.hr, m.namespace, m.handler) s
ON CONFLICT (hour, namespace, handler) DO UPDATE SET ` + conflictSet()

// HistoryRollup configures MaintainHistoryRollups.
type HistoryRollup struct {
	// Now is the time of the pass (the database's clock, Store.Now).
	Now time.Time
	// Settle is how long after its end a minute is first rolled up;
	// before that it is computed live.
	Settle time.Duration
	// Trailing is how far before the rollup's mark every pass rolls up
	// again, whatever the minutes' states: it counts what changed quickly
	// in minutes already rolled up (a backfilled or re-driven execution
	// that ran and ended between two passes).
	Trailing time.Duration
	// Open is how far back a minute with executions that have not ended
	// is rolled up again, each pass, until they have.
	Open time.Duration
	// Start is where a rollup that never ran begins (the oldest history
	// worth rolling up).
	Start time.Time
	// MaxRange bounds the new minutes one pass rolls up (a catch-up goes
	// a MaxRange per pass).
	MaxRange time.Duration
	// MinuteRetention and HourRetention are how long history_minutes and
	// history_hours rows are kept; zero keeps them.
	MinuteRetention, HourRetention time.Duration
}

// HistoryRollupResult says what a pass did.
type HistoryRollupResult struct {
	// Ran is false when another node's pass held the lock.
	Ran bool
	// Minutes is how many minutes were rolled up; Rows how many
	// history_minutes rows they made.
	Minutes int
	Rows    int64
	// RolledThrough is the rollup's mark after the pass.
	RolledThrough time.Time
	// Deleted is how many rows past retention were deleted.
	Deleted int64
}

// lockHistory is the session lock of MaintainHistoryRollups: one rollup
// pass at a time in the cluster.
const lockHistory int64 = 0x746f636b_0006 // "tock" 6: MaintainHistoryRollups (5 is lockDepends)

// MaintainHistoryRollups does one pass of the history rollup, under the
// cluster's history lock (another node's pass under way: Ran false):
// it rolls up into history_minutes the new minutes that have settled
// (from the rollup's mark to o.Now − o.Settle, at most o.MaxRange of
// them), again the o.Trailing before the mark, again the minutes of the
// last o.Open with executions that have not ended (queued, running,
// failed awaiting a retry, waiting: read from the executions_state index,
// and from the rolled-up minutes that counted such), then sums the
// hours they touch into history_hours, advances the mark, and deletes
// rows past retention. Each minute is computed whole from its
// executions and replaces its rows, so a pass run twice, or by two
// nodes, counts nothing twice.
func (s *Store) MaintainHistoryRollups(ctx context.Context, o HistoryRollup) (HistoryRollupResult, error) {
	var res HistoryRollupResult
	ran, err := s.sessionLocked(ctx, "history", lockHistory, false, func(ctx context.Context) error {
		var err error
		res, err = s.rollHistory(ctx, o)
		return err
	})
	res.Ran = ran
	if err != nil {
		return res, fmt.Errorf("store: history rollup: %w", err)
	}
	return res, nil
}

// span is a range of minutes [lo, hi).
type span struct{ lo, hi time.Time }

func (s *Store) rollHistory(ctx context.Context, o HistoryRollup) (HistoryRollupResult, error) {
	var res HistoryRollupResult
	now := o.Now.UTC()
	target := now.Add(-o.Settle).Truncate(time.Minute)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, strings.Join(statsSettings, "; "), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		var mark *time.Time
		if err := tx.QueryRow(ctx, "SELECT rolled_through FROM history_rollup WHERE id = 1 FOR UPDATE").Scan(&mark); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		from := o.Start.UTC().Truncate(time.Minute)
		if mark != nil {
			from = mark.UTC()
		} else {
			// The first pass starts at the oldest execution, not at Start:
			// a new cluster (every test's) has nothing to catch up, and
			// rolling up 90 empty days, a day a pass back to back, loaded
			// Postgres for minutes after every start. Ids begin with their
			// scheduled millisecond: the primary key finds the oldest.
			var first *time.Time
			if err := tx.QueryRow(ctx, "SELECT scheduled_for FROM executions ORDER BY id LIMIT 1").Scan(&first); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if first == nil {
				return nil // no execution yet: no mark either, so none is missed
			}
			if first.After(from) {
				from = first.UTC().Truncate(time.Minute)
			}
		}
		to := target
		if o.MaxRange > 0 && to.Sub(from) > o.MaxRange {
			to = from.Add(o.MaxRange)
		}
		if to.Before(from) {
			to = from
		}
		var spans []span
		if o.Trailing > 0 && mark != nil {
			spans = append(spans, span{from.Add(-o.Trailing).Truncate(time.Minute), from})
		}
		if to.After(from) {
			spans = append(spans, span{from, to})
		}
		// Minutes before the rollup's window with work still open.
		openFrom := from.Add(-o.Trailing).Truncate(time.Minute)
		rows, err := tx.Query(ctx, `
SELECT minute FROM history_minutes WHERE queued + running + failed + waiting > 0 AND minute >= $1 AND minute < $2
UNION
SELECT DISTINCT date_trunc('minute', scheduled_for) FROM executions
WHERE state IN ('queued', 'running', 'failed', 'waiting') AND scheduled_for >= $1 AND scheduled_for < $2
ORDER BY 1 LIMIT 10000`, now.Add(-o.Open), openFrom)
		if err != nil {
			return err
		}
		opens, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return err
		}
		for _, m := range opens {
			m = m.UTC()
			if n := len(spans); n > 0 && spans[n-1].hi.Equal(m) {
				spans[n-1].hi = m.Add(time.Minute)
				continue
			}
			spans = append(spans, span{m, m.Add(time.Minute)})
		}
		if len(spans) > 0 {
			los, his := make([]time.Time, len(spans)), make([]time.Time, len(spans))
			hours := map[time.Time]bool{}
			for i, sp := range spans {
				los[i], his[i] = sp.lo, sp.hi
				res.Minutes += int(sp.hi.Sub(sp.lo) / time.Minute)
				for h := sp.lo.Truncate(time.Hour); h.Before(sp.hi); h = h.Add(time.Hour) {
					hours[h] = true
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM history_minutes h USING unnest($1::timestamptz[], $2::timestamptz[]) AS r(lo, hi)
				WHERE h.minute >= r.lo AND h.minute < r.hi`, los, his); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, rollupSQL, los, his)
			if err != nil {
				return fmt.Errorf("minutes: %w", err)
			}
			res.Rows = tag.RowsAffected()
			hrs := make([]time.Time, 0, len(hours))
			for h := range hours {
				hrs = append(hrs, h)
			}
			slices.SortFunc(hrs, func(a, b time.Time) int { return a.Compare(b) })
			if _, err := tx.Exec(ctx, `DELETE FROM history_hours WHERE hour = ANY($1)`, hrs); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, rollupHoursSQL, hrs); err != nil {
				return fmt.Errorf("hours: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO history_rollup (id, rolled_through) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET rolled_through = GREATEST(history_rollup.rolled_through, EXCLUDED.rolled_through)`, to); err != nil {
			return err
		}
		res.RolledThrough = to
		if o.MinuteRetention > 0 {
			tag, err := tx.Exec(ctx, "DELETE FROM history_minutes WHERE minute < $1", now.Add(-o.MinuteRetention))
			if err != nil {
				return err
			}
			res.Deleted += tag.RowsAffected()
		}
		if o.HourRetention > 0 {
			tag, err := tx.Exec(ctx, "DELETE FROM history_hours WHERE hour < $1", now.Add(-o.HourRetention))
			if err != nil {
				return err
			}
			res.Deleted += tag.RowsAffected()
		}
		return nil
	})
	return res, err
}

// seriesPart is one source of a series' rows: a rollup table over
// [lo, hi), or the executions.
type seriesPart struct {
	table  string // history_minutes, history_hours, or "" (live)
	lo, hi time.Time
}

// ListExecutionSeries computes the series f selects: per interval of
// [f.Since, f.Until), the executions by state and their lag histograms.
// Without a job, it reads the rollups up to their mark (hours where the
// interval is whole hours, minutes elsewhere) and the executions after
// it; a job's series is read from its executions (the (job_id,
// scheduled_for) index holds them in order; the rollups have no job).
// Every interval is a point, empty ones with zero counts.
func (s *Store) ListExecutionSeries(ctx context.Context, f SeriesFilter) (Series, error) {
	var out Series
	if f.Interval < time.Minute || f.Interval%time.Minute != 0 || !f.Since.Before(f.Until) {
		return out, fmt.Errorf("store: execution series: bad interval %s or range [%s, %s)", f.Interval, f.Since, f.Until)
	}
	n := int(f.Until.Sub(f.Since) / f.Interval)
	if f.Until.Sub(f.Since)%f.Interval != 0 {
		n++
	}
	if n > MaxSeriesPoints {
		return out, fmt.Errorf("store: execution series: %d points, at most %d", n, MaxSeriesPoints)
	}
	since, until := f.Since.UTC(), f.Until.UTC()
	var parts []seriesPart
	if f.Live || f.JobID != nil {
		parts = []seriesPart{{"", since, until}}
	} else {
		var mark time.Time
		err := s.pool.QueryRow(ctx, "SELECT rolled_through FROM history_rollup WHERE id = 1").Scan(&mark)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return out, fmt.Errorf("store: execution series: %w", err)
		}
		mark = mark.UTC()
		out.RolledThrough = mark
		split := mark
		if split.After(until) {
			split = until
		}
		if split.Before(since) {
			split = since
		}
		if split.After(since) {
			hourly := f.Interval%time.Hour == 0
			hourEnd := split.Truncate(time.Hour)
			if hourly && hourEnd.After(since) {
				parts = append(parts, seriesPart{"history_hours", since, hourEnd})
				if split.After(hourEnd) {
					parts = append(parts, seriesPart{"history_minutes", hourEnd, split})
				}
			} else {
				parts = append(parts, seriesPart{"history_minutes", since, split})
			}
		}
		if until.After(split) {
			parts = append(parts, seriesPart{"", split, until})
		}
	}
	var args sqlArgs
	arg := args.add
	iv := arg(int64(f.Interval / time.Second))
	point := func(t string) string {
		return "to_timestamp(floor(extract(epoch FROM " + t + ") / " + iv + "::bigint) * " + iv + "::bigint)"
	}
	var sels []string
	for _, p := range parts {
		lo, hi := arg(p.lo), arg(p.hi)
		if p.table != "" {
			col := "minute"
			if p.table == "history_hours" {
				col = "hour"
			}
			where := []string{col + " >= " + lo, col + " < " + hi}
			if f.Namespace != "" {
				where = append(where, "namespace = "+arg(f.Namespace))
			}
			if f.Handler != "" {
				where = append(where, "handler = "+arg(f.Handler))
			}
			sels = append(sels, "SELECT "+point(col)+" AS at, "+countSums()+", "+histSum("fire_lag")+" AS fl, "+
				histSum("start_lag")+" AS sl FROM "+p.table+" WHERE "+strings.Join(where, " AND ")+" GROUP BY 1")
			continue
		}
		where := []string{"x.scheduled_for >= " + lo, "x.scheduled_for < " + hi}
		if f.JobID != nil {
			where = append(where, "x.job_id = "+arg(*f.JobID))
		} else {
			where = append(where, "x.id >= "+idFloorSQL(lo+"::timestamptz"), "x.id < "+idFloorSQL(hi+"::timestamptz"))
		}
		if f.Namespace != "" {
			where = append(where, "x.namespace = "+arg(f.Namespace))
		}
		if f.Handler != "" {
			where = append(where, strings.ReplaceAll(handlerIs(arg(f.Handler)), "executions.", "x."))
		}
		sels = append(sels, "SELECT "+point("scheduled_for")+" AS at, "+countsOf()+", "+histArray("fb")+"::bigint[] AS fl, "+
			histArray("sb")+"::bigint[] AS sl FROM (SELECT x.scheduled_for, x.state, "+lagBucketsSQL+
			" FROM executions x WHERE "+strings.Join(where, " AND ")+") e GROUP BY 1")
	}
	sql := "SELECT at, " + countSums() + ", " + histSum("fl") + ", " + histSum("sl") + " FROM (" +
		strings.Join(sels, " UNION ALL ") + ") u GROUP BY at ORDER BY at"
	got := map[time.Time]model.SeriesPoint{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, strings.Join(statsSettings, "; "), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				p      model.SeriesPoint
				counts = make([]int64, len(historyCounts))
			)
			dest := []any{&p.At}
			for i := range counts {
				dest = append(dest, &counts[i])
			}
			dest = append(dest, &p.FireLag, &p.StartLag)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			p.Counts = make(map[domain.ExecState]int64, len(historyCounts))
			for i, st := range historyCounts {
				p.Counts[domain.ExecState(st)] = counts[i]
				p.Total += counts[i]
			}
			got[p.At.UTC()] = p
		}
		return rows.Err()
	})
	if err != nil {
		return out, fmt.Errorf("store: execution series: %w", err)
	}
	out.Points = make([]model.SeriesPoint, 0, n)
	for at := since; at.Before(until); at = at.Add(f.Interval) {
		p, ok := got[at]
		if !ok {
			p = model.SeriesPoint{Counts: map[domain.ExecState]int64{}, FireLag: make([]int64, lagBuckets),
				StartLag: make([]int64, lagBuckets)}
			for _, st := range historyCounts {
				p.Counts[domain.ExecState(st)] = 0
			}
		}
		p.At = at
		out.Points = append(out.Points, p)
	}
	return out, nil
}
