package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
)

// authEnv is an API server that requires keys, over a real store.
type authEnv struct {
	*env
	admin string // a key with admin in every namespace
}

// newAuthEnv serves the API with keys required, a keyring (so that
// notification channels can be made) and a notifier that delivers every
// test message; opts change the server's Config further.
func newAuthEnv(t *testing.T, opts ...func(*Config)) *authEnv {
	t.Helper()
	st := openStore(t)
	keys := testenv.Keyring(t)
	e := newEnvWith(t, st, append([]func(*Config){func(c *Config) {
		c.Open, c.Secrets, c.Notifier = false, keys, &fakeNotifier{}
	}}, opts...)...)
	e.store = st
	a := &authEnv{env: e}
	a.admin = a.key(auth.AllNamespaces, "admin", nil)
	return a
}

// key stores a key with role in ns and returns it as a client sends it.
func (a *authEnv) key(ns, role string, expires *time.Time) string {
	a.t.Helper()
	k, err := auth.NewKey()
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.store.CreateAPIKey(context.Background(), model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: ns,
		Role: role, CreatedBy: "test", ExpiresAt: expires}); err != nil {
		a.t.Fatal(err)
	}
	return k.String()
}

// as sends a request with key (none when "").
func (a *authEnv) as(key, method, path string, body any) resp {
	a.t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Authorization"] = "Bearer " + key
	}
	return a.doHeaders(method, path, body, h)
}

// fixture makes, with the admin key, a job in namespace ns and returns
// its id.
func (a *authEnv) fixtureJob(ns string) string {
	a.t.Helper()
	b := jobBody("j-" + uuid.NewString()[:8])
	b["namespace"] = ns
	r := a.as(a.admin, "POST", "/v1/jobs", b)
	mustStatus(a.t, r, http.StatusCreated)
	var j models.Job
	r.decode(a.t, &j)
	return j.Id.String()
}

// fixtureCalendar makes, with the admin key, a calendar in team-a and
// returns its name.
func (a *authEnv) fixtureCalendar() string {
	a.t.Helper()
	name := "cal-" + uuid.NewString()[:8]
	mustStatus(a.t, a.as(a.admin, "POST", "/v1/calendars", map[string]any{"name": name, "namespace": "team-a"}), http.StatusCreated)
	return name
}

// fixtureExecution runs a job of ns now and returns the execution's id.
func (a *authEnv) fixtureExecution(ns string) string {
	a.t.Helper()
	r := a.as(a.admin, "POST", "/v1/jobs/"+a.fixtureJob(ns)+"/run", nil)
	mustStatus(a.t, r, http.StatusAccepted)
	var x models.Execution
	r.decode(a.t, &x)
	return x.Id.String()
}

// request is one call of an operation, on resources in namespace team-a.
type request struct {
	method, path string
	body         any
	// missing: the call may answer 404 although allowed (it names a
	// resource that does not exist, behind one that does).
	missing bool
}

