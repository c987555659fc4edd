package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Page sizes of the list endpoints.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// endpoints implements the generated ServerInterface: one method per
// operation of the OpenAPI document.
type endpoints struct {
	s *Server
}

var _ ServerInterface = (*endpoints)(nil)

// readBody reads a JSON request body, checks its shape against schema
// and decodes it into dst. A body that cannot be read or parsed is an
// error; shape faults (unknown members, wrong JSON types) come back as
// field errors, so that the handler can add its own checks to them and
// report every fault at once. members are the body's top-level members,
// so that PATCH can tell a member sent as null from one left out.
func (h *endpoints) readBody(c echo.Context, schema *openapi3.Schema, dst any) (members map[string]json.RawMessage, shape fieldErrors, err error) {
	body, members, err := readObject(c, maxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	shape, stopped := decodeChecked(body, schema, dst)
	if stopped {
		return nil, nil, shape.err()
	}
	return members, shape, nil
}

// readOptional is readBody for a body that may be absent or empty (then
// dst is left as it is).
func (h *endpoints) readOptional(c echo.Context, schema *openapi3.Schema, dst any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBodyBytes+1))
	if err != nil {
		return invalid("body", "could not be read: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	_, shape, err := h.readBody(c, schema, dst)
	if err != nil {
		return err
	}
	return shape.err()
}

// readObject reads a request body of at most limit bytes that must be a
// JSON object, and returns it with its top-level members. Its media type
// was checked before (requireJSON).
func readObject(c echo.Context, limit int) (body []byte, members map[string]json.RawMessage, err error) {
	body, err = io.ReadAll(io.LimitReader(c.Request().Body, int64(limit)+1))
	if err != nil {
		return nil, nil, invalid("body", "could not be read: %v", err)
	}
	if len(body) > limit {
		return nil, nil, echo.ErrStatusRequestEntityTooLarge
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil, invalid("body", "is required: send a JSON object")
	}
	if err := json.Unmarshal(body, &members); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, nil, invalid("body", "is not valid JSON: %s (at byte %d)", se.Error(), se.Offset)
		case json.Valid(body):
			return nil, nil, invalid("body", "must be a JSON object")
		}
		return nil, nil, invalid("body", "is not valid JSON: %v", err)
	}
	if members == nil { // the body is null
		return nil, nil, invalid("body", "must be a JSON object")
	}
	return body, members, nil
}

// decodeChecked checks the JSON object raw against schema and decodes it
// into dst. It returns the shape faults; stopped means decoding stopped
// part way, so the faults are all worth reporting and dst is not to be
// checked further.
func decodeChecked(raw []byte, schema *openapi3.Schema, dst any) (shape fieldErrors, stopped bool) {
	checkShape("", schema, raw, &shape)
	if err := json.Unmarshal(raw, dst); err != nil {
		// A member of the wrong JSON type is skipped by Unmarshal and
		// reported by checkShape; anything else stops decoding part way,
		// and then only the shape faults are worth reporting.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			if len(shape) > 0 {
				return shape, true
			}
			return fieldErrors{{Field: "body", Message: "does not match the schema: " + err.Error()}}, true
		}
		if len(shape) == 0 {
			return fieldErrors{{Field: "body", Message: "does not match the schema: " + err.Error()}}, true
		}
	}
	return shape, false
}

// storeError maps a failure of a use case or of the store to a problem;
// the unexpected ones are logged and answered with a bare 500.
func (h *endpoints) storeError(c echo.Context, err error, what string, id uuid.UUID) error {
	var (
		problem *apiError
		locked  *jobs.LockedError
	)
	switch {
	case errors.As(err, &problem):
		return problem
	case errors.As(err, &locked):
		return conflict(locked.Error() + ".")
	case jobs.Faults(err) != nil:
		return validationProblem(fieldErrorsOf(jobs.Faults(err))...)
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("No %s with id %s.", what, id))
	case errors.Is(err, store.ErrBadCursor):
		return invalid("cursor", "is not a cursor this server handed out")
	case errors.Is(err, store.ErrAtLimit):
		_, msg, _ := strings.Cut(err.Error(), store.ErrAtLimit.Error()+": ")
		return conflict("The job's " + msg + ": the run was not queued.")
	}
	var args []any
	if id != uuid.Nil {
		key := "job_id"
		if what == "execution" {
			key = "execution_id"
		}
		args = append(args, key, id.String())
	}
	return h.s.failure(c, err, "store call failed", args...)
}

// internal logs err and answers a bare 500 (503 when Postgres is
// unavailable).
func (h *endpoints) internal(c echo.Context, err error, args ...any) error {
	return h.s.failure(c, err, "request failed", args...)
}

