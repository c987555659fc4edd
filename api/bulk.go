package api

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/jobs"
)

// PauseJobs handles POST /v1/jobs:pause.
func (h *endpoints) PauseJobs(c echo.Context) error {
	return h.bulk(c, h.s.jobs.PauseMatching)
}

// ResumeJobs handles POST /v1/jobs:resume.
func (h *endpoints) ResumeJobs(c echo.Context) error {
	return h.bulk(c, h.s.jobs.ResumeMatching)
}

// bulk reads a JobSelection and applies op to the jobs it selects. A
// failure part way is the problem of the failure; the jobs changed
// before it stay changed (op is not atomic).
func (h *endpoints) bulk(c echo.Context, op func(ctx context.Context, sel jobs.Selection) (jobs.BulkResult, error)) error {
	var req JobSelection
	_, shape, err := h.readBody(c, h.s.selectionSchema, &req)
	if err != nil {
		return err
	}
	if len(shape) > 0 {
		return shape.err()
	}
	var errs fieldErrors
	sel := jobs.Selection{Namespace: req.Namespace}
	if msg := jobs.NameProblem(req.Namespace); msg != "" {
		errs.add("namespace", "%s", msg)
	}
	sel.Selector = selectorOf(deref(req.Selector), &errs)
	if err := errs.err(); err != nil {
		return err
	}
	res, err := op(c.Request().Context(), sel)
	if err != nil {
		return h.storeError(c, err, "job", uuid.Nil)
	}
	return c.JSON(http.StatusOK, BulkChange{Matched: res.Matched, Changed: res.Changed})
}
