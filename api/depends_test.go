package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

func dependent(name string, on ...any) map[string]any {
	b := jobBody(name)
	var ups []map[string]any
	for _, o := range on {
		switch o := o.(type) {
		case string:
			ups = append(ups, map[string]any{"job": o})
		case map[string]any:
			ups = append(ups, o)
		}
	}
	b["depends_on"] = ups
	return b
}

// The API's side of dependencies: names and ids in, ids and names out; a
// chain; the refusals as problems naming the field (cycle, unknown,
// bad members), delete 409 listing the dependents, force, the graph.
func TestDependsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.createJob(jobBody("import"))
	b := e.createJob(jobBody("clean"))
	body := dependent("report", "import", map[string]any{"job": b.Id.String(), "on": "any"})
	body["depends_mode"] = "any"
	body["depends_match"] = map[string]any{"latest_within": "6h"}
	body["wait_timeout"] = "30m"
	body["on_timeout"] = "run"
	r := e.createJob(body)
	if r.DependsOn == nil || len(*r.DependsOn) != 2 || (*r.DependsOn)[0].JobId != a.Id || deref((*r.DependsOn)[0].Name) != "import" ||
		string((*r.DependsOn)[0].On) != "success" || string((*r.DependsOn)[1].On) != "any" {
		t.Fatalf("report's depends_on: %+v", r.DependsOn)
	}
	if string(*r.DependsMode) != "any" || string(*r.DependsMatch) != `{"latest_within":"6h"}` || *r.WaitTimeout != "30m" ||
		string(*r.OnTimeout) != "run" || string(*r.OnUpstreamSkipped) != "skip" || r.Chain != nil {
		t.Fatalf("report's dependency fields: mode %v match %s timeout %v on_timeout %v skipped %v chain %v",
			*r.DependsMode, *r.DependsMatch, *r.WaitTimeout, *r.OnTimeout, *r.OnUpstreamSkipped, r.Chain)
	}
	chain := jobBody("publish")
	delete(chain, "schedule")
	chain["depends_on"] = []map[string]any{{"job": "report"}}
	c := e.createJob(chain)
	if c.Chain == nil || !*c.Chain || c.NextRunAt != nil || c.State != models.JobStateActive {
		t.Fatalf("a chain: chain %v next %v state %s", c.Chain, c.NextRunAt, c.State)
	}

	// A cycle, named.
	res := e.do("PATCH", "/v1/jobs/"+a.Id.String(), map[string]any{"depends_on": []map[string]any{{"job": "publish"}}})
	mustStatus(t, res, http.StatusBadRequest)
	if p := res.problem(t); !hasField(p, "depends_on") || !strings.Contains(fieldsOf(p), "import → report → publish → import") {
		t.Fatalf("a cycle: %s", res.body)
	}
	// Unknown upstreams, and members that make no sense.
	res = e.do("POST", "/v1/jobs", dependent("x", "nope", "other/none"))
	mustStatus(t, res, http.StatusBadRequest)
	if p := res.problem(t); !hasField(p, "depends_on[0].job") || !hasField(p, "depends_on[1].job") {
		t.Fatalf("unknown upstreams: %s", res.body)
	}
	bad := dependent("x", "import", "import")
	bad["depends_mode"], bad["wait_timeout"], bad["depends_match"] = "most", "forever", "sometimes"
	res = e.do("POST", "/v1/jobs", bad)
	mustStatus(t, res, http.StatusBadRequest)
	for _, f := range []string{"depends_on[1].job", "depends_mode", "wait_timeout", "depends_match"} {
		if p := res.problem(t); !hasField(p, f) {
			t.Errorf("no fault about %s: %s", f, res.body)
		}
	}
	lone := jobBody("y")
	lone["on_timeout"] = "run"
	res = e.do("POST", "/v1/jobs", lone)
	mustStatus(t, res, http.StatusBadRequest)
	if p := res.problem(t); !hasField(p, "on_timeout") {
		t.Fatalf("on_timeout without depends_on: %s", res.body)
	}
	self := dependent("z")
	self["depends_on"] = []map[string]any{{"job": "z"}}
	res = e.do("POST", "/v1/jobs", self)
	mustStatus(t, res, http.StatusBadRequest)

	// A batch creates no dependent job: each item is refused by itself.
	res = e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{jobBody("plain"), dependent("dep", "import")}})
	mustStatus(t, res, http.StatusOK)
	var br models.JobBatchResult
	res.decode(t, &br)
	if br.Created != 1 || br.Items[1].Status != 400 || br.Items[1].Problem == nil || !hasField(*br.Items[1].Problem, "jobs[1].depends_on") {
		t.Fatalf("a batch with a dependent job: %s", res.body)
	}

	// The graph, from the middle.
	res = e.do("GET", "/v1/jobs/"+r.Id.String()+"/graph", nil)
	mustStatus(t, res, http.StatusOK)
	var g models.JobGraph
	res.decode(t, &g)
	if len(g.Edges) != 3 {
		t.Fatalf("report's graph: %+v", g.Edges)
	}

	// Deleting an upstream: 409 naming the dependents; force takes it out.
	res = e.do("DELETE", "/v1/jobs/"+a.Id.String(), nil)
	mustStatus(t, res, http.StatusConflict)
	if p := res.problem(t); !strings.Contains(deref(p.Detail), "default/report") {
		t.Fatalf("delete 409: %s", res.body)
	}
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+a.Id.String()+"?force=true", nil), http.StatusNoContent)
	r2 := e.getJob(r.Id)
	if r2.DependsOn == nil || len(*r2.DependsOn) != 1 || (*r2.DependsOn)[0].JobId != b.Id {
		t.Fatalf("report after import went: %+v", r2.DependsOn)
	}
	res = e.do("GET", "/v1/audit?action=jobs.update", nil)
	mustStatus(t, res, http.StatusOK)
	if !strings.Contains(string(res.body), "removed_upstream") || !strings.Contains(string(res.body), r.Id.String()) {
		t.Fatalf("the forced delete's audit: %s", res.body)
	}
	// Removing dependencies; a chain may not lose its upstreams.
	res = e.do("PATCH", "/v1/jobs/"+r.Id.String(), map[string]any{"depends_on": []any{}})
	mustStatus(t, res, http.StatusOK)
	if r3 := e.getJob(r.Id); r3.DependsOn != nil {
		t.Fatalf("report after depends_on []: %+v", r3.DependsOn)
	}
	res = e.do("PATCH", "/v1/jobs/"+c.Id.String(), map[string]any{"depends_on": []any{}})
	mustStatus(t, res, http.StatusBadRequest)
	// An empty schedule, as a form sends it, leaves a chain a chain.
	res = e.do("PATCH", "/v1/jobs/"+c.Id.String(), map[string]any{"schedule": map[string]any{}, "description": "x"})
	mustStatus(t, res, http.StatusOK)
	if c2 := e.getJob(c.Id); c2.Chain == nil || !*c2.Chain || c2.NextRunAt != nil || c2.State != models.JobStateActive {
		t.Fatalf("a chain after schedule {}: chain %v next %v state %s", c2.Chain, c2.NextRunAt, c2.State)
	}
	// A real schedule makes it a scheduled dependent.
	res = e.do("PATCH", "/v1/jobs/"+c.Id.String(), map[string]any{"schedule": map[string]any{"cron": "0 0 3 * * *"}})
	mustStatus(t, res, http.StatusOK)
	if c3 := e.getJob(c.Id); c3.Chain != nil || c3.NextRunAt == nil || c3.DependsOn == nil {
		t.Fatalf("a chain given a schedule: chain %v next %v depends %v", c3.Chain, c3.NextRunAt, c3.DependsOn)
	}
}
