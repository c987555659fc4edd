package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	// An ended execution of each: team-b's, on a retention shorter than
	// the cluster's, goes 30 days after it was scheduled; team-a's, on
	// the cluster's, with its day, 90 days after the day's end.
	at := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -3)
	if err := e.store.EnsureHistoryPartitions(e.ctx, at); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := e.store.Pool().Exec(e.ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler) VALUES ($1, $2, 0, $3, 'j', $4, 'succeeded', '{"type":"nats","subject":"a"}')`,
			uuid.New(), uuid.New(), ns, at); err != nil {
			t.Fatal(err)
		}
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
	for ns, want := range map[string]*time.Time{
		"default": nil,
		"team-a":  ptr(at.Truncate(24*time.Hour).AddDate(0, 0, 91)),
		"team-b":  ptr(at.AddDate(0, 0, 30)),
	} {
		if g := got[ns].HistoryExpiresAt; (g == nil) != (want == nil) || (g != nil && !g.Equal(*want)) {
			t.Errorf("%s: history_expires_at %v, want %v (%s)", ns, g, want, r.body)
		}
	}
	if !strings.Contains(string(r.body), `"history_expires_at":null`) {
		t.Errorf("a namespace without executions has no null history_expires_at: %s", r.body)
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
