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
	"github.com/tock-sched/tock/store/model"
)

// defaultStatsRange is how far back GET /v1/stats looks without since.
const defaultStatsRange = 24 * time.Hour

// GetStats handles GET /v1/stats.
func (h *endpoints) GetStats(c echo.Context, p models.GetStatsParams) error {
	ctx := c.Request().Context()
	ns, err := h.s.listNamespace(c, "getStats", deref(p.Namespace))
	if err != nil {
		return err
	}
	var errs fieldErrors
	f := store.StatsFilter{Namespace: ns, JobID: p.JobId, GroupBy: store.GroupByJob}
	if p.GroupBy != nil {
		f.GroupBy = string(*p.GroupBy)
		if !p.GroupBy.Valid() {
			errs.add("group_by", "must be one of job, handler, namespace, hour")
		}
	}
	if f.Namespace != "" {
		if msg := jobs.NameProblem(f.Namespace); msg != "" {
			errs.add("namespace", "%s", msg)
		}
	}
	now, err := h.s.jobs.Now(ctx)
	if err != nil {
		return h.internal(c, err)
	}
	f.Since, f.Until = now.Add(-defaultStatsRange), now
	if t := timeParam("since", p.Since, now, &errs); t != nil {
		f.Since = *t
	}
	if t := timeParam("until", p.Until, now, &errs); t != nil {
		f.Until = *t
	}
	if !f.Since.Before(f.Until) {
		errs.add("until", "must be after since (%s)", f.Since.UTC().Format(time.RFC3339))
	}
	if err := errs.err(); err != nil {
		return err
	}
	groups, err := h.s.store.ListExecutionStats(ctx, f)
	if err != nil {
		return h.storeError(c, err, "execution", uuid.Nil)
	}
	out := models.StatsReport{Since: f.Since.UTC(), Until: f.Until.UTC(), GroupBy: models.StatsReportGroupBy(f.GroupBy),
		Groups: make([]models.StatsGroup, 0, len(groups))}
	for _, g := range groups {
		out.Groups = append(out.Groups, statsGroupOf(g))
	}
	return c.JSON(http.StatusOK, out)
}

// statsGroupOf is the API's view of a group's statistics.
func statsGroupOf(g model.ExecStats) models.StatsGroup {
	counts := make(map[string]int64, len(domain.ExecStates))
	for _, st := range domain.ExecStates {
		counts[string(st)] = g.Counts[st]
	}
	out := models.StatsGroup{Key: g.Key, JobName: nonEmpty(g.JobName), Counts: counts, Total: g.Total,
		SuccessRate: g.SuccessRate, AttemptsPerExecution: g.AttemptsPerExecution}
	if len(g.Duration) == 3 {
		out.DurationMs = &models.Percentiles{P50: &g.Duration[0], P95: &g.Duration[1], P99: &g.Duration[2]}
	}
	if len(g.Lag) == 2 {
		out.LagMs = &models.Percentiles{P50: &g.Lag[0], P99: &g.Lag[1]}
	}
	return out
}
