package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/depends"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// dependsFields are a request's dependency members.
type dependsFields struct {
	on        *[]models.DependsOn
	mode      *models.DependsMode
	match     *models.DependsMatch
	timeout   *string
	onTimeout *models.DependsOnTimeout
	onSkipped *models.DependsOnUpstreamSkipped
}

// dependsOf is the use case's form of a request's dependencies: nil when
// it has none. Members other than depends_on without it are a fault, as
// are a depends_match and a wait_timeout that do not parse.
func dependsOf(f dependsFields, syntax *fieldErrors) *jobs.DependsSpec {
	if f.on == nil {
		for name, set := range map[string]bool{"depends_mode": f.mode != nil, "depends_match": f.match != nil,
			"wait_timeout": f.timeout != nil, "on_timeout": f.onTimeout != nil, "on_upstream_skipped": f.onSkipped != nil} {
			if set {
				syntax.add(name, "applies only with depends_on")
			}
		}
		return nil
	}
	d := &jobs.DependsSpec{}
	for _, r := range *f.on {
		d.On = append(d.On, jobs.DependRef{Job: r.Job, On: string(deref(r.On))})
	}
	d.Mode = string(deref(f.mode))
	d.OnTimeout, d.OnUpstreamSkipped = string(deref(f.onTimeout)), string(deref(f.onSkipped))
	if f.timeout != nil {
		t, err := time.ParseDuration(*f.timeout)
		if err != nil {
			syntax.add("wait_timeout", "must be a Go duration such as 30m or 2h")
		}
		d.WaitTimeout = &t
	}
	if f.match != nil {
		var s string
		var o struct {
			LatestWithin *string `json:"latest_within"`
		}
		switch {
		case json.Unmarshal(*f.match, &s) == nil:
			d.Match = s
		case json.Unmarshal(*f.match, &o) == nil && o.LatestWithin != nil:
			d.Match = domain.MatchLatestWithin
			w, err := time.ParseDuration(*o.LatestWithin)
			if err != nil {
				syntax.add("depends_match.latest_within", "must be a Go duration such as 6h")
			}
			d.Within = w
		default:
			syntax.add("depends_match", `must be "same_time" or {"latest_within": "<duration>"}`)
		}
	}
	return d
}

// dependsView writes j's dependencies into its API form (upstreams by id;
// withNames adds their names).
func dependsView(j *model.Job, out *models.Job) {
	d := j.Depends
	if d == nil {
		return
	}
	ups := make([]models.Upstream, len(d.On))
	for i, u := range d.On {
		ups[i] = models.Upstream{JobId: u.Job, On: models.UpstreamOn(u.On)}
	}
	out.DependsOn = &ups
	out.DependsMode = ptr(models.DependsMode(d.Mode))
	match := json.RawMessage(`"same_time"`)
	if d.Match == domain.MatchLatestWithin {
		match, _ = json.Marshal(map[string]string{"latest_within": formatDuration(d.Within())})
	}
	out.DependsMatch = (*models.DependsMatch)(&match)
	out.WaitTimeout = ptr(formatDuration(d.WaitTimeout()))
	out.OnTimeout = ptr(models.DependsOnTimeout(d.OnTimeout))
	out.OnUpstreamSkipped = ptr(models.DependsOnUpstreamSkipped(d.OnUpstreamSkipped))
	if d.Chain {
		out.Chain = ptr(true)
	}
}

// withNames is j's API form with its upstreams named.
func (h *endpoints) withNames(ctx context.Context, j *model.Job) models.Job {
	out := jobOf(j)
	if out.DependsOn == nil || len(*out.DependsOn) == 0 {
		return out
	}
	ids := make([]uuid.UUID, len(*out.DependsOn))
	for i, u := range *out.DependsOn {
		ids[i] = u.JobId
	}
	refs, err := h.s.store.ListJobRefs(ctx, ids)
	if err != nil {
		return out // the ids alone
	}
	for i, u := range *out.DependsOn {
		if r, ok := refs[u.JobId]; ok {
			(*out.DependsOn)[i].Name, (*out.DependsOn)[i].Namespace = ptr(r.Name), ptr(r.Namespace)
		}
	}
	return out
}

