package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// BackfillJob handles POST /v1/jobs/{id}/backfill: the body's shape is
// checked against BackfillRequest, its values by jobs.Service.Backfill.
func (h *endpoints) BackfillJob(c echo.Context, id models.ID, _ models.BackfillJobParams) error {
	var req models.BackfillRequest
	_, shape, err := h.readBody(c, h.s.backfillSchema, &req)
	if err != nil {
		return err
	}
	if err := shape.err(); err != nil {
		return err
	}
	br := jobs.BackfillRequest{From: req.From.UTC(), To: req.To.UTC()}
	if req.Overlap != nil {
		br.Overlap = string(*req.Overlap)
	}
	b, err := h.s.jobs.Backfill(c.Request().Context(), id, br)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/jobs/"+id.String()+"/backfills")
	return c.JSON(http.StatusAccepted, backfillOf(b))
}

// ListJobBackfills handles GET /v1/jobs/{id}/backfills.
func (h *endpoints) ListJobBackfills(c echo.Context, id models.ID, p models.ListJobBackfillsParams) error {
	ctx := c.Request().Context()
	var errs fieldErrors
	limit := limitOf(p.Limit, &errs)
	if err := errs.err(); err != nil {
		return err
	}
	bs, next, err := h.s.store.ListBackfills(ctx, id, limit, deref(p.Cursor))
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	if len(bs) == 0 && deref(p.Cursor) == "" {
		// Tell an unknown job from one without backfills.
		if _, err := h.s.store.GetJob(ctx, id); err != nil {
			return h.storeError(c, err, "job", id)
		}
	}
	out := models.BackfillList{Items: make([]models.Backfill, 0, len(bs)), NextCursor: nonEmpty(next)}
	for _, b := range bs {
		out.Items = append(out.Items, backfillOf(b))
	}
	return c.JSON(http.StatusOK, out)
}

// StopJobBackfill handles DELETE /v1/jobs/{id}/backfills/{backfill_id}.
func (h *endpoints) StopJobBackfill(c echo.Context, id models.ID, backfillID openapi_types.UUID) error {
	_, err := h.s.jobs.StopBackfill(c.Request().Context(), id, backfillID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("Job %s has no backfill with id %s.", id, backfillID))
	case errors.Is(err, store.ErrBackfillEnded):
		return conflict(fmt.Sprintf("Backfill %s has ended; only a running backfill can be stopped.", backfillID))
	case err != nil:
		return h.storeError(c, err, "job", id)
	}
	return c.NoContent(http.StatusNoContent)
}

// backfillOf is the API's form of a backfill.
func backfillOf(b *model.Backfill) models.Backfill {
	return models.Backfill{
		Id: b.ID, JobId: b.JobID, From: b.From, To: b.To, Total: b.Total, Fired: b.Fired, NextAt: b.NextAt,
		State: models.BackfillState(b.State), Error: nonEmpty(b.Error), CreatedAt: b.CreatedAt, FinishedAt: b.FinishedAt,
	}
}
