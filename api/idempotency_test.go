package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
)

// An Idempotency-Key makes each idempotent write safe to retry: the same
// request again gets the first answer (and does nothing more), another
// request with the key a 422 naming the header, a request still running
// a 409; a key is scoped to its namespace; a bad key is a 400.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	key := func(k string) map[string]string { return map[string]string{IdempotencyHeader: k} }
	body := jobBody("once")

	first := e.doHeaders(http.MethodPost, "/v1/jobs", body, key("k-1"))
	mustStatus(t, first, http.StatusCreated)
	again := e.doHeaders(http.MethodPost, "/v1/jobs", body, key("k-1"))
	mustStatus(t, again, http.StatusCreated)
	if !bytes.Equal(first.body, again.body) || again.header.Get(ReplayedHeader) != "true" || first.header.Get(ReplayedHeader) != "" {
		t.Errorf("replay: %s (replayed %q), first %s", again.body, again.header.Get(ReplayedHeader), first.body)
	}
	var j models.Job
	first.decode(t, &j)
	list, _, err := e.store.ListJobs(e.ctx, store.JobFilter{Namespace: "default"})
	if err != nil || len(list) != 1 {
		t.Fatalf("jobs after a create and its replay: %d, %v", len(list), err)
	}

	other := jobBody("twice")
	r := e.doHeaders(http.MethodPost, "/v1/jobs", other, key("k-1"))
	if mustStatus(t, r, http.StatusUnprocessableEntity); !hasField(r.problem(t), IdempotencyHeader) {
		t.Errorf("key reused for another job: %s", r.body)
	}
	// The same key in another namespace is another key.
	other["namespace"] = "team-b"
	mustStatus(t, e.doHeaders(http.MethodPost, "/v1/jobs", other, key("k-1")), http.StatusCreated)

	// A 4xx is kept like any answer: the same bad request gets it again.
	bad := map[string]any{"name": "no handler"}
	b1 := e.doHeaders(http.MethodPost, "/v1/jobs", bad, key("k-bad"))
	mustStatus(t, b1, http.StatusBadRequest)
	b2 := e.doHeaders(http.MethodPost, "/v1/jobs", bad, key("k-bad"))
	if mustStatus(t, b2, http.StatusBadRequest); !bytes.Equal(b1.body, b2.body) || b2.header.Get(ReplayedHeader) != "true" {
		t.Errorf("a kept 400: %s, replayed %q", b2.body, b2.header.Get(ReplayedHeader))
	}

	// Run now, twice with one key: one execution.
	run := "/v1/jobs/" + j.Id.String() + "/run"
	r1 := e.doHeaders(http.MethodPost, run, nil, key("run-1"))
	mustStatus(t, r1, http.StatusAccepted)
	r2 := e.doHeaders(http.MethodPost, run, nil, key("run-1"))
	if mustStatus(t, r2, http.StatusAccepted); !bytes.Equal(r1.body, r2.body) {
		t.Errorf("run replay: %s, first %s", r2.body, r1.body)
	}
	n := count(t, e, "SELECT count(*) FROM executions WHERE job_id = $1 AND manual", j.Id)
	if n != 1 {
		t.Errorf("%d manual executions after a run and its replay, want 1", n)
	}
	// Without a key, each run is a run.
	mustStatus(t, e.do(http.MethodPost, run, nil), http.StatusAccepted)

	// A batch, replayed.
	batch := map[string]any{"jobs": []any{jobBody("b-1"), jobBody("b-2")}}
	x1 := e.doHeaders(http.MethodPost, "/v1/jobs:batch", batch, key("batch-1"))
	x2 := e.doHeaders(http.MethodPost, "/v1/jobs:batch", batch, key("batch-1"))
	if x1.status != x2.status || !bytes.Equal(x1.body, x2.body) || x2.header.Get(ReplayedHeader) != "true" {
		t.Errorf("batch replay: %d %s, first %d %s", x2.status, x2.body, x1.status, x1.body)
	}

	// A request that still holds its key.
	if _, err := e.store.ClaimIdempotencyKey(context.Background(), "default", "busy", []byte("h")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Pool().Exec(e.ctx, "UPDATE idempotency_keys SET request_hash = $1 WHERE key = 'busy'",
		requestHash(http.MethodPost, "/v1/jobs", mustJSON(t, body))); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, e.doHeaders(http.MethodPost, "/v1/jobs", body, key("busy")), http.StatusConflict)

	for _, k := range []string{"has space", strings.Repeat("k", 256), "é"} {
		r := e.doHeaders(http.MethodPost, "/v1/jobs", body, key(k))
		if mustStatus(t, r, http.StatusBadRequest); !hasField(r.problem(t), IdempotencyHeader) {
			t.Errorf("key %q: %s", k, r.body)
		}
	}
}

func count(t *testing.T, e *env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
