package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// fakeExecutors records cancellations and serves canned handler states.
type fakeExecutors struct {
	mu        sync.Mutex
	cancelled []uuid.UUID
	cancelErr error
	states    []wire.BreakerState
	consumers []wire.QueueConsumer
}

func (f *fakeExecutors) Cancel(_ context.Context, id uuid.UUID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancelErr != nil {
		return f.cancelErr
	}
	f.cancelled = append(f.cancelled, id)
	return nil
}

func (f *fakeExecutors) BreakerStates(context.Context) ([]wire.BreakerState, error) {
	return f.states, nil
}

func (f *fakeExecutors) QueueConsumers(context.Context) ([]wire.QueueConsumer, error) {
	return f.consumers, nil
}

func newControlEnv(t *testing.T, x Executors) *env {
	t.Helper()
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) {
		c.Executors = x
		c.DefaultRetry = domain.RetryPolicy{MaxAttempts: 3, InitialBackoff: "2s", Jitter: "equal"}
	})
	e.store = st
	return e
}

// runNow queues a manual execution of a new job named name.
func (e *env) runNow(name string) uuid.UUID {
	e.t.Helper()
	j := e.createJob(jobBody(name))
	now, err := e.store.Now(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, now)
	if err != nil {
		e.t.Fatal(err)
	}
	return x.ID
}

// finish records attempt 1 of id as ended with outcome.
func (e *env) finish(id uuid.UUID, outcome domain.EventType, final bool) {
	e.t.Helper()
	res, err := e.store.RecordAttemptEvents(e.ctx, []model.AttemptEvent{{
		ID: id, Attempt: 1, Executor: "exec-a", At: time.Now(), Type: outcome, Final: final, Error: "boom",
	}})
	if err != nil || res[0] != nil {
		e.t.Fatalf("record %s: %v %v", outcome, err, res)
	}
}

func TestCancelExecution(t *testing.T) {
	t.Parallel()
	x := &fakeExecutors{}
	e := newControlEnv(t, x)

	queued := e.runNow("to-cancel")
	r := e.do("POST", "/v1/executions/"+queued.String()+"/cancel", nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Execution
	r.decode(t, &got)
	if got.State != models.ExecutionStateCancelled || got.FinishedAt == nil {
		t.Errorf("cancelled execution: %s", r.body)
	}
	// Idempotent: a second cancel answers the same and tells executors
	// again (the first announcement may have been lost).
	mustStatus(t, e.do("POST", "/v1/executions/"+queued.String()+"/cancel", nil), http.StatusOK)
	if len(x.cancelled) != 2 || x.cancelled[0] != queued {
		t.Errorf("executors told of %v, want %s twice", x.cancelled, queued)
	}
	// Gone from the outbox: it is never published.
	undispatched, err := e.store.ListUndispatchedExecutions(e.ctx, allBuckets(16), 100, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range undispatched {
		if u.ID == queued {
			t.Error("a cancelled execution is still in the outbox")
		}
	}

	done := e.runNow("done")
	e.finish(done, domain.EventSucceeded, false)
	r = e.do("POST", "/v1/executions/"+done.String()+"/cancel", nil)
	mustStatus(t, r, http.StatusConflict)
	r.problem(t)

	mustStatus(t, e.do("POST", "/v1/executions/"+uuid.NewString()+"/cancel", nil), http.StatusNotFound)
	r = e.do("POST", "/v1/executions/nope/cancel", nil)
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "id") {
		t.Errorf("bad id: %s", fieldsOf(p))
	}

	// NATS down: the cancellation is recorded, the client is told to
	// repeat.
	x.cancelErr = errors.New("nats: timeout")
	other := e.runNow("nats-down")
	r = e.do("POST", "/v1/executions/"+other.String()+"/cancel", nil)
	mustStatus(t, r, http.StatusServiceUnavailable)
	r.problem(t)
	if ex, err := e.store.GetExecution(e.ctx, other); err != nil || ex.State != domain.ExecCancelled {
		t.Errorf("after a 503: %v %v", ex, err)
	}
}

func TestControlWithoutNATS(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, nil)
	id := e.runNow("no-nats")
	mustStatus(t, e.do("POST", "/v1/executions/"+id.String()+"/cancel", nil), http.StatusServiceUnavailable)
	mustStatus(t, e.do("GET", "/v1/handlers", nil), http.StatusServiceUnavailable)
	if ex, err := e.store.GetExecution(e.ctx, id); err != nil || ex.State != domain.ExecQueued {
		t.Errorf("a refused cancel changed the execution: %v %v", ex, err)
	}
}

