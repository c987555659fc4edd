package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
)

func newLimitedEnv(t *testing.T, l Limits) *authEnv {
	t.Helper()
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) { c.Open = false; c.Limits = l })
	e.store = st
	a := &authEnv{env: e}
	a.admin = a.key(auth.AllNamespaces, "admin", nil)
	return a
}

// mustTooMany checks a 429: Retry-After in whole seconds, the RateLimit
// headers, and a problem naming field and saying which limit.
func mustTooMany(t *testing.T, r resp, field, limit string) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", r.status, r.body)
	}
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if r.header.Get("RateLimit-Limit") == "" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") == "" {
		t.Errorf("RateLimit headers %v", r.header)
	}
	p := r.problem(t)
	if p.Errors == nil || (*p.Errors)[0].Field != field || !strings.Contains(deref(p.Detail), limit) {
		t.Errorf("problem %s, want field %s and %s named", r.body, field, limit)
	}
}

// Each key has its request rate: past its burst it gets 429s, while
// another key does not; the keys of a namespace share its rate.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	a := newLimitedEnv(t, Limits{KeyRate: 0.5, KeyBurst: 3})
	k1, k2 := a.key("team-a", "reader", nil), a.key("team-a", "reader", nil)
	for i := range 3 {
		r := a.as(k1, "GET", "/v1/jobs", nil)
		mustStatus(t, r, http.StatusOK)
		if got := r.header.Get("RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Errorf("request %d: RateLimit-Remaining %q", i+1, got)
		}
	}
	mustTooMany(t, a.as(k1, "GET", "/v1/jobs", nil), "Authorization", "--rate-limit-key")
	mustStatus(t, a.as(k2, "GET", "/v1/jobs", nil), http.StatusOK)

	b := newLimitedEnv(t, Limits{NamespaceRate: 0.5, NamespaceBurst: 2})
	m1, m2, other := b.key("team-a", "reader", nil), b.key("team-a", "editor", nil), b.key("team-b", "reader", nil)
	mustStatus(t, b.as(m1, "GET", "/v1/jobs", nil), http.StatusOK)
	mustStatus(t, b.as(m2, "GET", "/v1/jobs", nil), http.StatusOK)
	mustTooMany(t, b.as(m1, "GET", "/v1/jobs", nil), "Authorization", "namespace team-a")
	mustStatus(t, b.as(other, "GET", "/v1/jobs", nil), http.StatusOK)
	// A key for every namespace has no namespace's rate.
	for range 3 {
		mustStatus(t, b.as(b.admin, "GET", "/v1/jobs", nil), http.StatusOK)
	}
}

// A namespace holds at most MaxJobs jobs (one by one, and in batches),
// and asks for at most ManualPerMinute manual executions a minute.
func TestQuotas(t *testing.T) {
	t.Parallel()
	a := newLimitedEnv(t, Limits{MaxJobs: 2, ManualPerMinute: 2})
	editor := a.key("team-a", "editor", nil)
	job := func(name string) map[string]any {
		b := jobBody(name)
		b["namespace"] = "team-a"
		return b
	}
	first := a.as(editor, "POST", "/v1/jobs", job("one"))
	mustStatus(t, first, http.StatusCreated)
	var j models.Job
	first.decode(t, &j)
	r := a.as(editor, "POST", "/v1/jobs:batch", map[string]any{"jobs": []any{job("two"), job("three")}})
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "its limit is 2") {
		t.Errorf("a batch past the quota: %d %s", r.status, r.body)
	}
	mustStatus(t, a.as(editor, "POST", "/v1/jobs", job("two")), http.StatusCreated)
	r = a.as(editor, "POST", "/v1/jobs", job("three"))
	if r.status != http.StatusForbidden {
		t.Fatalf("a third job: %d %s", r.status, r.body)
	}
	if p := r.problem(t); p.Type != ProblemQuota || (*p.Errors)[0].Field != "namespace" ||
		deref(p.Detail) != "namespace team-a holds 2 jobs; its limit is 2 (tockd --max-jobs-per-namespace)" {
		t.Errorf("quota problem %s", r.body)
	}
	// An apply that would create a third is refused whole.
	set := map[string]any{"namespace": "team-a", "jobs": []any{job("three")}}
	var plan models.ApplySetPlan
	r = a.as(editor, "POST", "/v1/applysets/s:plan", set)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &plan)
	set["plan_hash"] = plan.PlanHash
	if r = a.as(editor, "POST", "/v1/applysets/s:apply", set); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "its limit is 2") {
		t.Errorf("an apply past the quota: %d %s", r.status, r.body)
	}
	b := jobBody("elsewhere")
	b["namespace"] = "team-b"
	mustStatus(t, a.as(a.admin, "POST", "/v1/jobs", b), http.StatusCreated)

	for range 2 {
		mustStatus(t, a.as(editor, "POST", "/v1/jobs/"+j.Id.String()+"/run", nil), http.StatusAccepted)
	}
	mustTooMany(t, a.as(editor, "POST", "/v1/jobs/"+j.Id.String()+"/run", nil), "id", "--max-runs-per-minute")
}
