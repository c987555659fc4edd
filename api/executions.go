package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// Executors is how the API reaches executors over NATS: it tells them of a
// cancellation and reads what they report about handlers.
// JetStreamExecutors is the real one.
type Executors interface {
	Cancel(ctx context.Context, executionID uuid.UUID) error
	BreakerStates(ctx context.Context) ([]wire.BreakerState, error)
	QueueConsumers(ctx context.Context) ([]wire.QueueConsumer, error)
}

// JetStreamExecutors reaches executors through tock's JetStream key-value
// buckets (wire.CancelBucket, wire.BreakerBucket).
type JetStreamExecutors struct{ JS jetstream.JetStream }

// Cancel puts the execution in wire.CancelBucket, which executors watch.
func (x JetStreamExecutors) Cancel(ctx context.Context, id uuid.UUID) error {
	return wire.CancelExecution(ctx, x.JS, id.String())
}

// BreakerStates reads wire.BreakerBucket.
func (x JetStreamExecutors) BreakerStates(ctx context.Context) ([]wire.BreakerState, error) {
	return wire.BreakerStates(ctx, x.JS)
}

// QueueConsumers lists the executors' consumers of wire.ExecStream.
func (x JetStreamExecutors) QueueConsumers(ctx context.Context) ([]wire.QueueConsumer, error) {
	return wire.ListQueueConsumers(ctx, x.JS)
}

// noExecutors answers the endpoints that need NATS on a server built
// without it.
func noExecutors() *apiError {
	return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Executors unreachable",
		"this node has no NATS connection (run it with --nats-url)")
}

// ListExecutions handles GET /v1/executions: the execution search, such
// as the dead letters (state=dead) or stuck work (state=running,
// started_before=1h).
func (h *endpoints) ListExecutions(c echo.Context, p models.ListExecutionsParams) error {
	ctx := c.Request().Context()
	ns, err := h.s.listNamespace(c, "listExecutions", deref(p.Namespace))
	if err != nil {
		return err
	}
	var errs fieldErrors
	f := store.ExecFilter{Cursor: deref(p.Cursor), Limit: limitOf(p.Limit, &errs), JobID: p.JobId,
		Namespace: ns, JobPrefix: deref(p.Job), Handler: deref(p.Handler), Error: deref(p.Error),
		Manual: p.Manual, Backfill: p.Backfill}
	if p.State != nil {
		for _, st := range *p.State {
			// An empty one (state=, state=dead,) selects nothing more,
			// as an absent state selects everything.
			if s := stateFilter(&st, &errs); s != "" {
				f.States = append(f.States, s)
			}
		}
	}
	searchTextChecks(p, &errs)
	if p.Since != nil || p.Until != nil || p.StartedBefore != nil {
		now, err := h.s.jobs.Now(ctx)
		if err != nil {
			return h.internal(c, err)
		}
		f.Since = timeParam("since", p.Since, now, &errs)
		f.Until = timeParam("until", p.Until, now, &errs)
		f.StartedBefore = timeParam("started_before", p.StartedBefore, now, &errs)
	}
	if err := errs.err(); err != nil {
		return err
	}
	execs, next, err := h.s.store.ListExecutions(ctx, f)
	if err != nil {
		return h.storeError(c, err, "execution", uuid.Nil)
	}
	out := executionListOf(execs, next)
	h.explainWaits(ctx, execs, out.Items)
	if deref(p.Count) {
		n, err := h.s.store.CountExecutions(ctx, f)
		if err != nil {
			return h.storeError(c, err, "execution", uuid.Nil)
		}
		out.Total = &n
	}
	return c.JSON(http.StatusOK, out)
}

// searchTextChecks refuses text filters no execution can match, before
// they reach Postgres (which refuses a NUL): a namespace or job name
// prefix that no name could hold, an error text with a NUL or invalid
// UTF-8.
func searchTextChecks(p models.ListExecutionsParams, errs *fieldErrors) {
	if ns := deref(p.Namespace); ns != "" {
		if msg := jobs.NameProblem(ns); msg != "" {
			errs.add("namespace", "%s", msg)
		}
	}
	if j := deref(p.Job); j != "" {
		if msg := jobs.NameProblem(j); msg != "" {
			errs.add("job", "%s", msg)
		}
	}
	for name, v := range map[string]string{"handler": deref(p.Handler), "error": deref(p.Error)} {
		if strings.ContainsRune(v, 0) || !utf8.ValidString(v) || len(v) > 1000 {
			errs.add(name, "must be valid UTF-8 text of at most 1000 bytes, without NUL")
		}
	}
}

// timeParam reads an optional time parameter: RFC 3339, or a positive Go
// duration meaning that long before now.
func timeParam(name string, v *string, now time.Time, errs *fieldErrors) *time.Time {
	if v == nil || *v == "" {
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, *v); err == nil {
		return &t
	}
	if d, err := time.ParseDuration(*v); err == nil && d > 0 {
		t := now.Add(-d)
		return &t
	}
	errs.add(name, "must be an RFC 3339 time (2026-11-23T09:00:00Z) or a duration before now (24h)")
	return nil
}

// stateFilter checks an optional state parameter.
func stateFilter(st *models.ExecutionState, errs *fieldErrors) domain.ExecState {
	if st == nil || *st == "" {
		return ""
	}
	if !st.Valid() {
		errs.add("state", "must be one of queued, running, succeeded, failed, cancelled, dead")
	}
	return domain.ExecState(*st)
}

func executionListOf(execs []*model.Execution, next string) models.ExecutionList {
	out := models.ExecutionList{Items: make([]models.Execution, 0, len(execs)), NextCursor: nonEmpty(next)}
	for _, e := range execs {
		out.Items = append(out.Items, executionOf(e, false))
	}
	return out
}