// operationCases build, for every operation of the document, a call on
// namespace team-a's resources (fresh ones each time: some calls change
// or delete them).
func operationCases(a *authEnv) map[string]func() request {
	job := func() string { return a.fixtureJob("team-a") }
	calendar := a.fixtureCalendar
	jobBodyIn := func() map[string]any {
		b := jobBody("c-" + uuid.NewString()[:8])
		b["namespace"] = "team-a"
		return b
	}
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	now := time.Now().UTC().Format(time.RFC3339)
	return map[string]func() request{
		"createJob": func() request { return request{"POST", "/v1/jobs", jobBodyIn(), false} },
		"listJobs":  func() request { return request{"GET", "/v1/jobs?namespace=team-a", nil, false} },
		"whoami":    func() request { return request{"GET", "/v1/whoami", nil, false} },
		// No change feed in this server: an allowed watch is a 503.
		"watchChanges": func() request { return request{"GET", "/v1/changes?namespace=team-a", nil, false} },
		"pauseJobs":    func() request { return request{"POST", "/v1/jobs:pause", map[string]any{"namespace": "team-a"}, false} },
		"resumeJobs": func() request {
			return request{"POST", "/v1/jobs:resume", map[string]any{"namespace": "team-a"}, false}
		},
		"createJobBatch": func() request {
			return request{"POST", "/v1/jobs:batch", map[string]any{"jobs": []any{jobBodyIn()}}, false}
		},
		"createCalendar": func() request {
			return request{"POST", "/v1/calendars", map[string]any{"name": "c-" + uuid.NewString()[:8], "namespace": "team-a"}, false}
		},
		"listCalendars": func() request { return request{"GET", "/v1/calendars?namespace=team-a", nil, false} },
		"listConcurrencyKeys": func() request {
			return request{"GET", "/v1/concurrency?namespace=team-a", nil, false}
		},
		"getCalendar": func() request { return request{"GET", "/v1/calendars/" + calendar() + "?namespace=team-a", nil, false} },
		"putCalendar": func() request {
			name := calendar()
			return request{"PUT", "/v1/calendars/" + name + "?namespace=team-a", map[string]any{"name": name}, false}
		},
		"deleteCalendar": func() request {
			return request{"DELETE", "/v1/calendars/" + calendar() + "?namespace=team-a", nil, false}
		},
		"listApplySets": func() request { return request{"GET", "/v1/applysets?namespace=team-a", nil, false} },
		"planApplySet": func() request {
			return request{"POST", "/v1/applysets/s:plan", map[string]any{"namespace": "team-a", "jobs": []any{jobBodyIn()}}, false}
		},
		// An allowed apply of a made-up plan is a 409.
		"applyApplySet": func() request {
			return request{"POST", "/v1/applysets/s:apply", map[string]any{"namespace": "team-a", "jobs": []any{}, "plan_hash": "x"}, false}
		},
		"getJob":      func() request { return request{"GET", "/v1/jobs/" + job(), nil, false} },
		"getJobGraph": func() request { return request{"GET", "/v1/jobs/" + job() + "/graph", nil, false} },
		"updateJob": func() request {
			return request{"PATCH", "/v1/jobs/" + job(), map[string]any{"description": "x"}, false}
		},
		"deleteJob":  func() request { return request{"DELETE", "/v1/jobs/" + job(), nil, false} },
		"pauseJob":   func() request { return request{"POST", "/v1/jobs/" + job() + "/pause", nil, false} },
		"resumeJob":  func() request { return request{"POST", "/v1/jobs/" + job() + "/resume", nil, false} },
		"runJob":     func() request { return request{"POST", "/v1/jobs/" + job() + "/run", nil, false} },
		"previewJob": func() request { return request{"GET", "/v1/jobs/" + job() + "/preview", nil, false} },
		"previewSchedule": func() request {
			return request{"POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "0 * * * * *"}}, false}
		},
		"listJobExecutions": func() request { return request{"GET", "/v1/jobs/" + job() + "/executions", nil, false} },
		"listJobSkips":      func() request { return request{"GET", "/v1/jobs/" + job() + "/skips", nil, false} },
		"backfillJob": func() request {
			return request{"POST", "/v1/jobs/" + job() + "/backfill", map[string]any{"from": hourAgo, "to": now}, false}
		},
		"listJobBackfills": func() request { return request{"GET", "/v1/jobs/" + job() + "/backfills", nil, false} },
		"stopJobBackfill": func() request {
			return request{"DELETE", "/v1/jobs/" + job() + "/backfills/" + uuid.NewString(), nil, true}
		},
		"getExecution": func() request { return request{"GET", "/v1/executions/" + a.fixtureExecution("team-a"), nil, false} },
		"getExecutionLogs": func() request {
			return request{"GET", "/v1/executions/" + a.fixtureExecution("team-a") + "/logs", nil, false}
		},
		"listExecutions": func() request { return request{"GET", "/v1/executions?namespace=team-a", nil, false} },
		"getStats":       func() request { return request{"GET", "/v1/stats?namespace=team-a", nil, false} },
		"getStatsSeries": func() request { return request{"GET", "/v1/stats/series?namespace=team-a&interval=5m", nil, false} },
		"cancelExecution": func() request {
			return request{"POST", "/v1/executions/" + a.fixtureExecution("team-a") + "/cancel", nil, false}
		},
		"retryExecution": func() request {
			return request{"POST", "/v1/executions/" + a.fixtureExecution("team-a") + "/retry", nil, false}
		},
		"listHandlers":   func() request { return request{"GET", "/v1/handlers", nil, false} },
		"listNamespaces": func() request { return request{"GET", "/v1/namespaces", nil, false} },
		"putNamespace": func() request {
			return request{"PUT", "/v1/namespaces/team-a", map[string]any{"retention": "30d"}, false}
		},
		"listBuckets":    func() request { return request{"GET", "/v1/buckets", nil, false} },
		"listPartitions": func() request { return request{"GET", "/v1/partitions", nil, false} },
		"listNodes":      func() request { return request{"GET", "/v1/nodes", nil, false} },
		"getHealthz":     func() request { return request{"GET", "/healthz", nil, false} },
		"getReadyz":      func() request { return request{"GET", "/readyz", nil, false} },
		"getMetrics":     func() request { return request{"GET", "/metrics", nil, false} },
		"getOpenAPI":     func() request { return request{"GET", "/openapi.json", nil, false} },
		"createKey": func() request {
			return request{"POST", "/v1/keys", map[string]any{"namespace": "team-a", "role": "reader"}, false}
		},
		"listKeys":  func() request { return request{"GET", "/v1/keys?namespace=team-a", nil, false} },
		"listAudit": func() request { return request{"GET", "/v1/audit?namespace=team-a", nil, false} },
		"deleteKey": func() request {
			k, _ := auth.ParseKey(a.key("team-a", "reader", nil))
			return request{"DELETE", "/v1/keys/" + k.ID, nil, false}
		},
		"createChannel": func() request {
			return request{"POST", "/v1/notification-channels", channelBody("team-a", "c-"+uuid.NewString()[:8]), false}
		},
		"listChannels": func() request { return request{"GET", "/v1/notification-channels?namespace=team-a", nil, false} },
		"getChannel": func() request {
			return request{"GET", "/v1/notification-channels/" + a.fixtureChannel("team-a"), nil, false}
		},
		"updateChannel": func() request {
			return request{"PATCH", "/v1/notification-channels/" + a.fixtureChannel("team-a"), map[string]any{"paused": true}, false}
		},
		"deleteChannel": func() request {
			return request{"DELETE", "/v1/notification-channels/" + a.fixtureChannel("team-a"), nil, false}
		},
		"testChannel": func() request {
			return request{"POST", "/v1/notification-channels/" + a.fixtureChannel("team-a") + "/test", nil, false}
		},
		"createRule": func() request {
			return request{"POST", "/v1/notification-rules", ruleBody("team-a", "r-"+uuid.NewString()[:8], a.fixtureChannel("team-a")), false}
		},
		"listRules": func() request { return request{"GET", "/v1/notification-rules?namespace=team-a", nil, false} },
		"getRule":   func() request { return request{"GET", "/v1/notification-rules/" + a.fixtureRule("team-a"), nil, false} },
		"updateRule": func() request {
			return request{"PATCH", "/v1/notification-rules/" + a.fixtureRule("team-a"), map[string]any{"paused": true}, false}
		},
		"deleteRule": func() request {
			return request{"DELETE", "/v1/notification-rules/" + a.fixtureRule("team-a"), nil, false}
		},
		"testRule": func() request {
			return request{"POST", "/v1/notification-rules/" + a.fixtureRule("team-a") + "/test", nil, false}
		},
		"listNotifications": func() request { return request{"GET", "/v1/notifications?namespace=team-a", nil, false} },
		"listDeadEvents":    func() request { return request{"GET", "/v1/dead-events?namespace=team-a", nil, false} },
		"getNotification": func() request {
			n := insertNotification(a.t, a.store, model.Notification{Namespace: "team-a", State: model.NotificationPending})
			return request{"GET", "/v1/notifications/" + n.ID.String(), nil, false}
		},
	}
}

// Every operation of the OpenAPI document, called without a key, with a
// bad one, and with each role in the resource's namespace, in another
// namespace and in every namespace, answers 401, 403 or 404 exactly when
// its x-tock-permission says so. An operation added to the document
// without a case here fails the test (and without a permission, New).
func TestEveryOperationChecksItsPermission(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	doc, err := specDoc()
	if err != nil {
		t.Fatal(err)
	}
	perms, err := permissions(doc)
	if err != nil {
		t.Fatal(err)
	}
	cases := operationCases(a)
	type who struct {
		name, ns string
		role     auth.Role
		key      string
	}
	var callers []who
	for _, ns := range []string{"team-a", "team-b", auth.AllNamespaces} {
		for _, r := range auth.Roles {
			role, _ := auth.ParseRole(r)
			callers = append(callers, who{r + "@" + ns, ns, role, a.key(ns, r, nil)})
		}
	}
	bad, _ := auth.NewKey()
	for op, p := range perms {
		mk := cases[op]
		if mk == nil {
			t.Errorf("operation %s has no case in this test", op)
			continue
		}
		t.Run(op, func(t *testing.T) {
			// No key, and a key nobody made.
			for _, key := range []string{"", bad.String(), "not-a-key"} {
				req := mk()
				r := a.as(key, req.method, req.path, req.body)
				if p.Scope == "public" {
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
						t.Errorf("public %s with key %q: %d %s", op, key, r.status, r.body)
					}
					continue
				}
				if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s with key %q: %d (WWW-Authenticate %q), want 401 %s", op, key, r.status, r.header.Get("WWW-Authenticate"), r.body)
				} else if pr := r.problem(t); pr.Errors == nil || (*pr.Errors)[0].Field != "Authorization" {
					t.Errorf("%s: 401 does not name Authorization: %s", op, r.body)
				}
			}
			if p.Scope == "public" {
				return
			}
			for _, c := range callers {
				req := mk()
				r := a.as(c.key, req.method, req.path, req.body)
				var allowed bool
				switch {
				case c.ns == auth.AllNamespaces:
					allowed = c.role >= p.Role
				case p.Scope == "cluster":
					allowed = false
				case c.ns == "team-a" || p.Scope == "any" || p.Scope == "query" && !strings.Contains(req.path, "namespace="):
					// A list that names no namespace lists the key's
					// own (TestKeyListsItsNamespace).
					allowed = c.role >= p.Role
				}
				switch {
				case allowed:
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden ||
						(r.status == http.StatusNotFound && !req.missing) || r.status >= 500 && r.status != http.StatusServiceUnavailable {
						t.Errorf("%s as %s: %d, want it allowed: %s", op, c.name, r.status, r.body)
					}
				case c.ns == "team-b" && slices.Contains([]string{"job", "execution", "key", "channel", "rule", "notification"}, p.Scope):
					// Another namespace's job, execution, key, channel,
					// rule or notification does not exist for this key.
					if r.status != http.StatusNotFound {
						t.Errorf("%s as %s: %d, want 404: %s", op, c.name, r.status, r.body)
					}
				default:
					if r.status != http.StatusForbidden {
						t.Errorf("%s as %s: %d, want 403: %s", op, c.name, r.status, r.body)
						continue
					}
					detail := deref(r.problem(t).Detail)
					if !strings.Contains(detail, p.Action) {
						t.Errorf("%s as %s: 403 detail %q does not name the action %s", op, c.name, detail, p.Action)
					}
					if c.ns == "team-a" && p.Scope != "cluster" {
						if want := fmt.Sprintf("role %s in namespace team-a does not allow %s", c.role, p.Action); detail != want {
							t.Errorf("%s as %s: 403 detail %q, want %q", op, c.name, detail, want)
						}
					}
				}
			}
		})
	}
	for op := range cases {
		if _, ok := perms[op]; !ok {
			t.Errorf("case %s is not an operation of the document", op)
		}
	}
}

