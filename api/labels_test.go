package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// Labels and a description go in with a job, come back with it, can be
// replaced by PATCH, and select jobs in GET /v1/jobs?selector=.
func TestLabelsDescriptionAndSelector(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withLabels := func(name string, labels map[string]any) map[string]any {
		b := jobBody(name)
		b["namespace"] = "labels"
		if labels != nil {
			b["labels"] = labels
		}
		return b
	}
	pay := withLabels("pay", map[string]any{"team": "payments", "tier": "web"})
	pay["description"] = "charges cards"
	j := e.createJob(pay)
	if j.Labels == nil || (*j.Labels)["team"] != "payments" || deref(j.Description) != "charges cards" {
		t.Fatalf("created %+v", j)
	}
	e.createJob(withLabels("batch", map[string]any{"team": "payments", "tier": "batch"}))
	e.createJob(withLabels("plain", nil))

	names := func(selector string) string {
		t.Helper()
		r := e.do("GET", "/v1/jobs?namespace=labels&selector="+url.QueryEscape(selector), nil)
		mustStatus(t, r, http.StatusOK)
		var list models.JobList
		r.decode(t, &list)
		var out []string
		for _, j := range list.Items {
			out = append(out, j.Name)
		}
		return strings.Join(out, " ")
	}
	for sel, want := range map[string]string{
		"team=payments":             "batch pay",
		"team=payments,tier!=batch": "pay",
		"!tier":                     "plain",
		"tier!=web":                 "batch plain",
	} {
		if got := names(sel); got != want {
			t.Errorf("selector %q: %q, want %q", sel, got, want)
		}
	}

	r := e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"labels": map[string]any{"team": "billing"}, "description": ""})
	mustStatus(t, r, http.StatusOK)
	got := e.getJob(j.Id)
	if got.Labels == nil || len(*got.Labels) != 1 || (*got.Labels)["team"] != "billing" || got.Description != nil {
		t.Fatalf("after PATCH: labels %v, description %v", got.Labels, got.Description)
	}
	mustStatus(t, e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"labels": map[string]any{}}), http.StatusOK)
	if got := e.getJob(j.Id); got.Labels != nil {
		t.Fatalf("labels {} left %v", *got.Labels)
	}
}

func TestLabelsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"bad key", map[string]any{"labels": map[string]any{"-team": "x"}}, "labels.-team"},
		{"bad value", map[string]any{"labels": map[string]any{"team": "a b"}}, "labels.team"},
		{"value not a string", map[string]any{"labels": map[string]any{"team": 3}}, "labels.team"},
		{"labels not an object", map[string]any{"labels": "team=x"}, "labels"},
		{"description too long", map[string]any{"description": strings.Repeat("d", 2001)}, "description"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := jobBody("bad-" + strings.ReplaceAll(tc.name, " ", "-"))
			for k, v := range tc.body {
				b[k] = v
			}
			r := e.do("POST", "/v1/jobs", b)
			mustStatus(t, r, http.StatusBadRequest)
			if !hasField(r.problem(t), tc.field) {
				t.Errorf("problem %s does not name %s", r.body, tc.field)
			}
		})
	}
	for _, sel := range []string{"team in ()", "team=a b", "team=x,"} {
		r := e.do("GET", "/v1/jobs?selector="+url.QueryEscape(sel), nil)
		mustStatus(t, r, http.StatusBadRequest)
		if !hasField(r.problem(t), "selector") {
			t.Errorf("selector %q: problem %s does not name selector", sel, r.body)
		}
	}
}
