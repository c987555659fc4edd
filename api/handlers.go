package api

import (
	"github.com/tock-sched/tock/domain"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
)

// Page sizes of the list endpoints.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// handlers implements the generated ServerInterface.
type handlers struct {
	s *Server
}

var _ ServerInterface = (*handlers)(nil)

// readBody reads a JSON request body, checks its shape against schema
// and decodes it into dst. A body that cannot be read or parsed is an
// error; shape faults (unknown members, wrong JSON types) come back as
// field errors, so that the handler can add its own checks to them and
// report every fault at once. members are the body's top-level members,
// so that PATCH can tell a member sent as null from one left out.
func (h *handlers) readBody(c echo.Context, schema *openapi3.Schema, dst any) (members map[string]json.RawMessage, shape fieldErrors, err error) {
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

// readObject reads a request body of at most limit bytes that must be a
// JSON object, and returns it with its top-level members.
func readObject(c echo.Context, limit int) (body []byte, members map[string]json.RawMessage, err error) {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
			return nil, nil, echo.ErrUnsupportedMediaType
		}
	}
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

// now is the database clock, in UTC; its error says it could not be read.
func (h *handlers) now(ctx context.Context) (time.Time, error) {
	return h.s.clock.Fresh(ctx)
}

// storeError maps a store failure to a problem; the unexpected ones are
// logged and answered with a bare 500.
func (h *handlers) storeError(c echo.Context, err error, what string, id uuid.UUID) error {
	var problem *apiError
	switch {
	case errors.As(err, &problem):
		return problem
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("No %s with id %s.", what, id))
	case errors.Is(err, store.ErrBadCursor):
		return invalid("cursor", "is not a cursor this server handed out")
	}
	args := []any{"method", c.Request().Method, "path", c.Request().URL.Path, "err", err}
	if id != uuid.Nil {
		key := "job_id"
		if what == "execution" {
			key = "execution_id"
		}
		args = append(args, key, id.String())
	}
	h.s.log.ErrorContext(c.Request().Context(), "store call failed", args...)
	return internalProblem()
}

// internal logs err and answers a bare 500.
func (h *handlers) internal(c echo.Context, err error, args ...any) error {
	args = append([]any{"method", c.Request().Method, "path", c.Request().URL.Path, "err", err}, args...)
	h.s.log.ErrorContext(c.Request().Context(), "request failed", args...)
	return internalProblem()
}

// CreateJob handles POST /v1/jobs.
func (h *handlers) CreateJob(c echo.Context) error {
	ctx := c.Request().Context()
	var req JobCreate
	_, shape, err := h.readBody(c, h.s.createSchema, &req)
	if err != nil {
		return err
	}
	j, errs, err := h.newJob(&req, shape, func() (time.Time, error) { return h.now(ctx) })
	if err != nil {
		return h.internal(c, err)
	}
	if err := errs.err(); err != nil {
		return err
	}
	if err := h.s.store.CreateJob(ctx, j); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nameTaken(j)
		}
		return h.storeError(c, err, "job", uuid.Nil)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/jobs/"+j.ID.String())
	return c.JSON(http.StatusCreated, jobOf(j))
}

// newJob checks a decoded JobCreate (shape: the faults found decoding it)
// and builds the job to store, with defaults filled in and its first run
// computed from now, which is called only when the schedule is valid. It
// returns every fault, or an error when now fails.
func (h *handlers) newJob(req *JobCreate, shape fieldErrors, now func() (time.Time, error)) (*store.Job, fieldErrors, error) {
	var errs fieldErrors
	checkName("name", req.Name, &errs)
	ns := "default"
	if req.Namespace != nil {
		ns = *req.Namespace
		checkName("namespace", ns, &errs)
	}
	spec := specOf(req.Schedule)
	sched := compileSchedule(spec, &errs)
	hd := handlerOf(req.Handler, &errs)
	retry := retryOf(req.Retry, &errs).WithDefaults(h.s.defaultRetry)
	priority := priorityOf(req.Priority, &errs)
	timeout := timeoutOf(req.Timeout, &errs)
	var next time.Time
	if sched != nil {
		t, err := now()
		if err != nil {
			return nil, nil, err
		}
		if next, err = sched.First(t); err != nil {
			addScheduleError(err, &errs)
		}
	}
	if errs = shape.merge(errs); len(errs) > 0 {
		return nil, errs, nil
	}
	return &store.Job{
		Namespace: ns,
		Name:      req.Name,
		Schedule:  spec,
		Handler:   hd,
		Payload:   payloadOf(req.Payload),
		State:     domain.JobActive,
		NextRunAt: &next,
		Retry:     retry,
		Priority:  priority,
		Timeout:   timeout,
	}, nil, nil
}

