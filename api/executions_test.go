package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

func TestRunJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("run-me"))
	before := time.Now().Add(-time.Second)

	r := e.do("POST", "/v1/jobs/"+j.Id.String()+"/run", nil)
	mustStatus(t, r, http.StatusAccepted)
	var x models.Execution
	r.decode(t, &x)
	if x.JobId != j.Id || x.JobName != "run-me" || x.Namespace != "default" || !x.Manual ||
		x.State != models.ExecutionStateQueued || x.Attempts != 0 || x.ScheduledFor.Before(before) ||
		x.DispatchedAt != nil || x.AttemptList != nil {
		t.Errorf("execution %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/executions/"+x.Id.String() {
		t.Errorf("Location %q", loc)
	}
	// The job's schedule is untouched.
	if g := e.getJob(j.Id); !g.NextRunAt.Equal(*j.NextRunAt) || g.State != models.JobStateActive {
		t.Errorf("job after run: %+v", g)
	}

	// Visible by id, with its (empty) attempt list.
	r = e.do("GET", "/v1/executions/"+x.Id.String(), nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Execution
	r.decode(t, &got)
	if got.Id != x.Id || !got.Manual || got.AttemptList == nil || len(*got.AttemptList) != 0 {
		t.Errorf("GET execution: %s", r.body)
	}
	if !strings.Contains(string(r.body), `"attempt_list":[]`) {
		t.Errorf("attempt_list is not an empty array: %s", r.body)
	}

	// A paused job can still be run by hand.
	mustStatus(t, e.do("POST", "/v1/jobs/"+j.Id.String()+"/pause", nil), http.StatusOK)
	mustStatus(t, e.do("POST", "/v1/jobs/"+j.Id.String()+"/run", nil), http.StatusAccepted)
}

func TestExecutionWithAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("attempted"))
	now, err := e.store.Now(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, now)
	if err != nil {
		t.Fatal(err)
	}
	t1 := now.Add(time.Second)
	for _, ev := range []model.AttemptEvent{
		{ID: x.ID, Attempt: 1, Executor: "exec-a", At: t1, Type: domain.EventStarted},
		{ID: x.ID, Attempt: 1, Executor: "exec-a", At: t1.Add(time.Second), Type: domain.EventFailed, Error: "HTTP 503"},
		{ID: x.ID, Attempt: 2, Executor: "exec-b", At: t1.Add(3 * time.Second), Type: domain.EventStarted},
		{ID: x.ID, Attempt: 2, Executor: "exec-b", At: t1.Add(4 * time.Second), Type: domain.EventSucceeded, Output: "ok"},
	} {
		storetest.Record(t, e.store, ev)
	}
	r := e.do("GET", "/v1/executions/"+x.ID.String(), nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Execution
	r.decode(t, &got)
	if got.State != models.ExecutionStateSucceeded || got.Attempts != 2 || got.StartedAt == nil || got.FinishedAt == nil {
		t.Errorf("execution %s", r.body)
	}
	if got.AttemptList == nil || len(*got.AttemptList) != 2 {
		t.Fatalf("attempt_list: %s", r.body)
	}
	a1, a2 := (*got.AttemptList)[0], (*got.AttemptList)[1]
	if a1.Number != 1 || deref(a1.ExecutorId) != "exec-a" || deref(a1.Outcome) != "failed" || deref(a1.Error) != "HTTP 503" ||
		a1.FinishedAt == nil || a1.StartedAt == nil || !a1.StartedAt.Equal(t1.Truncate(time.Millisecond)) {
		t.Errorf("attempt 1: %+v", a1)
	}
	if a2.Number != 2 || deref(a2.Outcome) != "succeeded" || deref(a2.Output) != "ok" {
		t.Errorf("attempt 2: %+v", a2)
	}
	if a1.StartedAt != nil && a1.StartedAt.Location() != time.UTC {
		t.Errorf("started_at not in UTC: %v", a1.StartedAt)
	}
}

func TestListExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("busy"))
	quiet := e.createJob(jobBody("quiet"))
	now, err := e.store.Now(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Seven executions a second apart, inserted oldest first, plus one
	// scheduled (not manual) firing of another job.
	var ids []uuid.UUID
	for i := range 7 {
		x, err := e.store.CreateManualExecution(e.ctx, j.Id, now.Add(time.Duration(i-10)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
	}
	storetest.Record(t, e.store, model.AttemptEvent{ID: ids[2], Attempt: 1, Executor: "exec-a", At: now, Type: domain.EventStarted})
	other := e.createJob(map[string]any{"name": "fired", "handler": map[string]any{"type": "custom", "name": "c"}})
	e.complete(other.Id)

	// Newest first, over pages of three.
	var got []uuid.UUID
	cursor, pages := "", 0
	for {
		q := "/v1/jobs/" + j.Id.String() + "/executions?limit=3"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := e.do("GET", q, nil)
		mustStatus(t, r, http.StatusOK)
		var page models.ExecutionList
		r.decode(t, &page)
		pages++
		for _, x := range page.Items {
			if x.JobId != j.Id || x.AttemptList != nil {
				t.Errorf("item %+v", x)
			}
			got = append(got, x.Id)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if pages != 3 || len(got) != 7 {
		t.Fatalf("%d pages, %d executions", pages, len(got))
	}
	for i, id := range got {
		if want := ids[len(ids)-1-i]; id != want {
			t.Errorf("position %d: %s, want %s (newest first)", i, id, want)
		}
	}

	list := func(path string) models.ExecutionList {
		t.Helper()
		r := e.do("GET", path, nil)
		mustStatus(t, r, http.StatusOK)
		var page models.ExecutionList
		r.decode(t, &page)
		return page
	}
	if l := list("/v1/jobs/" + j.Id.String() + "/executions?state=running"); len(l.Items) != 1 || l.Items[0].Id != ids[2] {
		t.Errorf("running: %+v", l.Items)
	}
	if l := list("/v1/jobs/" + j.Id.String() + "/executions?state=queued"); len(l.Items) != 6 {
		t.Errorf("queued: %d", len(l.Items))
	}
	if l := list("/v1/jobs/" + j.Id.String() + "/executions?state=dead"); len(l.Items) != 0 {
		t.Errorf("dead: %+v", l.Items)
	}
	// A job without executions has an empty list, not a 404.
	if l := list("/v1/jobs/" + quiet.Id.String() + "/executions"); len(l.Items) != 0 || l.NextCursor != nil {
		t.Errorf("quiet job: %+v", l)
	}
	// A scheduled firing shows up as not manual.
	if l := list("/v1/jobs/" + other.Id.String() + "/executions"); len(l.Items) != 1 || l.Items[0].Manual {
		t.Errorf("fired job: %+v", l.Items)
	}
	// A deleted job's executions stay listable.
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+j.Id.String(), nil), http.StatusNoContent)
	if l := list("/v1/jobs/" + j.Id.String() + "/executions"); len(l.Items) != 7 {
		t.Errorf("after delete: %d executions", len(l.Items))
	}
	mustStatus(t, e.do("GET", "/v1/executions/"+ids[0].String(), nil), http.StatusOK)

	for _, tc := range []struct{ query, field string }{
		{"state=sleeping", "state"},
		{"limit=0", "limit"},
		{"limit=1000", "limit"},
		{"limit=x", "limit"},
		{"cursor=nope", "cursor"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.do("GET", "/v1/jobs/"+quiet.Id.String()+"/executions?"+tc.query, nil)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, tc.field) {
				t.Errorf("errors do not name %s: %s", tc.field, fieldsOf(p))
			}
		})
	}
}

