package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// CreateKey handles POST /v1/keys.
func (h *endpoints) CreateKey(c echo.Context) error {
	var req models.KeyCreate
	_, shape, err := h.readBody(c, h.s.keySchema, &req)
	if err != nil {
		return err
	}
	if err := shape.err(); err != nil {
		return err
	}
	var errs fieldErrors
	if req.Namespace != auth.AllNamespaces {
		if msg := jobs.NameProblem(req.Namespace); msg != "" {
			errs.add("namespace", "%s (or * for every namespace)", msg)
		}
	}
	role, rerr := auth.ParseRole(string(req.Role))
	if rerr != nil {
		errs.add("role", "%v", rerr)
	}
	var expires *time.Time
	if req.ExpiresIn != nil {
		// At least an hour, at most domain.MaxRetention (ten years).
		if d, err := domain.ParseRetention(*req.ExpiresIn); err != nil {
			errs.add("expires_in", "%v", err)
		} else {
			t := time.Now().Add(d).UTC().Truncate(time.Second)
			expires = &t
		}
	}
	if req.Name != nil && strings.ContainsRune(*req.Name, 0) {
		errs.add("name", "must not contain U+0000")
	}
	if err := errs.err(); err != nil {
		return err
	}
	// Making keys needs admin, the highest role, in the key's namespace
	// (in every namespace for a "*" key): no key can be given more than
	// its maker has.
	if err := h.s.allow(c, "createKey", "namespace", req.Namespace); err != nil {
		return err
	}
	who := principal(c)
	k, err := auth.NewKey()
	if err != nil {
		return h.internal(c, err)
	}
	rec, err := h.s.store.CreateAPIKey(c.Request().Context(), model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: req.Namespace,
		Role: role.String(), Name: deref(req.Name), CreatedBy: who.Subject, ExpiresAt: expires})
	if err != nil {
		return h.internal(c, err)
	}
	out := keyOf(rec)
	return c.JSON(http.StatusCreated, models.KeyCreated{Id: out.Id, Key: k.String(), Namespace: out.Namespace, Role: out.Role,
		Name: out.Name, CreatedAt: out.CreatedAt, CreatedBy: out.CreatedBy, ExpiresAt: out.ExpiresAt})
}

// ListKeys handles GET /v1/keys.
func (h *endpoints) ListKeys(c echo.Context, p models.ListKeysParams) error {
	ns := deref(p.Namespace)
	if ns != "" && ns != auth.AllNamespaces {
		if msg := jobs.NameProblem(ns); msg != "" {
			return invalid("namespace", "%s", msg)
		}
	}
	who := principal(c)
	var namespaces []string // nil: all
	switch {
	case ns != "":
		namespaces = []string{ns}
	case !who.Allows(auth.AllNamespaces, auth.Admin):
		namespaces = who.NamespacesWith(auth.Admin)
	}
	keys, err := h.s.store.ListAPIKeys(c.Request().Context(), namespaces)
	if err != nil {
		return h.internal(c, err)
	}
	out := models.KeyList{Items: make([]models.Key, 0, len(keys))}
	for _, k := range keys {
		out.Items = append(out.Items, keyOf(k))
	}
	return c.JSON(http.StatusOK, out)
}

// DeleteKey handles DELETE /v1/keys/{key_id}.
func (h *endpoints) DeleteKey(c echo.Context, id string) error {
	if !auth.ValidID(id) {
		return invalid("key_id", "is not a key id (%d letters and digits)", auth.IDLen)
	}
	ctx := c.Request().Context()
	missing := notFound(fmt.Sprintf("No key with id %s.", id))
	k, err := h.s.store.GetAPIKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return missing
	}
	if err != nil {
		return h.internal(c, err)
	}
	if principal(c).Role(k.Namespace) == auth.NoRole {
		return missing
	}
	if err := h.s.allow(c, "deleteKey", "key_id", k.Namespace); err != nil {
		return err
	}
	if err := h.s.store.DeleteAPIKey(ctx, id); errors.Is(err, store.ErrNotFound) {
		return missing
	} else if err != nil {
		return h.internal(c, err)
	}
	h.s.keys.forget(id)
	return c.NoContent(http.StatusNoContent)
}

func keyOf(k *model.APIKey) models.Key {
	out := models.Key{Id: k.ID, Namespace: k.Namespace, Role: models.Role(k.Role), Name: k.Name, CreatedAt: k.CreatedAt.UTC(),
		CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, LastUsedAt: k.LastUsedAt}
	if out.ExpiresAt != nil {
		t := out.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	if out.LastUsedAt != nil {
		t := out.LastUsedAt.UTC()
		out.LastUsedAt = &t
	}
	return out
}
