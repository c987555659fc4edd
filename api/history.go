package api

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
)

// seriesIntervals are the widths GET /v1/stats/series offers: each
// divides a day (points fall on the same UTC boundaries whatever the
// range) and none is finer than the rollups' minute.
var seriesIntervals = map[models.GetStatsSeriesParamsInterval]time.Duration{
	"1m": time.Minute, "5m": 5 * time.Minute, "15m": 15 * time.Minute,
	"1h": time.Hour, "6h": 6 * time.Hour, "1d": 24 * time.Hour,
}

// GetStatsSeries handles GET /v1/stats/series.
func (h *endpoints) GetStatsSeries(c echo.Context, p models.GetStatsSeriesParams) error {
	ctx := c.Request().Context()
	ns, err := h.s.listNamespace(c, "getStatsSeries", deref(p.Namespace))
	if err != nil {
		return err
	}
	var errs fieldErrors
	f := store.SeriesFilter{Namespace: ns, JobID: p.JobId, Handler: deref(p.Handler), Interval: time.Hour}
	name := models.GetStatsSeriesParamsInterval("1h")
	if p.Interval != nil {
		name = *p.Interval
		iv, ok := seriesIntervals[name]
		if !ok {
			errs.add("interval", "must be one of 1m, 5m, 15m, 1h, 6h, 1d")
		}
		f.Interval = iv
	}
	if f.Namespace != "" {
		if msg := jobs.NameProblem(f.Namespace); msg != "" {
			errs.add("namespace", "%s", msg)
		}
	}
	if len(f.Handler) > 200 {
		errs.add("handler", "must be at most 200 characters")
	}
	now, err := h.s.jobs.Now(ctx)
	if err != nil {
		return h.internal(c, err)
	}
	since, until := now.Add(-defaultStatsRange), now
	if t := timeParam("since", p.Since, now, &errs); t != nil {
		since = *t
	}
	if t := timeParam("until", p.Until, now, &errs); t != nil {
		until = *t
	}
	if !since.Before(until) {
		errs.add("until", "must be after since (%s)", since.UTC().Format(time.RFC3339))
	}
	if f.Interval > 0 && since.Before(until) {
		// Aligned to the interval since the epoch: whole UTC minutes,
		// hours, days.
		f.Since = since.UTC().Truncate(f.Interval)
		f.Until = until.UTC().Truncate(f.Interval)
		if f.Until.Before(until) {
			f.Until = f.Until.Add(f.Interval)
		}
		if n := f.Until.Sub(f.Since) / f.Interval; n > store.MaxSeriesPoints {
			errs.add("interval", "gives %d points from %s to %s, at most %d: choose a longer interval or a shorter range",
				n, f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339), store.MaxSeriesPoints)
		}
	}
	if err := errs.err(); err != nil {
		return err
	}
	series, err := h.s.store.ListExecutionSeries(ctx, f)
	if err != nil {
		return h.storeError(c, err, "execution", uuid.Nil)
	}
	out := models.StatsSeries{Since: f.Since, Until: f.Until, Interval: models.StatsSeriesInterval(name),
		Points: make([]models.StatsPoint, 0, len(series.Points))}
	if !series.RolledThrough.IsZero() {
		out.RolledThrough = &series.RolledThrough
	}
	for _, p := range series.Points {
		counts := make(map[string]int64, len(domain.ExecStates))
		for _, st := range domain.ExecStates {
			counts[string(st)] = p.Counts[st]
		}
		out.Points = append(out.Points, models.StatsPoint{At: p.At, Counts: counts, Total: p.Total,
			FireLagMs: lagPercentiles(p.FireLag), StartLagMs: lagPercentiles(p.StartLag)})
	}
	return c.JSON(http.StatusOK, out)
}

// lagPercentiles are the p50, p95 and p99 of a lag histogram, rounded to
// 0.1 ms; nil when it counts nothing.
func lagPercentiles(hist []int64) *models.Percentiles {
	p50, ok := store.LagPercentile(hist, 0.5)
	if !ok {
		return nil
	}
	p95, _ := store.LagPercentile(hist, 0.95)
	p99, _ := store.LagPercentile(hist, 0.99)
	r := func(v float64) *float64 {
		v = float64(int64(v*10+0.5)) / 10
		return &v
	}
	return &models.Percentiles{P50: r(p50), P95: r(p95), P99: r(p99)}
}
