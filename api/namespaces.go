package api

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store/model"
)

// ListNamespaces handles GET /v1/namespaces.
func (h *endpoints) ListNamespaces(c echo.Context) error {
	all, err := h.s.store.ListNamespaces(c.Request().Context())
	if err != nil {
		return h.storeError(c, err, "namespace", uuid.Nil)
	}
	out := models.NamespaceList{Items: make([]models.Namespace, 0, len(all))}
	who := principal(c)
	for _, n := range all {
		// A key sees the namespaces it has a role in.
		if who.Allows(n.Name, auth.Reader) {
			out.Items = append(out.Items, h.namespaceOf(n))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// PutNamespace handles PUT /v1/namespaces/{namespace}.
func (h *endpoints) PutNamespace(c echo.Context, namespace string) error {
	var errs fieldErrors
	if msg := jobs.NameProblem(namespace); msg != "" {
		errs.add("namespace", "%s", msg)
	}
	var req models.NamespaceSettings
	_, shape, err := h.readBody(c, h.s.namespaceSchema, &req)
	if err != nil {
		return err
	}
	var d time.Duration
	if req.Retention != nil && *req.Retention != "" {
		if d, err = domain.ParseRetention(*req.Retention); err != nil {
			errs.add("retention", "%s", err.Error())
		}
	}
	if all := shape.merge(errs); len(all) > 0 {
		return all.err()
	}
	n, err := h.s.store.UpdateNamespaceRetention(c.Request().Context(), namespace, d)
	if err != nil {
		return h.storeError(c, err, "namespace", uuid.Nil)
	}
	return c.JSON(http.StatusOK, h.namespaceOf(*n))
}

// namespaceOf is the API's view of a namespace.
func (h *endpoints) namespaceOf(n model.Namespace) models.Namespace {
	out := models.Namespace{Name: n.Name, Jobs: n.Jobs, EffectiveRetention: domain.FormatRetention(h.s.retention),
		HistoryExpiresAt: n.HistoryExpiresAt(h.s.retention)}
	if n.Retention != nil {
		out.Retention = ptr(domain.FormatRetention(*n.Retention))
		out.EffectiveRetention = *out.Retention
	}
	return out
}
