package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Limits of POST /v1/jobs:batch.
const (
	// MaxBatchJobs is the most jobs one request may create.
	MaxBatchJobs = 1000
	// MaxBatchBytes bounds the request body: 1,000 jobs of up to 16 KiB
	// each. A client with larger jobs sends fewer per request.
	MaxBatchBytes = 16 << 20
)

// CreateJobBatch handles POST /v1/jobs:batch: each job is checked as
// CreateJob checks it, the valid ones are stored in one transaction, and
// every job gets its own result. A job that cannot be created does not
// stop the others; only a request that is malformed as a whole, or a
// database failure, creates nothing.
func (h *endpoints) CreateJobBatch(c echo.Context, _ models.CreateJobBatchParams) error {
	ctx := c.Request().Context()
	_, members, err := readObject(c, MaxBatchBytes)
	if err != nil {
		return err
	}
	raws, err := batchJobs(members)
	if err != nil {
		return err
	}
	// Every job's namespace must allow the caller to create jobs, and
	// have room for the batch's jobs; one that does not refuses the whole
	// batch.
	perNS := map[string]int{}
	var order []string
	for i, raw := range raws {
		ns := bodyNamespace(c, raw)
		if err := h.s.allow(c, "createJobBatch", "jobs["+strconv.Itoa(i)+"].namespace", ns); err != nil {
			return err
		}
		if perNS[ns] == 0 {
			order = append(order, ns)
		}
		perNS[ns]++
	}
	for _, ns := range order {
		if err := h.s.checkJobQuota(c, "jobs", ns, perNS[ns]); err != nil {
			return err
		}
	}
	items, built, index, err := h.buildBatch(ctx, raws)
	if err != nil {
		return h.internal(c, err)
	}
	if len(built) > 0 {
		results, err := h.s.jobs.CreateBatch(ctx, built)
		if err != nil {
			return h.storeError(c, err, "job", uuid.Nil)
		}
		for k, err := range results {
			i, j := index[k], built[k]
			switch {
			case err == nil:
				items[i] = models.JobBatchItem{Status: http.StatusCreated, Job: ptr(jobOf(j))}
				h.s.jobChanged(j)
			case errors.Is(err, store.ErrConflict):
				items[i] = problemItem(withField(nameTaken(j.Namespace, j.Name), "jobs["+strconv.Itoa(i)+"].name", "is taken"))
			default:
				// The store refuses only what the checks refuse already;
				// the other jobs are committed, so this one is reported
				// rather than failing the request.
				h.s.log.ErrorContext(ctx, "store refused a checked job", "method", c.Request().Method,
					"path", c.Request().URL.Path, "item", i, "err", err)
				items[i] = problemItem(internalProblem())
			}
		}
	}
	out := models.JobBatchResult{Items: items}
	for _, it := range items {
		if it.Status == http.StatusCreated {
			out.Created++
		} else {
			out.Failed++
		}
	}
	return c.JSON(http.StatusOK, out)
}

// buildBatch checks each job of a batch and builds the valid ones. items
// holds the results of the jobs refused (the others are left for the
// caller to fill in); built[k] is the job of items[index[k]]. A job whose
// name an earlier job of the batch has is refused here. The error is the
// database clock's: then the request fails.
func (h *endpoints) buildBatch(ctx context.Context, raws []json.RawMessage) (items []models.JobBatchItem, built []*model.Job, index []int, err error) {
	// One reading of the database clock serves every job's first run, as
	// if the jobs had been sent one by one in the same instant.
	var (
		now     time.Time
		nowErr  error
		nowRead bool
	)
	clock := func() (time.Time, error) {
		if !nowRead {
			now, nowErr = h.s.jobs.Now(ctx)
			nowRead = true
		}
		return now, nowErr
	}
	items = make([]models.JobBatchItem, len(raws))
	built = make([]*model.Job, 0, len(raws))
	index = make([]int, 0, len(raws))
	type name struct{ ns, name string }
	first := make(map[name]int, len(raws))
	for i, raw := range raws {
		field := "jobs[" + strconv.Itoa(i) + "]"
		j, errs, err := h.batchJob(raw, clock)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(errs) == 0 {
			// Its calendars exist and allow a run (a read per job that
			// names some).
			err := h.s.jobs.CheckCalendars(ctx, j)
			if errs = fieldErrorsOf(jobs.Faults(err)); err != nil && len(errs) == 0 {
				return nil, nil, nil, err
			}
		}
		if len(errs) > 0 {
			items[i] = problemItem(validationProblem(errs.under(field)...))
			continue
		}
		k := name{j.Namespace, j.Name}
		if f, dup := first[k]; dup {
			p := conflict(fmt.Sprintf("A job named %q in namespace %q comes earlier in this request (jobs[%d]).", j.Name, j.Namespace, f))
			items[i] = problemItem(withField(p, field+".name", fmt.Sprintf("is the name of jobs[%d]", f)))
			continue
		}
		first[k] = i
		built = append(built, j)
		index = append(index, i)
	}
	return items, built, index, nil
}