// A key lists its own namespace's jobs, executions and namespaces when
// it names none, and cannot name another.
func TestKeyListsItsNamespace(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	mine, theirs := a.fixtureJob("team-a"), a.fixtureJob("team-b")
	a.fixtureExecution("team-a")
	a.fixtureExecution("team-b")
	reader := a.key("team-a", "reader", nil)

	r := a.as(reader, "GET", "/v1/jobs", nil)
	mustStatus(t, r, http.StatusOK)
	var jl models.JobList
	r.decode(t, &jl)
	var ids []string
	for _, j := range jl.Items {
		ids = append(ids, j.Id.String())
	}
	if !slices.Contains(ids, mine) || slices.Contains(ids, theirs) {
		t.Errorf("team-a reader lists %v; want team-a's job %s and not team-b's %s", ids, mine, theirs)
	}
	r = a.as(reader, "GET", "/v1/executions", nil)
	mustStatus(t, r, http.StatusOK)
	var el models.ExecutionList
	r.decode(t, &el)
	if len(el.Items) == 0 {
		t.Error("team-a reader lists no execution")
	}
	for _, x := range el.Items {
		if x.Namespace != "team-a" {
			t.Errorf("team-a reader lists an execution of %s", x.Namespace)
		}
	}
	r = a.as(reader, "GET", "/v1/namespaces", nil)
	mustStatus(t, r, http.StatusOK)
	var nl models.NamespaceList
	r.decode(t, &nl)
	if len(nl.Items) != 1 || nl.Items[0].Name != "team-a" {
		t.Errorf("team-a reader sees namespaces %+v", nl.Items)
	}
	for _, path := range []string{"/v1/jobs?namespace=team-b", "/v1/executions?namespace=team-b", "/v1/stats?namespace=team-b"} {
		if r := a.as(reader, "GET", path, nil); r.status != http.StatusForbidden {
			t.Errorf("GET %s as team-a reader: %d, want 403", path, r.status)
		}
	}
	// A job of team-b named in a job listing's filter shows nothing.
	r = a.as(reader, "GET", "/v1/executions?job_id="+theirs, nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &el)
	if len(el.Items) != 0 {
		t.Errorf("team-a reader filtering by team-b's job sees %d executions", len(el.Items))
	}
}

