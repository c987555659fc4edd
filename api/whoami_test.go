package api

import (
	"net/http"
	"slices"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
)

// TestWhoami: each caller is told its grants and, per action, the
// namespaces where the server would let it take that action; what it says
// matches what the server then does.
func TestWhoami(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	reader := a.key("team-a", "reader", nil)
	editor := a.key("team-a", "editor", nil)

	whoami := func(key string) models.Whoami {
		t.Helper()
		r := a.as(key, http.MethodGet, "/v1/whoami", nil)
		mustStatus(t, r, http.StatusOK)
		var w models.Whoami
		r.decode(t, &w)
		return w
	}
	for _, tc := range []struct {
		name, key string
		grant     models.Grant
		allowed   map[string][]string // action: namespaces
	}{
		{"reader", reader, models.Grant{Namespace: "team-a", Role: "reader"}, map[string][]string{
			"jobs.list": {"team-a"}, "jobs.create": {}, "jobs.pause": {}, "executions.retry": {}, "buckets.list": {}, "keys.create": {}, "whoami": {"team-a"},
		}},
		{"editor", editor, models.Grant{Namespace: "team-a", Role: "editor"}, map[string][]string{
			"jobs.list": {"team-a"}, "jobs.create": {"team-a"}, "jobs.pause": {"team-a"}, "executions.retry": {"team-a"}, "buckets.list": {}, "keys.create": {},
		}},
		{"admin everywhere", a.admin, models.Grant{Namespace: auth.AllNamespaces, Role: "admin"}, map[string][]string{
			"jobs.list": {"*"}, "jobs.create": {"*"}, "buckets.list": {"*"}, "keys.create": {"*"},
		}},
	} {
		w := whoami(tc.key)
		if w.Open || w.KeyId == nil || w.Subject != "key:"+*w.KeyId {
			t.Errorf("%s: subject %q, key id %v, open %v; want key:<its id>, not open", tc.name, w.Subject, w.KeyId, w.Open)
		}
		if len(w.Grants) != 1 || w.Grants[0] != tc.grant {
			t.Errorf("%s: grants %+v, want [%+v]", tc.name, w.Grants, tc.grant)
		}
		for action, want := range tc.allowed {
			got, ok := w.Actions[action]
			if !ok {
				t.Errorf("%s: no action %s in %v", tc.name, action, w.Actions)
			} else if !slices.Equal(got, want) {
				t.Errorf("%s: %s allowed in %q, want %q", tc.name, action, got, want)
			}
		}
	}

	// What whoami says is what the server does: the reader is refused a
	// create in team-a, the editor is not.
	body := jobBody("whoami-check")
	body["namespace"] = "team-a"
	mustStatus(t, a.as(reader, http.MethodPost, "/v1/jobs", body), http.StatusForbidden)
	mustStatus(t, a.as(editor, http.MethodPost, "/v1/jobs", body), http.StatusCreated)

	// No key: asked to sign in.
	mustStatus(t, a.as("", http.MethodGet, "/v1/whoami", nil), http.StatusUnauthorized)

	// An open server (tockd dev): anonymous, admin everywhere.
	open := newEnv(t)
	r := open.do(http.MethodGet, "/v1/whoami", nil)
	mustStatus(t, r, http.StatusOK)
	var w models.Whoami
	r.decode(t, &w)
	if !w.Open || w.Subject != "anonymous" || !slices.Equal(w.Actions["keys.create"], []string{"*"}) {
		t.Errorf("open server: %+v, want open, anonymous, keys.create everywhere", w)
	}
}