// mayRead is whether the request's principal may read a namespace.
func mayRead(c echo.Context) func(string) bool {
	who := principal(c)
	return func(ns string) bool { return who != nil && who.Allows(ns, auth.Reader) }
}

// dependsError is the problem of a refused dependency change, or nil.
func dependsError(err error) error {
	var fe *jobs.ForeignError
	var de *store.DependentsError
	switch {
	case errors.As(err, &fe):
		return newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", fe.Error())
	case errors.As(err, &de):
		names := make([]string, len(de.Dependents))
		for i, d := range de.Dependents {
			names[i] = d.Namespace + "/" + d.Name
		}
		return conflict(fmt.Sprintf("Other jobs depend on this job: %s. Change their depends_on first, or delete with ?force=true to take it out of their dependencies.",
			strings.Join(names, ", ")))
	}
	return nil
}

// GetJobGraph handles GET /v1/jobs/{id}/graph.
func (h *endpoints) GetJobGraph(c echo.Context, id models.ID) error {
	ctx := c.Request().Context()
	j, err := h.s.store.GetJob(ctx, id)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	edges, err := h.s.store.ListJobEdges(ctx, id, 500)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	ref := func(r model.JobRef) models.JobRef {
		return models.JobRef{Id: r.ID, Namespace: r.Namespace, Name: r.Name}
	}
	out := models.JobGraph{Job: models.JobRef{Id: j.ID, Namespace: j.Namespace, Name: j.Name}, Edges: make([]models.JobEdge, 0, len(edges))}
	for _, e := range edges {
		out.Edges = append(out.Edges, models.JobEdge{Upstream: ref(e.Upstream), Downstream: ref(e.Downstream),
			On: models.JobEdgeOn(e.On), Chain: e.Chain})
	}
	return c.JSON(http.StatusOK, out)
}

// dependencyLinks adds to a whole execution's API form what it waits for
// (while waiting) and its links both ways.
func (h *endpoints) dependencyLinks(ctx context.Context, e *model.Execution, out *models.Execution) error {
	if e.State == domain.ExecWaiting {
		j, err := h.s.store.GetJob(ctx, e.JobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		w := model.Waiting{ID: e.ID, JobID: e.JobID, Bucket: e.Bucket, Namespace: e.Namespace, JobName: e.JobName,
			ScheduledFor: e.ScheduledFor}
		if j != nil && j.Depends != nil {
			w.Depends = *j.Depends
		}
		edges, err := depends.Explain(ctx, h.s.store, w)
		if err != nil {
			return err
		}
		wf := make([]models.WaitEdge, len(edges))
		for i, x := range edges {
			wf[i] = models.WaitEdge{JobId: x.Upstream.Job, On: models.WaitEdgeOn(x.Upstream.On),
				Status: models.WaitEdgeStatus(statusName(x.Status)), Detail: x.Why, JobName: nonEmpty(x.Run.JobName)}
			if x.Run.Execution != nil {
				wf[i].ExecutionId = &x.Run.Execution.ID
			}
		}
		out.WaitingFor = &wf
		out.WaitUntil = ptr(e.ScheduledFor.Add(w.Depends.WaitTimeout()).UTC())
	}
	links := func(ls []model.ExecutionLink) *[]models.ExecutionLink {
		if len(ls) == 0 {
			return nil
		}
		out := make([]models.ExecutionLink, len(ls))
		for i, l := range ls {
			out[i] = models.ExecutionLink{ExecutionId: l.ExecutionID, JobId: l.JobID, JobName: l.JobName,
				Namespace: l.Namespace, ScheduledFor: l.ScheduledFor, State: models.ExecutionState(l.State)}
		}
		return &out
	}
	up, err := h.s.store.ListExecutionUpstreams(ctx, e.ID)
	if err != nil {
		return err
	}
	down, err := h.s.store.ListReleasedExecutions(ctx, e.ID)
	if err != nil {
		return err
	}
	out.Upstreams, out.Released = links(up), links(down)
	return nil
}

func statusName(s depends.Status) string {
	switch s {
	case depends.Satisfied:
		return "satisfied"
	case depends.Refused:
		return "refused"
	}
	return "pending"
}