// nameTaken is the problem of a job whose name is taken.
func nameTaken(j *store.Job) *apiError {
	return conflict(fmt.Sprintf("A job named %q already exists in namespace %q.", j.Name, j.Namespace))
}

// ListJobs handles GET /v1/jobs.
func (h *handlers) ListJobs(c echo.Context, p ListJobsParams) error {
	var errs fieldErrors
	f := store.JobFilter{
		NamePrefix: deref(p.NamePrefix),
		Cursor:     deref(p.Cursor),
		Limit:      limitOf(p.Limit, &errs),
	}
	if ns := deref(p.Namespace); ns != "" {
		checkName("namespace", ns, &errs)
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
	switch p := f.NamePrefix; {
	case len(p) > maxNameLen:
		errs.add("name_prefix", "must be at most %d characters", maxNameLen)
	case p != "" && !nameChars.MatchString(p):
		errs.add("name_prefix", "may contain only letters, digits, '.', '_' and '-'")
	}
	if err := errs.err(); err != nil {
		return err
	}
	jobs, next, err := h.s.store.ListJobs(c.Request().Context(), f)
	if err != nil {
		return h.storeError(c, err, "job", uuid.Nil)
	}
	out := JobList{Items: make([]Job, 0, len(jobs)), NextCursor: nonEmpty(next)}
	for _, j := range jobs {
		out.Items = append(out.Items, jobOf(j))
	}
	return c.JSON(http.StatusOK, out)
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
func (h *handlers) GetJob(c echo.Context, id ID) error {
	j, err := h.s.store.GetJob(c.Request().Context(), id)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	return c.JSON(http.StatusOK, jobOf(j))
}

// UpdateJob handles PATCH /v1/jobs/{id}.
func (h *handlers) UpdateJob(c echo.Context, id ID) error {
	ctx := c.Request().Context()
	var req JobPatch
	members, shape, err := h.readBody(c, h.s.patchSchema, &req)
	if err != nil {
		return err
	}
	has := func(k string) bool { _, ok := members[k]; return ok }

	// Check everything before reading the job, so that a bad request is a
	// 400 whether or not the job exists.
	var (
		errs    fieldErrors
		spec    schedule.Spec
		next    time.Time
		patched store.Job // the checked handler, retry and timeout
	)
	if has("schedule") {
		spec = specOf(req.Schedule)
		if sched := compileSchedule(spec, &errs); sched != nil {
			now, err := h.now(ctx)
			if err != nil {
				return h.internal(c, err, "job_id", id.String())
			}
			if next, err = sched.First(now); err != nil {
				addScheduleError(err, &errs)
			}
		}
	}
	if has("handler") && req.Handler != nil {
		patched.Handler = handlerOf(*req.Handler, &errs)
	}
	if has("retry") {
		patched.Retry = retryOf(req.Retry, &errs).WithDefaults(h.s.defaultRetry)
	}
	if has("priority") {
		patched.Priority = priorityOf(req.Priority, &errs)
	}
	if has("timeout") {
		patched.Timeout = timeoutOf(req.Timeout, &errs)
	}
	if err := shape.merge(errs).err(); err != nil {
		return err
	}

	j, err := h.modifyJob(ctx, id, func(j *store.Job) (bool, error) {
		if len(members) == 0 {
			return false, nil
		}
		if has("schedule") && !sameSpec(spec, j.Schedule) {
			j.Schedule = spec
			// A paused job keeps waiting for resume, which computes its
			// next run then; a completed one runs again on its new schedule.
			if j.State != domain.JobPaused {
				j.State = domain.JobActive
				j.NextRunAt = &next
			}
		}
		if has("handler") {
			j.Handler = patched.Handler
		}
		if has("payload") {
			j.Payload = payloadOf(req.Payload)
		}
		if has("retry") {
			j.Retry = patched.Retry
		}
		if has("priority") {
			j.Priority = patched.Priority
		}
		if has("timeout") {
			j.Timeout = patched.Timeout
		}
		return true, nil
	})
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	return c.JSON(http.StatusOK, jobOf(j))
}

// modifyJob reads job id, lets change edit it, and writes it back if
// change says so. When a firing or another request changed the job in
// between (store.ErrStale), it starts over from a fresh read, so it never
// writes back an old next run. An error from change is returned as is.
func (h *handlers) modifyJob(ctx context.Context, id uuid.UUID, change func(j *store.Job) (bool, error)) (*store.Job, error) {
	for attempt := 0; ; attempt++ {
		j, err := h.s.store.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		write, err := change(j)
		if err != nil || !write {
			return j, err
		}
		err = h.s.store.UpdateJob(ctx, j)
		if errors.Is(err, store.ErrStale) && attempt < 10 {
			continue
		}
		return j, err
	}
}

// sameSpec reports whether two schedules say the same thing.
func sameSpec(a, b schedule.Spec) bool {
	if a.Cron != b.Cron || a.Timezone != b.Timezone || a.In != b.In {
		return false
	}
	if a.At == nil || b.At == nil {
		return a.At == nil && b.At == nil
	}
	return a.At.Equal(*b.At)
}

// DeleteJob handles DELETE /v1/jobs/{id}.
func (h *handlers) DeleteJob(c echo.Context, id ID) error {
	if err := h.s.store.DeleteJob(c.Request().Context(), id); err != nil {
		return h.storeError(c, err, "job", id)
	}
	return c.NoContent(http.StatusNoContent)
}

// PauseJob handles POST /v1/jobs/{id}/pause.
func (h *handlers) PauseJob(c echo.Context, id ID) error {
	j, err := h.modifyJob(c.Request().Context(), id, func(j *store.Job) (bool, error) {
		switch j.State {
		case domain.JobCompleted:
			return false, conflict(fmt.Sprintf("Job %s has completed; there is nothing left to pause.", id))
		case domain.JobPaused:
			return false, nil
		}
		j.State = domain.JobPaused
		j.NextRunAt = nil
		return true, nil
	})
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	return c.JSON(http.StatusOK, jobOf(j))
}

// ResumeJob handles POST /v1/jobs/{id}/resume.
func (h *handlers) ResumeJob(c echo.Context, id ID) error {
	ctx := c.Request().Context()
	now, err := h.now(ctx)
	if err != nil {
		return h.internal(c, err, "job_id", id.String())
	}
	j, err := h.modifyJob(ctx, id, func(j *store.Job) (bool, error) {
		switch j.State {
		case domain.JobCompleted:
			return false, conflict(fmt.Sprintf("Job %s has completed and cannot be resumed; give it a new schedule with PATCH.", id))
		case domain.JobActive:
			return false, nil
		}
		sched, err := schedule.Compile(j.Schedule)
		if err != nil {
			return false, fmt.Errorf("compile stored schedule: %w", err)
		}
		var next time.Time
		if j.Schedule.Kind() == schedule.KindAt && j.Schedule.At.Before(now) {
			// A one-shot job whose moment passed while it was paused has
			// not run yet: it runs now.
			next = now.Truncate(time.Millisecond)
		} else if next, err = sched.First(now); err != nil {
			return false, conflict(fmt.Sprintf("Job %s cannot be resumed: %v.", id, err))
		}
		j.State = domain.JobActive
		j.NextRunAt = &next
		return true, nil
	})
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	return c.JSON(http.StatusOK, jobOf(j))
}

// RunJob handles POST /v1/jobs/{id}/run.
func (h *handlers) RunJob(c echo.Context, id ID) error {
	ctx := c.Request().Context()
	now, err := h.now(ctx)
	if err != nil {
		return h.internal(c, err, "job_id", id.String())
	}
	// The store moves the execution a millisecond on if that time is taken.
	e, err := h.s.store.RunNow(ctx, id, now)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/executions/"+e.ID.String())
	return c.JSON(http.StatusAccepted, executionOf(e, false))
}

// ListJobExecutions handles GET /v1/jobs/{id}/executions.
func (h *handlers) ListJobExecutions(c echo.Context, id ID, p ListJobExecutionsParams) error {
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
	return c.JSON(http.StatusOK, executionListOf(execs, next))
}

// GetExecution handles GET /v1/executions/{id}.
func (h *handlers) GetExecution(c echo.Context, id ID) error {
	e, err := h.s.store.GetExecution(c.Request().Context(), id)
	if err != nil {
		return h.storeError(c, err, "execution", id)
	}
	return c.JSON(http.StatusOK, executionOf(e, true))
}

// GetHealthz handles GET /healthz: the process is up.
func (h *handlers) GetHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, Health{Status: "ok"})
}

// GetReadyz handles GET /readyz: PostgreSQL answers.
func (h *handlers) GetReadyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), h.s.readyTimeout)
	defer cancel()
	if _, err := h.s.store.Now(ctx); err != nil {
		h.s.log.WarnContext(ctx, "not ready: database unreachable", "err", err)
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Not ready", "The database is unreachable.")
	}
	return c.JSON(http.StatusOK, Health{Status: "ok"})
}

// GetMetrics handles GET /metrics.
func (h *handlers) GetMetrics(c echo.Context) error {
	h.s.metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

// GetOpenAPI handles GET /openapi.json.
func (h *handlers) GetOpenAPI(c echo.Context) error {
	spec, err := GetSpecJSON()
	if err != nil {
		return h.internal(c, err)
	}
	return c.JSONBlob(http.StatusOK, spec)
}
