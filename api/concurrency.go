package api

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// slotListMax bounds the holders and the queue GET /v1/concurrency lists
// for one key.
const slotListMax = 100

// ListConcurrencyKeys handles GET /v1/concurrency: the namespace's keys
// in use, or one key with its holders and queue.
func (h *endpoints) ListConcurrencyKeys(c echo.Context, p models.ListConcurrencyKeysParams) error {
	ns, err := h.s.listNamespace(c, "listConcurrencyKeys", deref(p.Namespace))
	if err != nil {
		return err
	}
	ns = namespaceOrDefault(ns)
	if err := h.queryNamespace(c, "listConcurrencyKeys", ns); err != nil {
		return err
	}
	ctx := c.Request().Context()
	keys, err := h.s.store.ListConcurrencyKeys(ctx, ns)
	if err != nil {
		return h.storeError(c, err, "concurrency key", uuid.Nil)
	}
	out := models.ConcurrencyKeyList{Items: []models.ConcurrencyKey{}}
	var want string
	if p.Key != nil {
		want = "ns:" + ns + ":" + *p.Key
		if p.Scope != nil && *p.Scope == models.ListConcurrencyKeysParamsScopeCluster {
			want = "cluster:" + *p.Key
		}
	}
	for _, k := range keys {
		if want != "" && k.Slot != want {
			continue
		}
		v := slotKeyOf(k)
		if want != "" {
			held, err := h.s.store.ListSlotHolders(ctx, k.Slot, true, slotListMax)
			if err != nil {
				return h.storeError(c, err, "concurrency key", uuid.Nil)
			}
			queue, err := h.s.store.ListSlotHolders(ctx, k.Slot, false, slotListMax)
			if err != nil {
				return h.storeError(c, err, "concurrency key", uuid.Nil)
			}
			v.Holding, v.Queue = ptr(holdersOf(held, ns)), ptr(holdersOf(queue, ns))
		}
		out.Items = append(out.Items, v)
	}
	return c.JSON(http.StatusOK, out)
}

func slotKeyOf(k model.SlotKey) models.ConcurrencyKey {
	scope, ns, key := domain.SlotKeyParts(k.Slot)
	return models.ConcurrencyKey{Scope: models.ConcurrencyKeyScope(scope), Namespace: nonEmpty(ns), Key: key,
		Held: k.Held, Waiting: k.Waiting, OldestWaiting: utc(k.OldestWaiting)}
}

// holdersOf is the API form of a key's holders or queue, of namespace
// ns: a cluster-wide key's executions of other namespaces are counted,
// not named.
func holdersOf(hs []model.SlotHolder, ns string) []models.SlotHolder {
	out := make([]models.SlotHolder, 0, len(hs))
	for _, s := range hs {
		if s.Namespace != ns {
			continue
		}
		out = append(out, models.SlotHolder{ExecutionId: s.ExecutionID, ScheduledFor: s.ScheduledFor, JobId: s.JobID,
			Namespace: s.Namespace, Since: s.Since})
	}
	return out
}
