package api

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// TestPostgresDownAnswers503: while Postgres is unreachable (down, or a
// failover in progress), reads and writes answer 503 problem+json with
// Retry-After, which clients and load balancers retry, not a 500; once it
// is back, the same requests succeed.
func TestPostgresDownAnswers503(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	pg := testenv.NewProxy(t, u.Host, true)
	u.Host = pg.Addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Init(ctx, 16); err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, st)
	job := e.createJob(jobBody("before"))

	pg.SetUp(false)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/jobs", nil},
		{http.MethodGet, "/v1/jobs/" + job.Id.String(), nil},
		{http.MethodPost, "/v1/jobs", jobBody("during")},
		{http.MethodGet, "/v1/executions/" + uuid.NewString(), nil},
		{http.MethodPost, "/v1/jobs/" + job.Id.String() + "/pause", nil},
	} {
		r := e.do(req.method, req.path, req.body)
		if r.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s with Postgres down: %d %s, want 503", req.method, req.path, r.status, r.body)
			continue
		}
		if p := r.problem(t); p.Type != ProblemUnavailable {
			t.Errorf("%s %s with Postgres down: problem type %q, want %q", req.method, req.path, p.Type, ProblemUnavailable)
		}
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Errorf("%s %s with Postgres down: Retry-After %q, want 1", req.method, req.path, got)
		}
	}

	pg.SetUp(true)
	testenv.WaitFor(t, 30*time.Second, "the API to answer again", func() bool {
		return e.do(http.MethodGet, "/v1/jobs", nil).status == http.StatusOK
	})
	mustStatus(t, e.do(http.MethodPost, "/v1/jobs", jobBody("after")), http.StatusCreated)
}
