package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/applyset"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// PlanApplySet handles POST /v1/applysets/{name}:plan.
func (h *endpoints) PlanApplySet(c echo.Context, name string) error {
	return h.applySet(c, name, false)
}

// ApplyApplySet handles POST /v1/applysets/{name}:apply.
func (h *endpoints) ApplyApplySet(c echo.Context, name string) error {
	return h.applySet(c, name, true)
}

// applySet reads the request of :plan or :apply and answers the plan.
func (h *endpoints) applySet(c echo.Context, name string, apply bool) error {
	ctx := c.Request().Context()
	_, members, err := readObject(c, MaxBatchBytes)
	if err != nil {
		return err
	}
	req, err := h.applySetRequest(c, name, members, apply)
	if err != nil {
		return err
	}
	var plan *applyset.Plan
	if apply {
		plan, err = h.s.applySets.Apply(ctx, req)
	} else {
		plan, err = h.s.applySets.Plan(ctx, req)
	}
	var ce *applyset.ConflictError
	switch {
	case err == nil:
	case errors.Is(err, applyset.ErrStale):
		return conflict("The jobs or the set changed since the plan (or this is not the planned request): plan again, and apply the new plan_hash.")
	case errors.As(err, &ce):
		return conflict(ce.Error() + ".")
	case errors.Is(err, applyset.ErrMassDelete):
		return conflict(fmt.Sprintf("The plan deletes more than half of the set's members, or more than %d jobs: send allow_mass_delete to apply it.", applyset.MassDelete))
	case errors.Is(err, store.ErrConflict):
		// A job of the same name was made (through the API) between the
		// plan's read of the names and the apply's insert: nothing applied.
		return conflict("A job named in the set was created outside it meanwhile: plan again (with adopt to take it in).")
	default:
		if pr := dependsError(err); pr != nil {
			return pr
		}
		return h.storeError(c, err, "job", uuid.Nil)
	}
	if apply {
		for _, ch := range plan.Changes {
			switch ch.Action {
			case applyset.Create, applyset.Update, applyset.Adopt:
				h.s.jobChanged(ch.Want)
			}
		}
	}
	return c.JSON(http.StatusOK, h.planOf(c, plan))
}

// applySetRequest checks a request body's members and translates its
// jobs as POST /v1/jobs does.
func (h *endpoints) applySetRequest(c echo.Context, name string, members map[string]json.RawMessage, apply bool) (applyset.Request, error) {
	req := applyset.Request{Set: name, Namespace: jobs.DefaultNamespace, MayRead: mayRead(c),
		Render: func(j *model.Job) json.RawMessage { b, _ := json.Marshal(jobOf(j)); return b }}
	if who := principal(c); who != nil {
		req.Actor = who.Subject
	}
	req.Room = func(n int) error { return h.s.checkJobQuota(c, "jobs", req.Namespace, n) }
	var errs fieldErrors
	str := func(k string, dst *string) {
		if raw, ok := members[k]; ok && json.Unmarshal(raw, dst) != nil {
			errs.add(k, "must be a string")
		}
	}
	flag := func(k string, dst *bool) {
		if raw, ok := members[k]; ok && json.Unmarshal(raw, dst) != nil {
			errs.add(k, "must be true or false")
		}
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch k {
		case "namespace":
			str(k, &req.Namespace)
		case "commit":
			if str(k, &req.Commit); len(req.Commit) > 200 {
				errs.add(k, "must be at most 200 bytes")
			}
		case "plan_hash":
			str(k, &req.PlanHash)
		case "prune":
			flag(k, &req.Prune)
		case "adopt":
			flag(k, &req.Adopt)
		case "lock":
			flag(k, &req.Lock)
		case "allow_mass_delete":
			flag(k, &req.AllowMassDelete)
		case "jobs":
		default:
			errs.add(k, "unknown field")
		}
	}
	// The body names the namespace: the guard could not check it.
	op := map[bool]string{false: "planApplySet", true: "applyApplySet"}[apply]
	if err := h.s.allow(c, op, "namespace", req.Namespace); err != nil {
		return req, err
	}
	if apply && req.PlanHash == "" {
		errs.add("plan_hash", "is required: the plan_hash of the plan to apply")
	}
	raws := jobsMember(members, 0, &errs)
	var at []int // at[k]: the place in raws of req.Jobs[k]
	for i, raw := range raws {
		field := "jobs[" + strconv.Itoa(i) + "]"
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			errs.add(field, "must be a JSON object")
			continue
		}
		var jc models.JobCreate
		shape, stopped := decodeChecked(raw, h.s.createSchema, &jc)
		if stopped {
			errs = append(errs, shape.under(field)...)
			continue
		}
		nj, syntax := newJobOf(&jc)
		if jc.Namespace != nil && *jc.Namespace != req.Namespace {
			syntax.add("namespace", "is %q, not the set's namespace %q", *jc.Namespace, req.Namespace)
		}
		nj.Namespace, nj.MayRead = req.Namespace, req.MayRead
		errs = append(errs, shape.merge(syntax).under(field)...)
		req.Jobs = append(req.Jobs, applyset.Desired{Job: nj, Paused: jc.Paused})
		at = append(at, i)
	}
	if len(errs) == 0 {
		return req, nil // the plan reports the use case's faults
	}
	// With the request's faults, the use case's too, as POST /v1/jobs
	// reports them: every fault of the request in one answer.
	for i, d := range req.Jobs {
		_, err := h.s.jobs.BuildDefinition(d.Job)
		faults := fieldErrorsOf(jobs.Faults(err))
		if err != nil && faults == nil {
			return req, h.internal(c, err)
		}
		errs = append(errs, faults.under("jobs["+strconv.Itoa(at[i])+"]")...)
	}
	return req, errs.err()
}

