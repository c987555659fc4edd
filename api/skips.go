package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
)

// ListJobSkips handles GET /v1/jobs/{id}/skips.
func (h *endpoints) ListJobSkips(c echo.Context, id models.ID, p models.ListJobSkipsParams) error {
	ctx := c.Request().Context()
	var errs fieldErrors
	limit := limitOf(p.Limit, &errs)
	if err := errs.err(); err != nil {
		return err
	}
	skips, next, err := h.s.store.ListSkippedRuns(ctx, id, limit, deref(p.Cursor))
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	if len(skips) == 0 && deref(p.Cursor) == "" {
		// Nothing skipped: tell an unknown job from one that skipped
		// nothing. A deleted job's skipped runs stay listable.
		if _, err := h.s.store.GetJob(ctx, id); err != nil {
			return h.storeError(c, err, "job", id)
		}
	}
	out := models.SkippedRunList{Items: make([]models.SkippedRun, 0, len(skips)), NextCursor: nonEmpty(next)}
	for _, k := range skips {
		out.Items = append(out.Items, models.SkippedRun{First: k.First, Last: k.Last, Runs: k.Count,
			Reason: models.SkippedRunReason(k.Reason), Detail: nonEmpty(k.Detail), RecordedAt: k.RecordedAt})
	}
	return c.JSON(http.StatusOK, out)
}