// CreateJob handles POST /v1/jobs.
func (h *endpoints) CreateJob(c echo.Context, _ models.CreateJobParams) error {
	ctx := c.Request().Context()
	var req models.JobCreate
	_, shape, err := h.readBody(c, h.s.createSchema, &req)
	if err != nil {
		return err
	}
	nj, syntax := newJobOf(&req)
	if err := h.s.allow(c, "createJob", "namespace", namespaceOrDefault(nj.Namespace)); err != nil {
		return err
	}
	if len(shape) > 0 || len(syntax) > 0 {
		// Report the use case's faults along with the request's.
		_, errs, err := h.newJob(nj, shape, syntax, func() (time.Time, error) { return h.s.jobs.Now(ctx) })
		if err != nil {
			return h.internal(c, err)
		}
		return errs.err()
	}
	if err := h.s.checkJobQuota(c, "namespace", namespaceOrDefault(nj.Namespace), 1); err != nil {
		return err
	}
	nj.MayRead = mayRead(c)
	j, err := h.s.jobs.Create(ctx, nj)
	if errors.Is(err, store.ErrConflict) {
		return nameTaken(nj.Namespace, nj.Name)
	}
	if p := dependsError(err); p != nil {
		return p
	}
	if err != nil {
		return h.storeError(c, err, "job", uuid.Nil)
	}
	h.s.jobChanged(j)
	c.Response().Header().Set(echo.HeaderLocation, "/v1/jobs/"+j.ID.String())
	setETag(c, j)
	return c.JSON(http.StatusCreated, h.withNames(ctx, j))
}

// newJob builds the job nj describes (shape and syntax: the faults found
// decoding and translating its request), with its first run computed
// from now, which is called only when the schedule is valid. It returns
// every fault — the shape's, then the use case's, then the syntax's — or
// an error when now fails.
func (h *endpoints) newJob(nj jobs.NewJob, shape, syntax fieldErrors, now func() (time.Time, error)) (*model.Job, fieldErrors, error) {
	j, err := h.s.jobs.Build(nj, now)
	faults := fieldErrorsOf(jobs.Faults(err))
	if err != nil && len(faults) == 0 {
		return nil, nil, err
	}
	if errs := shape.merge(append(faults, syntax...)); len(errs) > 0 {
		return nil, errs, nil
	}
	return j, nil, nil
}

// nameTaken is the problem of a job whose name is taken.
func nameTaken(namespace, name string) *apiError {
	return conflict(fmt.Sprintf("A job named %q already exists in namespace %q.", name, namespace))
}

// ListJobs handles GET /v1/jobs.
func (h *endpoints) ListJobs(c echo.Context, p models.ListJobsParams) error {
	var errs fieldErrors
	f := store.JobFilter{
		NamePrefix: deref(p.NamePrefix),
		Cursor:     deref(p.Cursor),
		Limit:      limitOf(p.Limit, &errs),
	}
	ns, err := h.s.listNamespace(c, "listJobs", deref(p.Namespace))
	if err != nil {
		return err
	}
	if ns != "" {
		if msg := jobs.NameProblem(ns); msg != "" {
			errs.add("namespace", "%s", msg)
		}
		f.Namespace = ns
	}
	if st := deref(p.State); st != "" {
		if !st.Valid() {
			errs.add("state", "must be one of active, paused, completed")
		}
		f.State = domain.JobState(st)
	}
	// A prefix holding a character no name may hold would match nothing;
	// it is refused like such a name (and U+0000 never reaches Postgres).
	if p := f.NamePrefix; p != "" {
		if msg := jobs.NameProblem(p); msg != "" {
			errs.add("name_prefix", "%s", msg)
		}
	}
	f.Selector = selectorOf(deref(p.Selector), &errs)
	if hq := deref(p.Handler); hq != "" {
		// A queue is http, nats or a custom handler's name; anything
		// else would match nothing (and U+0000 never reaches Postgres).
		if msg := jobs.NameProblem(hq); msg != "" {
			errs.add("handler", "%s", msg)
		}
		f.Handler = hq
	}
	f.NextRunAfter = rfc3339Param("next_run_after", p.NextRunAfter, &errs)
	f.NextRunBefore = rfc3339Param("next_run_before", p.NextRunBefore, &errs)
	if err := errs.err(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	list, next, err := h.s.store.ListJobs(ctx, f)
	if err != nil {
		return h.storeError(c, err, "job", uuid.Nil)
	}
	out := models.JobList{Items: make([]models.Job, 0, len(list)), NextCursor: nonEmpty(next)}
	for _, j := range list {
		out.Items = append(out.Items, jobOf(j))
	}
	if deref(p.Count) {
		n, exact, err := h.s.store.CountJobsMatching(ctx, f)
		if err != nil {
			return h.storeError(c, err, "job", uuid.Nil)
		}
		out.Total, out.TotalExact = &n, &exact
	}
	return c.JSON(http.StatusOK, out)
}

// rfc3339Param reads an optional RFC 3339 time parameter; the zero time
// when absent.
func rfc3339Param(name string, v *string, errs *fieldErrors) time.Time {
	if v == nil || *v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		errs.add(name, "must be an RFC 3339 time (2026-11-23T09:00:00Z)")
	}
	return t
}