// batchJobs checks the batch body's own members and returns its jobs,
// unparsed.
func batchJobs(members map[string]json.RawMessage) ([]json.RawMessage, error) {
	var errs fieldErrors
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != "jobs" {
			errs.add(k, "unknown field")
		}
	}
	jobs := jobsMember(members, 1, &errs)
	return jobs, errs.err()
}

// jobsMember is the body's "jobs", an array of between min and
// MaxBatchJobs jobs, unparsed; what is wrong with it goes to errs.
func jobsMember(members map[string]json.RawMessage, min int, errs *fieldErrors) []json.RawMessage {
	var jobs []json.RawMessage
	raw, ok := members["jobs"]
	raw = bytes.TrimSpace(raw)
	switch {
	case !ok && min == 0:
		errs.add("jobs", "is required (an empty list for none)")
	case !ok:
		errs.add("jobs", "is required")
	case len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &jobs) != nil:
		errs.add("jobs", "must be an array of jobs")
	case len(jobs) < min:
		errs.add("jobs", "must hold at least one job")
	case len(jobs) > MaxBatchJobs:
		errs.add("jobs", "must hold at most %d jobs, not %d: send them in several requests", MaxBatchJobs, len(jobs))
	}
	return jobs
}

// batchJob checks one job of a batch as CreateJob checks a request body.
// Its faults name fields as CreateJob's do; the caller puts them under
// the job's place in the batch.
func (h *endpoints) batchJob(raw json.RawMessage, now func() (time.Time, error)) (*model.Job, fieldErrors, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fieldErrors{{Field: "", Message: "must be a JSON object"}}, nil
	}
	var req models.JobCreate
	shape, stopped := decodeChecked(raw, h.s.createSchema, &req)
	if stopped {
		return nil, shape, nil
	}
	nj, syntax := newJobOf(&req)
	if nj.Depends != nil {
		// Its upstreams are looked up and its edges checked for cycles one
		// job at a time.
		syntax.add("depends_on", "a job that depends on others is created alone, with POST /v1/jobs")
	}
	return h.newJob(nj, shape, syntax, now)
}

// under puts fe's fields under prefix: "name" becomes "jobs[3].name";
// the body itself (field "body" or "") becomes prefix.
func (fe fieldErrors) under(prefix string) fieldErrors {
	out := make(fieldErrors, len(fe))
	for i, e := range fe {
		switch e.Field {
		case "", "body":
			e.Field = prefix
		default:
			e.Field = prefix + "." + e.Field
		}
		out[i] = e
	}
	return out
}

// withField adds a field error to a problem, so that a batch item's
// conflict names the field as its validation problems do.
func withField(p *apiError, field, message string) *apiError {
	p.p.Errors = &[]models.FieldError{{Field: field, Message: message}}
	return p
}

// problemItem is the result of a job that was not created.
func problemItem(p *apiError) models.JobBatchItem {
	return models.JobBatchItem{Status: p.p.Status, Problem: &p.p}
}