// Keys through the API: shown once, listed without their secret, usable
// at once, limited to their maker's role and namespace, refused on the
// node that deletes them at once and on the others within keyTTL.
func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	adminA := a.key("team-a", "admin", nil)

	r := a.as(adminA, "POST", "/v1/keys", map[string]any{"namespace": "team-a", "role": "editor", "name": "deploy", "expires_in": "90d"})
	mustStatus(t, r, http.StatusCreated)
	var made models.KeyCreated
	r.decode(t, &made)
	if !strings.HasPrefix(made.Key, "tock_"+made.Id+"_") || made.Role != "editor" || made.Namespace != "team-a" ||
		made.CreatedBy == "" || made.ExpiresAt == nil || time.Until(*made.ExpiresAt) < 89*24*time.Hour {
		t.Fatalf("created %+v", made)
	}
	r = a.as(made.Key, "POST", "/v1/jobs", map[string]any{"namespace": "team-a", "name": "by-new-key",
		"schedule": map[string]any{"cron": "0 0 * * * *"}, "handler": map[string]any{"type": "nats", "subject": "work.x"}})
	mustStatus(t, r, http.StatusCreated)

	unused, _ := auth.ParseKey(a.key("team-a", "reader", nil))
	r = a.as(adminA, "GET", "/v1/keys", nil)
	mustStatus(t, r, http.StatusOK)
	if strings.Contains(string(r.body), made.Key[len("tock_"+made.Id+"_"):]) {
		t.Fatal("the key list shows a secret")
	}
	var kl models.KeyList
	r.decode(t, &kl)
	var listed []string
	for _, k := range kl.Items {
		listed = append(listed, k.Id)
		if k.Namespace != "team-a" {
			t.Errorf("team-a admin lists a key of %s", k.Namespace)
		}
		// The new key was used (it created a job); the unused one never.
		if k.Id == made.Id && (k.LastUsedAt == nil || time.Since(*k.LastUsedAt) > time.Minute) {
			t.Errorf("the used key's last_used_at is %v", k.LastUsedAt)
		}
		if k.Id == unused.ID && k.LastUsedAt != nil {
			t.Errorf("an unused key's last_used_at is %v", k.LastUsedAt)
		}
	}
	if !slices.Contains(listed, made.Id) || !slices.Contains(listed, unused.ID) {
		t.Errorf("keys %v do not include %s and %s", listed, made.Id, unused.ID)
	}

	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"namespace": "*", "role": "reader"}, "namespace"},
		{map[string]any{"namespace": "team-b", "role": "reader"}, "namespace"},
	} {
		r := a.as(adminA, "POST", "/v1/keys", c.body)
		if r.status != http.StatusForbidden {
			t.Errorf("team-a admin creating %v: %d, want 403", c.body, r.status)
		} else if pr := r.problem(t); (*pr.Errors)[0].Field != c.field {
			t.Errorf("403 names %v", pr.Errors)
		}
	}
	if r := a.as(made.Key, "POST", "/v1/keys", map[string]any{"namespace": "team-a", "role": "reader"}); r.status != http.StatusForbidden {
		t.Errorf("an editor creating a key: %d, want 403", r.status)
	}
	for body, field := range map[string]string{
		`{"namespace": "team-a", "role": "root"}`:                      "role",
		`{"namespace": "team a", "role": "reader"}`:                    "namespace",
		`{"namespace": "team-a", "role": "reader", "expires_in": "x"}`: "expires_in",
		`{"role": "reader"}`:                                           "namespace",
		`{"namespace": "team-a", "role": "reader", "secret": "mine"}`:  "secret",
	} {
		r := a.as(adminA, "POST", "/v1/keys", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("POST /v1/keys %s: %d, want 400", body, r.status)
			continue
		}
		if pr := r.problem(t); pr.Errors == nil || !slices.ContainsFunc(*pr.Errors, func(e models.FieldError) bool { return e.Field == field }) {
			t.Errorf("POST /v1/keys %s: errors %s do not name %s", body, r.body, field)
		}
	}

	// A second node over the same database keeps the key it verified
	// for keyTTL at most.
	other := newEnvWith(t, a.store, func(c *Config) { c.Open = false })
	check := func(e *env) int {
		return e.doHeaders("GET", "/v1/jobs", nil, map[string]string{"Authorization": "Bearer " + made.Key}).status
	}
	if got := check(other); got != http.StatusOK {
		t.Fatalf("the other node: %d", got)
	}
	mustStatus(t, a.as(adminA, "DELETE", "/v1/keys/"+made.Id, nil), http.StatusNoContent)
	if got := check(a.env); got != http.StatusUnauthorized {
		t.Errorf("the deleting node still accepts the key: %d", got)
	}
	testenv.WaitFor(t, keyTTL+5*time.Second, "the other node to refuse the deleted key", func() bool {
		return check(other) == http.StatusUnauthorized
	})
	if r := a.as(adminA, "DELETE", "/v1/keys/"+made.Id, nil); r.status != http.StatusNotFound {
		t.Errorf("deleting it again: %d", r.status)
	}
}