// limitOf checks a page size, defaultLimit when absent.
func limitOf(l *int, errs *fieldErrors) int {
	if l == nil {
		return defaultLimit
	}
	if *l < 1 || *l > maxLimit {
		errs.add("limit", "must be between 1 and %d", maxLimit)
	}
	return *l
}

// GetJob handles GET /v1/jobs/{id}.
func (h *endpoints) GetJob(c echo.Context, id models.ID) error {
	j, err := h.s.store.GetJob(c.Request().Context(), id)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	setETag(c, j)
	return c.JSON(http.StatusOK, h.withNames(c.Request().Context(), j))
}

// UpdateJob handles PATCH /v1/jobs/{id}.
func (h *endpoints) UpdateJob(c echo.Context, id models.ID, params models.UpdateJobParams) error {
	ctx := c.Request().Context()
	rev, err := ifMatch(params.IfMatch)
	if err != nil {
		return err
	}
	var req models.JobPatch
	members, shape, err := h.readBody(c, h.s.patchSchema, &req)
	if err != nil {
		return err
	}
	p, syntax := patchOf(&req, members)
	if len(shape) > 0 || len(syntax) > 0 {
		// Report the use case's faults along with the request's, without
		// reading the job: a bad request is a 400 whether or not it exists.
		err := h.s.jobs.CheckPatch(ctx, p)
		faults := fieldErrorsOf(jobs.Faults(err))
		if err != nil && len(faults) == 0 {
			return h.internal(c, err, "job_id", id.String())
		}
		return shape.merge(append(faults, syntax...)).err()
	}
	p.MayRead, p.IfRevision = mayRead(c), rev
	j, err := h.s.jobs.Update(ctx, id, p)
	if pr := dependsError(err); pr != nil {
		return pr
	}
	if errors.Is(err, store.ErrRevision) {
		return preconditionFailed(id.String())
	}
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	h.s.jobChanged(j)
	setETag(c, j)
	return c.JSON(http.StatusOK, h.withNames(ctx, j))
}

// DeleteJob handles DELETE /v1/jobs/{id}. With force, the jobs that
// depended on it lose it from their dependencies, each change an audit
// entry of its own.
func (h *endpoints) DeleteJob(c echo.Context, id models.ID, p models.DeleteJobParams) error {
	ctx := c.Request().Context()
	var (
		ns       string
		unlinked []model.JobRef
		err      error
	)
	rev, err := ifMatch(p.IfMatch)
	if err != nil {
		return err
	}
	ns, unlinked, err = h.s.jobs.DeleteAtRevision(ctx, id, rev, deref(p.Force))
	if pr := dependsError(err); pr != nil {
		return pr
	}
	if errors.Is(err, store.ErrRevision) {
		return preconditionFailed(id.String())
	}
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	if len(unlinked) > 0 {
		who := ""
		if pr := principal(c); pr != nil {
			who = pr.Subject
		}
		entries := make([]model.AuditEntry, len(unlinked))
		for i, d := range unlinked {
			after, _ := json.Marshal(map[string]string{"removed_upstream": id.String(),
				"why": "the upstream job was deleted with force=true"})
			entries[i] = model.AuditEntry{At: time.Now(), Actor: who, Namespace: d.Namespace, Action: "jobs.update",
				Resource: "job " + d.ID.String(), After: after}
		}
		if err := h.s.store.CreateAuditEntries(context.WithoutCancel(ctx), entries); err != nil {
			h.s.log.ErrorContext(ctx, "audit entries of a forced delete not written", "job_id", id, "err", err)
		}
	}
	h.s.changes.Publish(changes.Change{Kind: changes.KindJob, Namespace: ns, JobID: id.String(), State: changes.StateDeleted, At: time.Now().UTC()})
	return c.NoContent(http.StatusNoContent)
}

// PauseJob handles POST /v1/jobs/{id}/pause.
func (h *endpoints) PauseJob(c echo.Context, id models.ID) error {
	j, err := h.s.jobs.Pause(c.Request().Context(), id)
	if errors.Is(err, jobs.ErrCompleted) {
		return conflict(fmt.Sprintf("Job %s has completed; there is nothing left to pause.", id))
	}
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	h.s.jobChanged(j)
	return c.JSON(http.StatusOK, jobOf(j))
}

