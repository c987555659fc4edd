package api

import (
	"net/http"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/jobs"
)

// PauseJobs handles POST /v1/jobs:pause.
func (h *endpoints) PauseJobs(c echo.Context) error {
	var req models.JobSelection
	sel, err := h.readSelection(c, "pauseJobs", h.s.selectionSchema, &req, func() (string, *string) { return req.Namespace, req.Selector })
	if err != nil {
		return err
	}
	return h.bulkDone(c, sel)(h.s.jobs.PauseMatching(c.Request().Context(), sel))
}

// ResumeJobs handles POST /v1/jobs:resume.
func (h *endpoints) ResumeJobs(c echo.Context) error {
	var req models.JobResumeSelection
	sel, err := h.readSelection(c, "resumeJobs", h.s.resumeSelectionSchema, &req, func() (string, *string) { return req.Namespace, req.Selector })
	if err != nil {
		return err
	}
	return h.bulkDone(c, sel)(h.s.jobs.ResumeMatching(c.Request().Context(), sel, deref(req.CatchUp)))
}

// readSelection reads a request body of schema into req and returns the
// selection its namespace and selector (what fields says) make, once
// the caller may do op in the namespace.
func (h *endpoints) readSelection(c echo.Context, op string, schema *openapi3.Schema, req any, fields func() (string, *string)) (jobs.Selection, error) {
	_, shape, err := h.readBody(c, schema, req)
	if err != nil {
		return jobs.Selection{}, err
	}
	if len(shape) > 0 {
		return jobs.Selection{}, shape.err()
	}
	ns, selector := fields()
	if err := h.s.allow(c, op, "namespace", ns); err != nil {
		return jobs.Selection{}, err
	}
	var errs fieldErrors
	sel := jobs.Selection{Namespace: ns}
	if msg := jobs.NameProblem(ns); msg != "" {
		errs.add("namespace", "%s", msg)
	}
	sel.Selector = selectorOf(deref(selector), &errs)
	return sel, errs.err()
}

// bulkDone answers a bulk operation with what it did. A failure part way
// is the problem of the failure; the jobs changed before it stay changed
// (the operations are not atomic).
func (h *endpoints) bulkDone(c echo.Context, sel jobs.Selection) func(jobs.BulkResult, error) error {
	return func(res jobs.BulkResult, err error) error {
		if err != nil {
			return h.storeError(c, err, "job", uuid.Nil)
		}
		if res.Changed > 0 {
			// Many jobs at once: one change without a job, "reload".
			h.s.changes.Publish(changes.Change{Kind: changes.KindJob, Namespace: sel.Namespace, At: time.Now().UTC()})
		}
		return c.JSON(http.StatusOK, models.BulkChange{Matched: res.Matched, Changed: res.Changed})
	}
}
