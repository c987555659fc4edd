package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
)

// setEnv serves the API with a secret key, so that jobs may carry secret
// headers.
func setEnv(t *testing.T) *env {
	t.Helper()
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) { c.Secrets = testenv.Keyring(t) })
	e.store = st
	return e
}

// plan asks for the plan of set with body's jobs and options.
func (e *env) plan(set string, body map[string]any) models.ApplySetPlan {
	e.t.Helper()
	r := e.do("POST", "/v1/applysets/"+set+":plan", body)
	mustStatus(e.t, r, http.StatusOK)
	var p models.ApplySetPlan
	r.decode(e.t, &p)
	return p
}

// apply plans and applies, failing the test unless both answer 200.
func (e *env) apply(set string, body map[string]any) models.ApplySetPlan {
	e.t.Helper()
	p := e.plan(set, body)
	with := map[string]any{"plan_hash": p.PlanHash}
	for k, v := range body {
		with[k] = v
	}
	r := e.do("POST", "/v1/applysets/"+set+":apply", with)
	mustStatus(e.t, r, http.StatusOK)
	var got models.ApplySetPlan
	r.decode(e.t, &got)
	if !got.Applied || got.PlanHash != p.PlanHash {
		e.t.Fatalf("apply answered applied=%v hash %s; planned %s", got.Applied, got.PlanHash, p.PlanHash)
	}
	return got
}