// An expired key is refused with a detail that says so; a key with
// another's secret, or a malformed Authorization header, is refused.
func TestRefusedKeys(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	past := time.Now().Add(-time.Minute)
	expired := a.key("team-a", "admin", &past)
	r := a.as(expired, "GET", "/v1/jobs", nil)
	if r.status != http.StatusUnauthorized || !strings.Contains(deref(r.problem(t).Detail), "expired") ||
		!strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("expired key: %d %s %q", r.status, r.body, r.header.Get("WWW-Authenticate"))
	}
	good, _ := auth.ParseKey(a.key("team-a", "admin", nil))
	forged := auth.Key{ID: good.ID, Secret: strings.Repeat("A", auth.SecretLen)}
	if r := a.as(forged.String(), "GET", "/v1/jobs", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a key's id with another secret: %d", r.status)
	}
	for _, h := range []string{"Basic " + good.String(), good.String(), "Bearer", "Bearer  "} {
		if r := a.doHeaders("GET", "/v1/jobs", nil, map[string]string{"Authorization": h}); r.status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d", h, r.status)
		}
	}
	// The health checks and the document need no key.
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if r := a.as("", "GET", path, nil); r.status != http.StatusOK {
			t.Errorf("GET %s without a key: %d", path, r.status)
		}
	}
	// An unauthenticated write with an Idempotency-Key claims nothing:
	// the same key then works for an authorised request.
	h := map[string]string{"Idempotency-Key": "k-1"}
	if r := a.doHeaders("POST", "/v1/jobs", jobBody("idem"), h); r.status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d", r.status)
	}
	h["Authorization"] = "Bearer " + a.admin
	mustStatus(t, a.doHeaders("POST", "/v1/jobs", jobBody("idem"), h), http.StatusCreated)
}