// planOf is the API's form of a plan: each change's fields with their
// values before and after as GET /v1/jobs/{id} shows them (a secret
// header only as "(secret)"), upstreams named.
func (h *endpoints) planOf(c echo.Context, p *applyset.Plan) models.ApplySetPlan {
	out := models.ApplySetPlan{Namespace: p.Namespace, Set: p.Set, Revision: p.Revision, Lock: ptr(p.Lock), PlanHash: p.Hash,
		Applied: p.Applied, MassDelete: ptr(p.MassDelete), Changes: make([]models.ApplySetChange, 0, len(p.Changes))}
	names := map[uuid.UUID]model.JobRef{}
	for _, ch := range p.Changes {
		for _, j := range []*model.Job{ch.Current, ch.Want} {
			if j != nil {
				names[j.ID] = model.JobRef{ID: j.ID, Namespace: p.Namespace, Name: ch.Name}
			}
		}
	}
	view := func(j *model.Job) map[string]any {
		v := jobOf(j)
		if v.DependsOn != nil {
			var missing []uuid.UUID
			for _, u := range *v.DependsOn {
				if _, ok := names[u.JobId]; !ok {
					missing = append(missing, u.JobId)
				}
			}
			if len(missing) > 0 {
				if refs, err := h.s.store.ListJobRefs(c.Request().Context(), missing); err == nil {
					for id, r := range refs {
						names[id] = r
					}
				}
			}
			for i, u := range *v.DependsOn {
				if r, ok := names[u.JobId]; ok {
					(*v.DependsOn)[i].Name, (*v.DependsOn)[i].Namespace = ptr(r.Name), ptr(r.Namespace)
				}
			}
		}
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	out.Summary = models.ApplySetSummary{Create: p.Count(applyset.Create), Update: p.Count(applyset.Update),
		Delete: p.Count(applyset.Delete), Adopt: p.Count(applyset.Adopt), Unchanged: p.Count(applyset.Unchanged),
		Orphan: p.Count(applyset.Orphan), Conflict: p.Count(applyset.Conflict), Drift: p.Drifted()}
	for _, ch := range p.Changes {
		item := models.ApplySetChange{Action: models.ApplySetChangeAction(ch.Action), Name: ch.Name, Drift: ch.Drift, Reason: nonEmpty(ch.Reason)}
		if ch.Current != nil {
			item.JobId = ptr(ch.Current.ID)
		} else if p.Applied && ch.Want != nil {
			item.JobId = ptr(ch.Want.ID)
		}
		if len(ch.Fields) > 0 {
			before, after := view(ch.Current), view(ch.Want)
			fields := make([]models.ApplySetField, len(ch.Fields))
			for i, f := range ch.Fields {
				fields[i] = models.ApplySetField{Field: f}
				switch {
				case strings.HasPrefix(f, "handler.secret_headers."):
					header := strings.TrimPrefix(f, "handler.secret_headers.")
					if _, ok := ch.Current.Handler.SecretHeaders[header]; ok {
						fields[i].Before = "(secret)"
					}
					if _, ok := ch.Want.Handler.SecretHeaders[header]; ok {
						fields[i].After = "(secret)"
					}
				case f == "paused":
					fields[i].Before, fields[i].After = ch.Current.State == "paused", ch.Paused != nil && *ch.Paused
				default:
					fields[i].Before, fields[i].After = before[f], after[f]
				}
			}
			item.Fields = &fields
		}
		out.Changes = append(out.Changes, item)
	}
	return out
}

// ListApplySets handles GET /v1/applysets.
func (h *endpoints) ListApplySets(c echo.Context, p models.ListApplySetsParams) error {
	ns, err := h.s.listNamespace(c, "listApplySets", deref(p.Namespace))
	if err != nil {
		return err
	}
	var namespaces []string
	if ns != "" {
		if msg := jobs.NameProblem(ns); msg != "" {
			return invalid("namespace", "%s", msg)
		}
		namespaces = []string{ns}
	}
	sets, err := h.s.store.ListApplySets(c.Request().Context(), namespaces)
	if err != nil {
		return h.storeError(c, err, "apply set", uuid.Nil)
	}
	out := models.ApplySetList{Items: make([]models.ApplySet, 0, len(sets))}
	for _, set := range sets {
		out.Items = append(out.Items, models.ApplySet{Namespace: set.Namespace, Name: set.Name, Revision: set.Revision, Lock: set.Lock,
			Commit: nonEmpty(set.Commit), AppliedAt: set.AppliedAt, AppliedBy: set.AppliedBy, Members: set.Members})
	}
	return c.JSON(http.StatusOK, out)
}