// CancelExecution handles POST /v1/executions/{id}/cancel. The
// cancellation is recorded in Postgres first, then announced to executors
// (jobs.Service.Cancel); if that fails the answer is 503 and the client
// repeats the request, which is idempotent.
func (h *endpoints) CancelExecution(c echo.Context, id models.ID) error {
	ctx := c.Request().Context()
	e, err := h.s.jobs.Cancel(ctx, id)
	switch {
	case errors.Is(err, jobs.ErrNoExecutors):
		return noExecutors()
	case errors.Is(err, store.ErrFinished):
		return conflict(fmt.Sprintf("Execution %s has finished; only a queued, running or failed execution can be cancelled.", id))
	case errors.Is(err, jobs.ErrNotAnnounced):
		h.s.log.WarnContext(ctx, "announce cancellation to executors", "execution_id", id.String(), "err", err)
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Executors not told",
			"The execution is recorded as cancelled, but executors could not be told over NATS; repeat the request.")
	case err != nil:
		return h.storeError(c, err, "execution", id)
	}
	h.s.executionChanged(e)
	return c.JSON(http.StatusOK, executionOf(e, false))
}

// RetryExecution handles POST /v1/executions/{id}/retry: a dead execution
// is queued again for a fresh series of attempts.
func (h *endpoints) RetryExecution(c echo.Context, id models.ID) error {
	e, err := h.s.jobs.Redrive(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotDead) {
		return conflict(fmt.Sprintf("Execution %s is not dead; only a dead execution can be re-driven.", id))
	}
	if err != nil {
		return h.storeError(c, err, "execution", id)
	}
	h.s.executionChanged(e)
	c.Response().Header().Set(echo.HeaderLocation, "/v1/executions/"+e.ID.String())
	return c.JSON(http.StatusAccepted, executionOf(e, false))
}

// ListHandlers handles GET /v1/handlers: the executors' reports, grouped
// by handler, beside every handler seen before and its breakers' history.
func (h *endpoints) ListHandlers(c echo.Context) error {
	if h.s.executors == nil {
		return noExecutors()
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), h.s.clusterWait)
	defer cancel()
	states, err := h.s.executors.BreakerStates(ctx)
	if err != nil {
		h.s.log.WarnContext(ctx, "read handler states", "err", err)
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Handler states unavailable",
			"NATS did not answer; try again shortly.")
	}
	seen, err := h.s.store.ListHandlersSeen(ctx)
	if err != nil {
		return h.storeError(c, err, "handler", uuid.Nil)
	}
	history, err := h.s.store.ListBreakerHistory(ctx, nil, handlerHistory)
	if err != nil {
		return h.storeError(c, err, "handler", uuid.Nil)
	}
	return c.JSON(http.StatusOK, models.HandlerList{Items: handlersOf(states, seen, history)})
}

// handlerHistory is how many breaker transitions GET /v1/handlers shows
// per handler.
const handlerHistory = 20

// breakerRank orders breaker states from best to worst.
var breakerRank = map[string]int{wire.BreakerClosed: 0, wire.BreakerHalfOpen: 1, wire.BreakerOpen: 2}

// handlersOf groups executors' reports by handler, with the handlers
// seen before and the breakers' history, in handler order; a handler's
// breaker is its worst executor's.
func handlersOf(states []wire.BreakerState, seen []model.HandlerSeen, history []model.BreakerChange) []models.HandlerInfo {
	byName := map[string]*models.HandlerInfo{}
	get := func(key, queue string) *models.HandlerInfo {
		hi := byName[key]
		if hi == nil {
			hi = &models.HandlerInfo{Handler: key, Queue: queue, Breaker: models.BreakerStateClosed, Executors: []models.HandlerExecutor{},
				History: []models.BreakerChange{}}
			byName[key] = hi
		}
		return hi
	}
	for _, s := range seen {
		get(s.Handler, s.Queue).LastSeen = ptr(s.LastSeen.UTC())
	}
	for _, c := range history {
		hi := get(c.Handler, c.Queue)
		hi.History = append(hi.History, models.BreakerChange{ExecutorId: c.ExecutorID, Breaker: models.BreakerState(c.State),
			Since: c.Since.UTC(), Reason: c.Reason})
	}
	for _, s := range states {
		hi := get(s.Key, s.Queue)
		if breakerRank[s.Breaker] > breakerRank[string(hi.Breaker)] {
			hi.Breaker = models.BreakerState(s.Breaker)
		}
		if hi.LastSeen == nil || s.UpdatedAt.After(*hi.LastSeen) {
			hi.LastSeen = ptr(s.UpdatedAt.UTC())
		}
		x := models.HandlerExecutor{
			ExecutorId: s.ExecutorID,
			Breaker:    models.BreakerState(s.Breaker),
			Since:      s.Since.UTC(),
			Requests:   int64(s.Requests),
			Failures:   int64(s.Failures),
			InFlight:   s.InFlight,
			UpdatedAt:  s.UpdatedAt.UTC(),
			Reason:     nonEmpty(s.Reason),
			ProbeAt:    utc(s.ProbeAt),
			Version:    nonEmpty(s.Version),
		}
		if s.Limit > 0 {
			x.Limit = ptr(s.Limit)
		}
		hi.Executors = append(hi.Executors, x)
	}
	out := make([]models.HandlerInfo, 0, len(byName))
	for _, hi := range byName {
		slices.SortFunc(hi.Executors, func(a, b models.HandlerExecutor) int { return cmp.Compare(a.ExecutorId, b.ExecutorId) })
		out = append(out, *hi)
	}
	slices.SortFunc(out, func(a, b models.HandlerInfo) int { return cmp.Compare(a.Handler, b.Handler) })
	return out
}