// ResumeJob handles POST /v1/jobs/{id}/resume. Its body (ResumeOptions)
// is optional.
func (h *endpoints) ResumeJob(c echo.Context, id models.ID) error {
	var opts models.ResumeOptions
	if err := h.readOptional(c, h.s.resumeSchema, &opts); err != nil {
		return err
	}
	j, err := h.s.jobs.Resume(c.Request().Context(), id, deref(opts.CatchUp))
	var why *schedule.FieldError
	switch {
	case errors.Is(err, jobs.ErrCompleted):
		return conflict(fmt.Sprintf("Job %s has completed and cannot be resumed; give it a new schedule with PATCH.", id))
	case errors.Is(err, jobs.ErrNoNextRun) && errors.As(err, &why):
		return conflict(fmt.Sprintf("Job %s cannot be resumed: %v.", id, why))
	case err != nil:
		return h.storeError(c, err, "job", id)
	}
	h.s.jobChanged(j)
	return c.JSON(http.StatusOK, jobOf(j))
}

// RunJob handles POST /v1/jobs/{id}/run.
func (h *endpoints) RunJob(c echo.Context, id models.ID, _ models.RunJobParams) error {
	if h.s.limits.cfg.ManualPerMinute > 0 {
		ns, err := h.s.store.GetJobNamespace(c.Request().Context(), id)
		if err != nil {
			return h.storeError(c, err, "job", id)
		}
		if err := h.s.checkRunQuota(c, ns); err != nil {
			return err
		}
	}
	e, err := h.s.jobs.CreateManualExecution(c.Request().Context(), id)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	h.s.executionChanged(e)
	c.Response().Header().Set(echo.HeaderLocation, "/v1/executions/"+e.ID.String())
	return c.JSON(http.StatusAccepted, executionOf(e, false))
}

// ListJobExecutions handles GET /v1/jobs/{id}/executions.
func (h *endpoints) ListJobExecutions(c echo.Context, id models.ID, p models.ListJobExecutionsParams) error {
	ctx := c.Request().Context()
	var errs fieldErrors
	f := store.ExecFilter{
		JobID:  &id,
		Cursor: deref(p.Cursor),
		Limit:  limitOf(p.Limit, &errs),
	}
	f.State = stateFilter(p.State, &errs)
	if err := errs.err(); err != nil {
		return err
	}
	execs, next, err := h.s.store.ListExecutions(ctx, f)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	if len(execs) == 0 && f.Cursor == "" {
		// No executions: tell an unknown job from a quiet one. A deleted
		// job's executions stay listable.
		if _, err := h.s.store.GetJob(ctx, id); err != nil {
			return h.storeError(c, err, "job", id)
		}
	}
	out := executionListOf(execs, next)
	h.explainWaits(ctx, execs, out.Items)
	return c.JSON(http.StatusOK, out)
}

// GetExecution handles GET /v1/executions/{id}.
func (h *endpoints) GetExecution(c echo.Context, id models.ID) error {
	e, err := h.s.store.GetExecution(c.Request().Context(), id)
	if err != nil {
		return h.storeError(c, err, "execution", id)
	}
	out := executionOf(e, true)
	if err := h.dependencyLinks(c.Request().Context(), e, &out); err != nil {
		return h.storeError(c, err, "execution", id)
	}
	items := []models.Execution{out}
	h.explainWaits(c.Request().Context(), []*model.Execution{e}, items)
	out = items[0]
	return c.JSON(http.StatusOK, out)
}

// GetHealthz handles GET /healthz: the process is up.
func (h *endpoints) GetHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, models.Health{Status: "ok"})
}

// GetReadyz handles GET /readyz: PostgreSQL answers.
func (h *endpoints) GetReadyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), h.s.readyTimeout)
	defer cancel()
	if _, err := h.s.store.Now(ctx); err != nil {
		h.s.log.WarnContext(ctx, "not ready: database unreachable", "err", err)
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Not ready", "The database is unreachable.")
	}
	return c.JSON(http.StatusOK, models.Health{Status: "ok"})
}

// GetMetrics handles GET /metrics.
func (h *endpoints) GetMetrics(c echo.Context) error {
	h.s.metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

// GetOpenAPI handles GET /openapi.json.
func (h *endpoints) GetOpenAPI(c echo.Context) error {
	spec, err := GetSpecJSON()
	if err != nil {
		return h.internal(c, err)
	}
	return c.JSONBlob(http.StatusOK, spec)
}