// actions is the plan's changes as "name:action" (with "~" for drift).
func actions(p models.ApplySetPlan) string {
	var parts []string
	for _, c := range p.Changes {
		s := c.Name + ":" + string(c.Action)
		if c.Drift {
			s += "~"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func change(t *testing.T, p models.ApplySetPlan, name string) models.ApplySetChange {
	t.Helper()
	for _, c := range p.Changes {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no change for %s in %s", name, actions(p))
	return models.ApplySetChange{}
}

func setJobs() []any {
	a := jobBody("a")
	a["labels"] = map[string]string{"team": "pay"}
	b := jobBody("b")
	b["schedule"] = map[string]any{}
	b["depends_on"] = []any{map[string]any{"job": "a"}}
	c := jobBody("c")
	c["handler"] = map[string]any{"type": "http", "url": "https://example.com/c",
		"secret_headers": map[string]string{"Authorization": "Bearer one"}}
	c["paused"] = true
	return []any{a, b, c}
}

// The whole life of a set against real Postgres: create (a chain among
// them, a secret header, a paused job), nothing to do, drift, an update
// field by field with secrets shown only as changed, a stale plan, adopt,
// orphans and prune with the mass-delete guard, the lock, the audit.
func TestApplySetLife(t *testing.T) {
	t.Parallel()
	e := setEnv(t)
	body := map[string]any{"jobs": setJobs(), "commit": "c0ffee"}

	p := e.plan("pay", body)
	if got := actions(p); got != "a:create b:create c:create" || p.Revision != 0 || p.Applied {
		t.Fatalf("first plan: %s, revision %d, applied %v", got, p.Revision, p.Applied)
	}
	if n := e.do("GET", "/v1/jobs?namespace=default", nil); !strings.Contains(string(n.body), `"items":[]`) {
		t.Fatalf("a plan created jobs: %s", n.body)
	}
	done := e.apply("pay", body)
	if done.Revision != 1 || done.Summary.Create != 3 {
		t.Fatalf("apply: revision %d, %+v", done.Revision, done.Summary)
	}
	a := e.getJob(*change(t, done, "a").JobId)
	b := e.getJob(*change(t, done, "b").JobId)
	c := e.getJob(*change(t, done, "c").JobId)
	if deref(a.Applyset) != "pay" || a.State != "active" || c.State != "paused" || b.Chain == nil || !*b.Chain {
		t.Fatalf("after apply: a in %q %s, c %s, b chain %v", deref(a.Applyset), a.State, c.State, b.Chain)
	}

	// The same files again: nothing to do, no drift.
	if p := e.plan("pay", body); actions(p) != "a:unchanged b:unchanged c:unchanged" {
		t.Fatalf("second plan: %s", actions(p))
	}

	// A change through the API is drift; the plan shows what applying puts back.
	r := e.do("PATCH", "/v1/jobs/"+a.Id.String(), map[string]any{"description": "by hand"})
	mustStatus(t, r, http.StatusOK)
	// A pause is runtime state, not drift.
	mustStatus(t, e.do("POST", "/v1/jobs/"+b.Id.String()+"/pause", nil), http.StatusOK)
	p = e.plan("pay", body)
	if got := actions(p); got != "a:update~ b:unchanged c:unchanged" {
		t.Fatalf("plan after a PATCH: %s", got)
	}
	f := (*change(t, p, "a").Fields)[0]
	if f.Field != "description" || f.Before != "by hand" || f.After != nil {
		t.Fatalf("a's field change: %+v", f)
	}

	// A new secret and schedule in the files: the secret shows as changed only.
	jobsNow := setJobs()
	jobsNow[2].(map[string]any)["handler"].(map[string]any)["secret_headers"] = map[string]string{"Authorization": "Bearer two"}
	jobsNow[0].(map[string]any)["schedule"] = map[string]any{"cron": "0 0 10 * * *", "timezone": "UTC"}
	body2 := map[string]any{"jobs": jobsNow}
	p = e.plan("pay", body2)
	if got := actions(p); got != "a:update~ b:unchanged c:update" {
		t.Fatalf("plan of new files: %s", got)
	}
	cf := *change(t, p, "c").Fields
	if len(cf) != 1 || cf[0].Field != "handler.secret_headers.Authorization" || cf[0].Before != "(secret)" || cf[0].After != "(secret)" {
		t.Fatalf("c's fields: %+v", cf)
	}
	if strings.Contains(string(e.do("POST", "/v1/applysets/pay:plan", body2).body), "Bearer") {
		t.Fatal("a plan shows a secret value")
	}

	// A stale plan changes nothing.
	stale := e.plan("pay", body2)
	mustStatus(t, e.do("PATCH", "/v1/jobs/"+c.Id.String(), map[string]any{"description": "meanwhile"}), http.StatusOK)
	r = e.do("POST", "/v1/applysets/pay:apply", map[string]any{"jobs": jobsNow, "plan_hash": stale.PlanHash})
	mustStatus(t, r, http.StatusConflict)
	if got := e.getJob(a.Id); got.Schedule.Cron == nil || *got.Schedule.Cron != "0 30 9 * * MON-FRI" {
		t.Fatalf("a stale apply changed a: %+v", got.Schedule)
	}
	done = e.apply("pay", body2)
	if got := e.getJob(a.Id); *got.Schedule.Cron != "0 0 10 * * *" || got.Description != nil || deref(got.Applyset) != "pay" {
		t.Fatalf("after apply: a %+v description %v", got.Schedule, got.Description)
	}
	if p := e.plan("pay", body2); actions(p) != "a:unchanged b:unchanged c:unchanged" {
		t.Fatalf("plan after apply: %s", actions(p))
	}
	// A file that says paused: false resumes the job; one that says
	// nothing leaves the state alone.
	jobsNow[2].(map[string]any)["paused"] = false
	if done = e.apply("pay", body2); actions(done) != "a:unchanged b:unchanged c:update" {
		t.Fatalf("resume by file: %s", actions(done))
	}
	if got := e.getJob(c.Id); got.State != "active" || got.NextRunAt == nil {
		t.Fatalf("c after paused: false: %s, next %v", got.State, got.NextRunAt)
	}
	delete(jobsNow[2].(map[string]any), "paused")
	mustStatus(t, e.do("POST", "/v1/jobs/"+c.Id.String()+"/pause", nil), http.StatusOK)
	if p := e.plan("pay", body2); actions(p) != "a:unchanged b:unchanged c:unchanged" {
		t.Fatalf("a pause by hand, files silent on it: %s", actions(p))
	}

	// A job of the same name outside the set: a conflict unless adopted;
	// a job of another set: always one.
	x := e.createJob(jobBody("x"))
	withX := append(setJobs()[:0:0], jobsNow...)
	withX = append(withX, jobBody("x"))
	p = e.plan("pay", map[string]any{"jobs": withX})
	if cx := change(t, p, "x"); cx.Action != "conflict" || cx.Reason == nil {
		t.Fatalf("x without adopt: %+v", cx)
	}
	r = e.do("POST", "/v1/applysets/pay:apply", map[string]any{"jobs": withX, "plan_hash": p.PlanHash})
	mustStatus(t, r, http.StatusConflict)
	done = e.apply("pay", map[string]any{"jobs": withX, "adopt": true})
	if cx := change(t, done, "x"); cx.Action != "adopt" || *cx.JobId != x.Id {
		t.Fatalf("x adopted: %+v", cx)
	}
	if cx := change(t, e.plan("other", map[string]any{"jobs": []any{jobBody("x")}, "adopt": true}), "x"); cx.Action != "conflict" {
		t.Fatalf("another set took x: %+v", cx)
	}

	// Files without c and x: orphans without prune, deletes with; two of
	// four is not more than half.
	two := jobsNow[:2]
	if got := actions(e.plan("pay", map[string]any{"jobs": two})); got != "a:unchanged b:unchanged c:orphan x:orphan" {
		t.Fatalf("without prune: %s", got)
	}
	// An empty directory deletes everything only when allowed.
	p = e.plan("pay", map[string]any{"jobs": []any{}, "prune": true})
	if !deref(p.MassDelete) || p.Summary.Delete != 4 {
		t.Fatalf("empty files: mass %v, %+v", p.MassDelete, p.Summary)
	}
	r = e.do("POST", "/v1/applysets/pay:apply", map[string]any{"jobs": []any{}, "prune": true, "plan_hash": p.PlanHash})
	mustStatus(t, r, http.StatusConflict)
	if pr := r.problem(t); !strings.Contains(deref(pr.Detail), "allow_mass_delete") {
		t.Fatalf("mass delete refused with %q", deref(pr.Detail))
	}
	done = e.apply("pay", map[string]any{"jobs": two, "prune": true, "lock": true, "commit": "beef"})
	if got := actions(done); got != "a:unchanged b:unchanged c:delete x:delete" || !deref(done.Lock) {
		t.Fatalf("prune: %s lock %v", got, done.Lock)
	}
	mustStatus(t, e.do("GET", "/v1/jobs/"+x.Id.String(), nil), http.StatusNotFound)

	// Locked: changes outside the set are refused, pauses are not.
	r = e.do("PATCH", "/v1/jobs/"+a.Id.String(), map[string]any{"description": "no"})
	mustStatus(t, r, http.StatusConflict)
	if pr := r.problem(t); !strings.Contains(deref(pr.Detail), `"pay"`) {
		t.Fatalf("locked PATCH: %q", deref(pr.Detail))
	}
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+a.Id.String(), nil), http.StatusConflict)
	mustStatus(t, e.do("POST", "/v1/jobs/"+a.Id.String()+"/pause", nil), http.StatusOK)
	if got := e.getJob(a.Id); !deref(got.ApplysetLocked) {
		t.Fatal("a member of a locked set does not say so")
	}

	// Every change is audited with the set, its revision and the commit.
	r = e.do("GET", "/v1/audit?action=jobs.delete", nil)
	mustStatus(t, r, http.StatusOK)
	var audit models.AuditList
	r.decode(t, &audit)
	if len(audit.Items) != 2 {
		t.Fatalf("%d delete entries", len(audit.Items))
	}
	d := *audit.Items[0].Detail
	if d["applyset"] != "pay" || d["commit"] != "beef" || d["revision"] != float64(done.Revision) {
		t.Fatalf("audit detail %v; want pay, beef, revision %d", d, done.Revision)
	}
	r = e.do("GET", "/v1/applysets", nil)
	var sets models.ApplySetList
	r.decode(t, &sets)
	if len(sets.Items) != 1 || sets.Items[0].Members != 2 || !sets.Items[0].Lock || deref(sets.Items[0].Commit) != "beef" {
		t.Fatalf("sets: %+v", sets.Items)
	}
}

// Bad files are 400s naming the job and field, and change nothing.
func TestApplySetRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := setEnv(t)
	bad := jobBody("a")
	bad["schedule"] = map[string]any{"cron": "not a cron"}
	other := jobBody("b")
	other["namespace"] = "elsewhere"
	other["colour"] = "red"
	dup := jobBody("a")
	for _, tc := range []struct {
		path   string
		body   any
		fields []string
	}{
		{"/v1/applysets/pay:plan", map[string]any{"jobs": []any{bad, other}}, []string{"jobs[0].schedule.cron", "jobs[1].namespace", "jobs[1].colour"}},
		{"/v1/applysets/pay:plan", map[string]any{"jobs": []any{jobBody("a"), dup}}, []string{"jobs[1].name"}},
		{"/v1/applysets/pay:plan", map[string]any{"jobs": "x", "prune": "yes"}, []string{"jobs", "prune"}},
		{"/v1/applysets/pay:apply", map[string]any{"jobs": []any{}}, []string{"plan_hash"}},
		{"/v1/applysets/bad%20name:plan", map[string]any{"jobs": []any{}}, []string{"name"}},
	} {
		r := e.do("POST", tc.path, tc.body)
		mustStatus(t, r, http.StatusBadRequest)
		pr := r.problem(t)
		for _, f := range tc.fields {
			if !hasField(pr, f) {
				t.Errorf("%s %v: no error for %s in %s", tc.path, tc.body, f, fieldsOf(pr))
			}
		}
	}
	mustStatus(t, e.do("POST", "/v1/applysets/pay", map[string]any{"jobs": []any{}}), http.StatusNotFound)
}

// 200 jobs are applied in one transaction; the time is logged (the
// figure is bench.md's, from BenchmarkApplySet).
func TestApplySetOf200(t *testing.T) {
	t.Parallel()
	e := setEnv(t)
	var js []any
	for i := range 200 {
		j := jobBody(fmt.Sprintf("job-%03d", i))
		j["labels"] = map[string]string{"n": fmt.Sprint(i % 7)}
		js = append(js, j)
	}
	start := time.Now()
	done := e.apply("bulk", map[string]any{"jobs": js})
	t.Logf("plan and apply of 200 new jobs: %s", time.Since(start))
	if done.Summary.Create != 200 {
		t.Fatalf("%+v", done.Summary)
	}
	if p := e.plan("bulk", map[string]any{"jobs": js}); p.Summary.Unchanged != 200 || p.Summary.Drift != 0 {
		t.Fatalf("plan after: %+v", p.Summary)
	}
}

// racedSetStore is a store whose apply transactions meet a job of the
// same name created outside the set meanwhile (between the apply's read
// of the names and its insert), as store.CreateJob's unique names make
// it fail.
type racedSetStore struct{ *store.Store }

func (s racedSetStore) ApplySet(ctx context.Context, namespace, name string, write bool, fn func(context.Context, *store.ApplySetTx) error) error {
	if write {
		return fmt.Errorf("store: apply set %s/%s: create job: %w", namespace, name, store.ErrConflict)
	}
	return s.Store.ApplySet(ctx, namespace, name, write, fn)
}

// An apply that loses such a race applies nothing and answers 409, not
// 500.
func TestApplySetLosingANameRaceIsAConflict(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	e := newEnvWith(t, racedSetStore{st}, func(c *Config) { c.Secrets = testenv.Keyring(t) })
	body := map[string]any{"jobs": []any{jobBody("raced")}}
	p := e.plan("raced", body)
	r := e.do("POST", "/v1/applysets/raced:apply", map[string]any{"jobs": body["jobs"], "plan_hash": p.PlanHash})
	mustStatus(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "created outside it meanwhile") {
		t.Errorf("409 body %s", r.body)
	}
}