func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		r := e.do("GET", p, nil)
		mustStatus(t, r, http.StatusOK)
		if !strings.Contains(string(r.body), `"ok"`) {
			t.Errorf("%s: %s", p, r.body)
		}
	}
	e.do("GET", "/v1/jobs/"+uuid.NewString(), nil)
	e.do("GET", "/no/such/thing", nil)
	r := e.do("GET", "/metrics", nil)
	mustStatus(t, r, http.StatusOK)
	body := string(r.body)
	for _, want := range []string{
		`tock_http_request_duration_seconds_count{method="GET",route="/readyz",status="200"} 1`,
		`tock_http_request_duration_seconds_count{method="GET",route="/v1/jobs/:id",status="404"} 1`,
		`tock_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestReadyzWhenDatabaseIsDown(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, brokenStore{})
	mustStatus(t, e.do("GET", "/healthz", nil), http.StatusOK)
	r := e.do("GET", "/readyz", nil)
	mustStatus(t, r, http.StatusServiceUnavailable)
	if p := r.problem(t); p.Type != ProblemUnavailable {
		t.Errorf("type %q", p.Type)
	}
}

// brokenStore fails every call the way a lost database does, with
// internals in the message that must not reach clients.
type brokenStore struct{ Store }

var errSecret = errors.New("dial tcp 10.1.2.3:5432: password authentication failed for user \"tock\"")

func (brokenStore) Now(context.Context) (time.Time, error) { return time.Time{}, errSecret }
func (brokenStore) GetJob(context.Context, uuid.UUID) (*model.Job, error) {
	return nil, errSecret
}
func (brokenStore) ListJobs(context.Context, store.JobFilter) ([]*model.Job, string, error) {
	return nil, "", errSecret
}
func (brokenStore) DeleteJob(context.Context, uuid.UUID) (string, error) { return "", errSecret }

// panickyStore panics, as a bug would.
type panickyStore struct{ Store }

func (panickyStore) GetJob(context.Context, uuid.UUID) (*model.Job, error) { panic("boom") }

func TestStoreFailuresAreOpaque500s(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, brokenStore{})
	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/jobs"},
		{"GET", "/v1/jobs/" + uuid.NewString()},
		{"DELETE", "/v1/jobs/" + uuid.NewString()},
		{"POST", "/v1/jobs/" + uuid.NewString() + "/run"},
	} {
		r := e.do(rq.method, rq.path, nil)
		mustStatus(t, r, http.StatusInternalServerError)
		p := r.problem(t)
		if p.Type != ProblemInternal || strings.Contains(string(r.body), "password") || strings.Contains(string(r.body), "10.1.2.3") {
			t.Errorf("%s %s: %s", rq.method, rq.path, r.body)
		}
	}
	r := e.do("POST", "/v1/jobs", jobBody("x"))
	mustStatus(t, r, http.StatusInternalServerError)
	if !strings.Contains(e.logs.String(), "password authentication failed") {
		t.Errorf("the failure was not logged: %s", e.logs.String())
	}
}

func TestPanicIsA500(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, panickyStore{})
	r := e.do("GET", "/v1/jobs/"+uuid.NewString(), nil)
	mustStatus(t, r, http.StatusInternalServerError)
	if p := r.problem(t); p.Type != ProblemInternal || strings.Contains(string(r.body), "boom") {
		t.Errorf("%s", r.body)
	}
	if !strings.Contains(e.logs.String(), "boom") {
		t.Error("the panic was not logged")
	}
	// The server still serves.
	mustStatus(t, e.do("GET", "/healthz", nil), http.StatusOK)
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, struct{ Store }{})
	r := e.do("GET", "/v1/nothing-here", nil)
	mustStatus(t, r, http.StatusNotFound)
	if p := r.problem(t); p.Type != ProblemNotFound {
		t.Errorf("type %q", p.Type)
	}
	r = e.do("PUT", "/v1/jobs", `{}`)
	mustStatus(t, r, http.StatusMethodNotAllowed)
	if p := r.problem(t); p.Type != ProblemMethodNotAllowed {
		t.Errorf("type %q", p.Type)
	}
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "POST") || !strings.Contains(allow, "GET") {
		t.Errorf("Allow %q", allow)
	}
	r = e.do("DELETE", "/v1/jobs/"+uuid.NewString()+"/run", nil)
	mustStatus(t, r, http.StatusMethodNotAllowed)
}

func TestNewRejectsNilStore(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted a Config without a Store")
	}
}