func TestDeadLettersAndRedrive(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, &fakeExecutors{})
	dead1, dead2, alive := e.runNow("dead-1"), e.runNow("dead-2"), e.runNow("alive")
	e.finish(dead1, domain.EventFailed, true)
	e.finish(dead2, domain.EventFailed, true)
	e.finish(alive, domain.EventSucceeded, false)

	r := e.do("GET", "/v1/executions?state=dead", nil)
	mustStatus(t, r, http.StatusOK)
	var list models.ExecutionList
	r.decode(t, &list)
	if len(list.Items) != 2 {
		t.Fatalf("dead letters: %s", r.body)
	}
	for _, it := range list.Items {
		if it.State != models.ExecutionStateDead || (it.Id != dead1 && it.Id != dead2) {
			t.Errorf("dead letter %+v", it)
		}
	}
	r = e.do("GET", "/v1/executions?state=buried", nil)
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "state") {
		t.Errorf("bad state: %s", fieldsOf(p))
	}

	r = e.do("POST", "/v1/executions/"+dead1.String()+"/retry", nil)
	mustStatus(t, r, http.StatusAccepted)
	var got models.Execution
	r.decode(t, &got)
	if got.State != models.ExecutionStateQueued || got.Attempts != 1 || got.FinishedAt != nil {
		t.Errorf("re-driven: %s", r.body)
	}
	// Back in the outbox, due now, for a fresh series after attempt 1.
	undispatched, err := e.store.ListUndispatchedExecutions(e.ctx, allBuckets(16), 100, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range undispatched {
		if u.ID == dead1 {
			found = true
			if w := dispatcher.Wire(u); w.AttemptBase != 1 || w.SeriesBase != 1 || w.Dispatch != 1 {
				t.Errorf("re-driven message: base %d series %d dispatch %d", w.AttemptBase, w.SeriesBase, w.Dispatch)
			}
		}
	}
	if !found {
		t.Error("a re-driven execution is not in the outbox")
	}
	if l := e.do("GET", "/v1/executions?state=dead", nil); !containsOnly(t, l, dead2) {
		t.Errorf("dead letters after the re-drive: %s", l.body)
	}
	mustStatus(t, e.do("POST", "/v1/executions/"+alive.String()+"/retry", nil), http.StatusConflict)
	mustStatus(t, e.do("POST", "/v1/executions/"+uuid.NewString()+"/retry", nil), http.StatusNotFound)
}

// containsOnly reports whether the execution list in r holds only id.
func containsOnly(t *testing.T, r resp, id uuid.UUID) bool {
	t.Helper()
	var list models.ExecutionList
	r.decode(t, &list)
	return len(list.Items) == 1 && list.Items[0].Id == id
}

func allBuckets(n int) []int {
	b := make([]int, n)
	for i := range b {
		b[i] = i
	}
	return b
}

