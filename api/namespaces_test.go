package api

import (
	"net/http"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// PUT /v1/namespaces/{ns} sets and removes a namespace's retention; GET
// /v1/namespaces lists namespaces with their jobs and settings.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := jobBody("n1")
	body["namespace"] = "team-a"
	e.createJob(body)
	e.createJob(jobBody("n2"))

	r := e.do("PUT", "/v1/namespaces/team-b", map[string]any{"retention": "30d"})
	mustStatus(t, r, http.StatusOK)
	var n models.Namespace
	r.decode(t, &n)
	if n.Name != "team-b" || n.Jobs != 0 || n.Retention == nil || *n.Retention != "30d" || n.EffectiveRetention != "30d" {
		t.Errorf("set: %s", r.body)
	}
	r = e.do("GET", "/v1/namespaces", nil)
	mustStatus(t, r, http.StatusOK)
	var list models.NamespaceList
	r.decode(t, &list)
	got := map[string]models.Namespace{}
	for _, it := range list.Items {
		got[it.Name] = it
	}
	if len(list.Items) != 3 || got["team-a"].Jobs != 1 || got["default"].Jobs != 1 || got["team-a"].Retention != nil ||
		got["team-a"].EffectiveRetention != "90d" || got["team-b"].EffectiveRetention != "30d" {
		t.Errorf("list: %s", r.body)
	}
	// null removes the namespace's own retention.
	r = e.do("PUT", "/v1/namespaces/team-b", map[string]any{"retention": nil})
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &n)
	if n.Retention != nil || n.EffectiveRetention != "90d" {
		t.Errorf("removed: %s", r.body)
	}
	for _, tc := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/namespaces/team-b", map[string]any{"retention": "10m"}, "retention"},
		{"/v1/namespaces/team-b", map[string]any{"retention": "forever"}, "retention"},
		{"/v1/namespaces/team-b", map[string]any{"retention": 30}, "retention"},
		{"/v1/namespaces/team-b", map[string]any{"keep": "30d"}, "keep"},
		{"/v1/namespaces/a%20b", map[string]any{"retention": "30d"}, "namespace"},
	} {
		r := e.do("PUT", tc.path, tc.body)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, tc.field) {
			t.Errorf("%s %v: problem names %s, want %s", tc.path, tc.body, fieldsOf(p), tc.field)
		}
	}
}
