package api

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/store"
)

// ListDeadEvents handles GET /v1/dead-events: the events the recorder
// could not place, newest first. A key with the role in every namespace
// lists them all (those that named no namespace too) unless it names one.
func (h *endpoints) ListDeadEvents(c echo.Context, p models.ListDeadEventsParams) error {
	var errs fieldErrors
	f := store.DeadEventFilter{Cursor: deref(p.Cursor), Limit: limitOf(p.Limit, &errs)}
	if err := errs.err(); err != nil {
		return err
	}
	ns, err := h.s.listNamespace(c, "listDeadEvents", deref(p.Namespace))
	if err != nil {
		return err
	}
	if ns != "" || !principal(c).Allows(auth.AllNamespaces, h.s.perms["listDeadEvents"].Role) {
		f.Namespaces = []string{ns}
	}
	evs, next, err := h.s.store.ListDeadEvents(c.Request().Context(), f)
	if err != nil {
		return h.storeError(c, err, "dead event", uuid.Nil)
	}
	out := models.DeadEventList{Items: make([]models.DeadEvent, 0, len(evs)), NextCursor: nonEmpty(next)}
	for _, e := range evs {
		out.Items = append(out.Items, models.DeadEvent{Id: e.ID, RecordedAt: e.RecordedAt, Namespace: e.Namespace,
			ExecutionId: e.ExecutionID, ScheduledFor: e.ScheduledFor, Attempt: e.Attempt, Type: e.Type,
			Reason: e.Reason, Event: string(e.Event)})
	}
	return c.JSON(http.StatusOK, out)
}