func TestListHandlers(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	x := &fakeExecutors{states: []wire.BreakerState{
		{Key: "http:api.example.com", Queue: "http", ExecutorID: "b", Breaker: wire.BreakerClosed, Since: now, UpdatedAt: now},
		{Key: "http:api.example.com", Queue: "http", ExecutorID: "a", Breaker: wire.BreakerOpen, Since: now,
			Requests: 12, Failures: 9, UpdatedAt: now},
		{Key: "send-email", Queue: "send-email", ExecutorID: "a", Breaker: wire.BreakerHalfOpen, Since: now,
			InFlight: 2, Limit: 4, UpdatedAt: now},
	}}
	e := newControlEnv(t, x)
	r := e.do("GET", "/v1/handlers", nil)
	mustStatus(t, r, http.StatusOK)
	var got models.HandlerList
	r.decode(t, &got)
	if len(got.Items) != 2 {
		t.Fatalf("handlers: %s", r.body)
	}
	api, mail := got.Items[0], got.Items[1]
	if api.Handler != "http:api.example.com" || api.Breaker != models.BreakerStateOpen || len(api.Executors) != 2 ||
		api.Executors[0].ExecutorId != "a" || api.Executors[0].Failures != 9 {
		t.Errorf("http handler: %+v", api)
	}
	if mail.Breaker != models.BreakerStateHalfOpen || mail.Executors[0].Limit == nil || *mail.Executors[0].Limit != 4 {
		t.Errorf("custom handler: %+v", mail)
	}

	// What the nodes recorded: a handler no executor serves now, with
	// when one last did, and a breaker's transitions, newest first.
	opened, closed := now.Add(-time.Hour), now.Add(-50*time.Minute)
	if err := e.store.SaveHandlerStates(e.ctx, []model.BreakerChange{
		{Handler: "reports", Queue: "reports", ExecutorID: "x", State: wire.BreakerOpen, Since: opened, Reason: "5 of 5 attempts failed within 1m0s"},
	}, []model.HandlerSeen{{Handler: "reports", Queue: "reports", LastSeen: now.Add(-2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SaveHandlerStates(e.ctx, []model.BreakerChange{
		{Handler: "reports", Queue: "reports", ExecutorID: "x", State: wire.BreakerClosed, Since: closed, Reason: "the probe attempts succeeded"},
		{Handler: "reports", Queue: "reports", ExecutorID: "x", State: wire.BreakerClosed, Since: closed, Reason: "the probe attempts succeeded"},
	}, []model.HandlerSeen{{Handler: "reports", Queue: "reports", LastSeen: now.Add(-45 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	// Another node's sight 10 s later moves nothing (20 s apart at least).
	if err := e.store.SaveHandlerStates(e.ctx, nil,
		[]model.HandlerSeen{{Handler: "reports", Queue: "reports", LastSeen: now.Add(-45*time.Minute + 10*time.Second)}}); err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", "/v1/handlers", nil)
	mustStatus(t, r, http.StatusOK)
	got = models.HandlerList{}
	r.decode(t, &got)
	if len(got.Items) != 3 || got.Items[1].Handler != "reports" {
		t.Fatalf("handlers: %s", r.body)
	}
	rep := got.Items[1]
	if len(rep.Executors) != 0 || rep.LastSeen == nil || !rep.LastSeen.Equal(now.Add(-45*time.Minute).Truncate(time.Microsecond)) {
		t.Errorf("a handler no executor serves now: %+v", rep)
	}
	if len(rep.History) != 2 || rep.History[0].Breaker != models.BreakerStateClosed || rep.History[1].Breaker != models.BreakerStateOpen ||
		rep.History[1].Reason != "5 of 5 attempts failed within 1m0s" {
		t.Errorf("breaker history: %+v", rep.History)
	}
}

// An execution due on a handler whose breaker is open on every executor
// says so, with since when and the next probe; one on a queue no
// executor ever served says that; one not due yet says when it is.
func TestExecutionsSayWhyTheyWait(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	probe := now.Add(30 * time.Second)
	x := &fakeExecutors{
		states: []wire.BreakerState{{Key: "broken", Queue: "broken", ExecutorID: "a", Breaker: wire.BreakerOpen,
			Since: now.Add(-time.Minute), Reason: "5 of 5 attempts failed within 1m0s", ProbeAt: &probe, UpdatedAt: now}},
		consumers: []wire.QueueConsumer{{Queue: "broken", Priority: domain.PriorityNormal}},
	}
	e := newControlEnv(t, x)
	wait := func(handler string, at time.Time) *models.ExecutionWait {
		t.Helper()
		body := jobBody(handler)
		body["handler"] = map[string]any{"type": "custom", "name": handler}
		j := e.createJob(body)
		xe, err := e.store.CreateManualExecution(e.ctx, j.Id, at)
		if err != nil {
			t.Fatal(err)
		}
		r := e.do("GET", "/v1/executions/"+xe.ID.String(), nil)
		mustStatus(t, r, http.StatusOK)
		var got models.Execution
		r.decode(t, &got)
		// The job's list says the same.
		r = e.do("GET", "/v1/jobs/"+j.Id.String()+"/executions", nil)
		var list models.ExecutionList
		r.decode(t, &list)
		if len(list.Items) != 1 || list.Items[0].Wait == nil || got.Wait == nil || list.Items[0].Wait.Message != got.Wait.Message {
			t.Errorf("%s: the list's wait %+v, the execution's %+v", handler, list.Items, got.Wait)
		}
		return got.Wait
	}
	w := wait("broken", now.Add(-time.Second))
	if w == nil || w.Reason != models.ExecutionWaitReasonBreakerOpen || w.Until == nil || !w.Until.Equal(probe) ||
		!strings.Contains(w.Message, "circuit breaker of broken is open on every executor serving it (1)") ||
		!strings.Contains(w.Message, "5 of 5 attempts failed") {
		t.Errorf("breaker open: %+v", w)
	}
	w = wait("nobody", now.Add(-time.Second))
	if w == nil || w.Reason != models.ExecutionWaitReasonNoExecutor || !strings.Contains(w.Message, "no executor has ever served the queue nobody") {
		t.Errorf("no executor: %+v", w)
	}
	later := now.Add(time.Hour)
	w = wait("later", later)
	if w == nil || w.Reason != models.ExecutionWaitReasonScheduled || w.Until == nil || !w.Until.Equal(later.Truncate(time.Millisecond)) {
		t.Errorf("not due: %+v", w)
	}
}

func TestPriorityAndRetryDefaults(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, &fakeExecutors{})
	j := e.createJob(jobBody("plain"))
	if j.Priority == nil || *j.Priority != models.PriorityNormal {
		t.Errorf("default priority: %v", j.Priority)
	}
	// The cluster's policy fills what the job leaves out.
	if j.Retry == nil || deref(j.Retry.MaxAttempts) != 3 || deref(j.Retry.InitialBackoff) != "2s" ||
		deref(j.Retry.Jitter) != models.RetryPolicyJitterEqual {
		t.Errorf("default retry: %+v", j.Retry)
	}
	body := jobBody("urgent")
	body["priority"] = "high"
	body["retry"] = map[string]any{"max_attempts": 5}
	u := e.createJob(body)
	if deref(u.Priority) != models.PriorityHigh || deref(u.Retry.MaxAttempts) != 5 || deref(u.Retry.InitialBackoff) != "2s" {
		t.Errorf("urgent job: priority %v retry %+v", u.Priority, u.Retry)
	}
	// A run inherits the job's priority.
	now, err := e.store.Now(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.store.CreateManualExecution(e.ctx, u.Id, now)
	if err != nil {
		t.Fatal(err)
	}
	if x.Priority != domain.PriorityHigh {
		t.Errorf("execution priority %q", x.Priority)
	}

	r := e.do("PATCH", "/v1/jobs/"+u.Id.String(), map[string]any{"priority": "low"})
	mustStatus(t, r, http.StatusOK)
	var patched models.Job
	r.decode(t, &patched)
	if deref(patched.Priority) != models.PriorityLow {
		t.Errorf("patched priority %v", patched.Priority)
	}

	bad := jobBody("bad")
	bad["priority"] = "urgent"
	r = e.do("POST", "/v1/jobs", bad)
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "priority") {
		t.Errorf("bad priority: %s", fieldsOf(p))
	}
}
