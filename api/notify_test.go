package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// The secrets the notification tests give channels; none may appear in
// an answer, the audit trail or a stored row in clear.
const (
	hookSecret = "hook-s3cret-0123456789abcdef"
	slackURL   = "https://hooks.slack.com/services/T0001/B0002/sl4ckS3cretXYZ"
	slackPath  = "sl4ckS3cret"
)

// noChannelSecret fails the test if what shows a channel's secret.
func noChannelSecret(t *testing.T, where string, what []byte) {
	t.Helper()
	for _, v := range []string{hookSecret, "hook-s3cret", slackPath, "/services/T0001"} {
		if bytes.Contains(what, []byte(v)) {
			t.Errorf("%s shows a channel's secret (%q): %s", where, v, what)
		}
	}
}

// fakeNotifier answers every test message with attempt, and records
// what it was asked to send.
type fakeNotifier struct {
	mu      sync.Mutex
	attempt model.DeliveryAttempt
	calls   []notifierCall
}

type notifierCall struct {
	channel model.Channel
	rule    *model.Rule
}

func (f *fakeNotifier) Test(_ context.Context, c *model.Channel, r *model.Rule) model.DeliveryAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, notifierCall{*c, r})
	a := f.attempt
	if a.At.IsZero() && a.Error == "" && a.Status == 0 {
		a = model.DeliveryAttempt{At: time.Now(), Status: http.StatusOK, TookMS: 12}
	}
	return a
}

func (f *fakeNotifier) set(a model.DeliveryAttempt) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempt, f.calls = a, nil
}

func (f *fakeNotifier) called() []notifierCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// notifyEnv is an open API over a real store with a keyring and a fake
// notifier.
func notifyEnv(t *testing.T) (*env, *fakeNotifier) {
	t.Helper()
	st := openStore(t)
	n := &fakeNotifier{}
	keys := testenv.Keyring(t)
	e := newEnvWith(t, st, func(c *Config) { c.Secrets, c.Notifier = keys, n })
	e.store = st
	return e, n
}

// channelBody is a valid webhook channel of namespace ns.
func channelBody(ns, name string) map[string]any {
	return map[string]any{"namespace": ns, "name": name, "type": "webhook", "url": "https://example.com/hook", "secret": hookSecret}
}

// ruleBody is a valid rule of namespace ns sending to channels.
func ruleBody(ns, name string, channels ...string) map[string]any {
	return map[string]any{"namespace": ns, "name": name, "events": []string{"execution.dead"}, "channels": channels}
}

func (e *env) createChannel(body map[string]any) models.Channel {
	e.t.Helper()
	r := e.do("POST", "/v1/notification-channels", body)
	mustStatus(e.t, r, http.StatusCreated)
	var c models.Channel
	r.decode(e.t, &c)
	return c
}

func (e *env) createRule(body map[string]any) models.Rule {
	e.t.Helper()
	r := e.do("POST", "/v1/notification-rules", body)
	mustStatus(e.t, r, http.StatusCreated)
	var out models.Rule
	r.decode(e.t, &out)
	return out
}

// fixtureChannel makes, with the admin key, a channel in ns and returns
// its id.
func (a *authEnv) fixtureChannel(ns string) string {
	a.t.Helper()
	r := a.as(a.admin, "POST", "/v1/notification-channels", channelBody(ns, "c-"+uuid.NewString()[:8]))
	mustStatus(a.t, r, http.StatusCreated)
	var c models.Channel
	r.decode(a.t, &c)
	return c.Id.String()
}

// fixtureRule makes, with the admin key, a rule in ns (with a channel of
// its own) and returns its id.
func (a *authEnv) fixtureRule(ns string) string {
	a.t.Helper()
	r := a.as(a.admin, "POST", "/v1/notification-rules", ruleBody(ns, "r-"+uuid.NewString()[:8], a.fixtureChannel(ns)))
	mustStatus(a.t, r, http.StatusCreated)
	var out models.Rule
	r.decode(a.t, &out)
	return out.Id.String()
}

// insertNotification stores n as it is (its zero fields filled in), as a
// deliverer's grouping would have made it: no store function makes one
// but GroupNotifications.
func insertNotification(t *testing.T, st *store.Store, n model.Notification) model.Notification {
	t.Helper()
	if n.ID == uuid.Nil {
		n.ID = uuid.Must(uuid.NewV7())
	}
	for _, id := range []*uuid.UUID{&n.RuleID, &n.ChannelID} {
		if *id == uuid.Nil {
			*id = uuid.New()
		}
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	}
	if n.Kinds == nil {
		n.Kinds = []string{domain.NotifyExecutionDead}
	}
	if n.JobIDs == nil {
		n.JobIDs = []uuid.UUID{}
	}
	if n.Body == nil {
		n.Body = json.RawMessage(`{"id":"` + n.ID.String() + `","text":"a job died"}`)
	}
	if n.AttemptLog == nil {
		n.AttemptLog = []model.DeliveryAttempt{}
	}
	log, err := json.Marshal(n.AttemptLog)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Pool().Exec(context.Background(), `INSERT INTO notifications (id, namespace, rule_id, channel_id, state,
		kinds, job_ids, body, created_at, next_attempt_at, attempts, attempt_log, sent_at, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		n.ID, n.Namespace, n.RuleID, n.ChannelID, n.State, n.Kinds, n.JobIDs, []byte(n.Body), n.CreatedAt, n.NextAttemptAt,
		n.Attempts, log, n.SentAt, n.LastError)
	if err != nil {
		t.Fatalf("insert notification: %v", err)
	}
	return n
}

// Channels through the API: a webhook's secret and a Slack channel's
// URL are sealed (the row holds neither in clear) and never shown (a
// webhook's URL is, a Slack URL as its scheme and host); lists, gets,
// changes and deletes; a name taken is a 409.
func TestChannelsLifecycle(t *testing.T) {
	t.Parallel()
	e, _ := notifyEnv(t)

	r := e.do("POST", "/v1/notification-channels", map[string]any{"name": "hook", "type": "webhook",
		"url": "https://example.com/hook?team=payments", "secret": hookSecret})
	mustStatus(t, r, http.StatusCreated)
	noChannelSecret(t, "POST webhook", r.body)
	var hook models.Channel
	r.decode(t, &hook)
	if hook.Namespace != "default" || hook.Name != "hook" || hook.Type != models.ChannelTypeWebhook ||
		hook.Url != "https://example.com/hook?team=payments" || !hook.SecretSet || hook.Paused {
		t.Fatalf("webhook channel as created: %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/notification-channels/"+hook.Id.String() {
		t.Errorf("Location %q", loc)
	}
	r = e.do("POST", "/v1/notification-channels", map[string]any{"namespace": "team-a", "name": "slack", "type": "slack", "url": slackURL})
	mustStatus(t, r, http.StatusCreated)
	noChannelSecret(t, "POST slack", r.body)
	var slack models.Channel
	r.decode(t, &slack)
	if slack.Url != "https://hooks.slack.com" || !slack.SecretSet || slack.Namespace != "team-a" {
		t.Fatalf("slack channel as created: %s", r.body)
	}

	// The rows hold the secrets sealed.
	for _, id := range []uuid.UUID{hook.Id, slack.Id} {
		var row, sealed []byte
		var kid string
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT row_to_json(c)::text, secret, secret_key_id FROM notification_channels c WHERE id = $1`, id).
			Scan(&row, &sealed, &kid); err != nil {
			t.Fatal(err)
		}
		noChannelSecret(t, "the stored row", row)
		if len(sealed) == 0 || kid == "" {
			t.Errorf("channel %s: secret %d bytes under key %q", id, len(sealed), kid)
		}
	}

	// Every answer that shows them.
	for _, path := range []string{"/v1/notification-channels", "/v1/notification-channels?namespace=team-a",
		"/v1/notification-channels/" + hook.Id.String(), "/v1/notification-channels/" + slack.Id.String()} {
		r := e.do("GET", path, nil)
		mustStatus(t, r, http.StatusOK)
		noChannelSecret(t, "GET "+path, r.body)
	}
	var l models.ChannelList
	e.do("GET", "/v1/notification-channels", nil).decode(t, &l)
	if len(l.Items) != 2 || l.Items[0].Id != hook.Id || l.Items[1].Id != slack.Id {
		t.Errorf("list of every namespace: %+v", l.Items)
	}
	e.do("GET", "/v1/notification-channels?namespace=team-a", nil).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Id != slack.Id {
		t.Errorf("list of team-a: %+v", l.Items)
	}

	// Changes: a name, paused, a new URL on the same origin (the secret
	// kept), a new secret; a Slack channel's new URL.
	var stored model.Channel
	if c, err := e.store.GetChannel(e.ctx, hook.Id); err == nil {
		stored = *c
	}
	r = e.do("PATCH", "/v1/notification-channels/"+hook.Id.String(), map[string]any{"name": "hook-2", "paused": true,
		"url": "https://EXAMPLE.com:443/other"})
	mustStatus(t, r, http.StatusOK)
	var got models.Channel
	r.decode(t, &got)
	if got.Name != "hook-2" || !got.Paused || got.Url != "https://EXAMPLE.com:443/other" || !got.SecretSet {
		t.Errorf("patched: %s", r.body)
	}
	if c, _ := e.store.GetChannel(e.ctx, hook.Id); !bytes.Equal(c.Secret, stored.Secret) {
		t.Error("a change of URL on the same origin replaced the secret")
	}
	r = e.do("PATCH", "/v1/notification-channels/"+hook.Id.String(), map[string]any{"url": "https://elsewhere.example.net/h",
		"secret": "another-secret-0123456789"})
	mustStatus(t, r, http.StatusOK)
	noChannelSecret(t, "PATCH", r.body)
	if c, _ := e.store.GetChannel(e.ctx, hook.Id); bytes.Equal(c.Secret, stored.Secret) || c.Version != stored.Version+2 {
		t.Errorf("the new secret was not stored (version %d, was %d)", c.Version, stored.Version)
	}
	r = e.do("PATCH", "/v1/notification-channels/"+slack.Id.String(), map[string]any{"url": "https://chat.example.org/hooks/" + slackPath})
	mustStatus(t, r, http.StatusOK)
	noChannelSecret(t, "PATCH slack", r.body)
	if r.decode(t, &got); got.Url != "https://chat.example.org" {
		t.Errorf("slack after a new url: %s", r.body)
	}

	// A name taken, in the same namespace only.
	r = e.do("POST", "/v1/notification-channels", channelBody("default", "hook-2"))
	mustStatus(t, r, http.StatusConflict)
	if p := r.problem(t); p.Type != ProblemConflict {
		t.Errorf("problem %+v", p)
	}
	e.createChannel(channelBody("team-a", "hook-2"))
	mustStatus(t, e.do("PATCH", "/v1/notification-channels/"+slack.Id.String(), map[string]any{"name": "hook-2"}), http.StatusConflict)

	// Delete; then it is gone.
	mustStatus(t, e.do("DELETE", "/v1/notification-channels/"+hook.Id.String(), nil), http.StatusNoContent)
	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/notification-channels/" + hook.Id.String()}, {"DELETE", "/v1/notification-channels/" + hook.Id.String()},
		{"POST", "/v1/notification-channels/" + hook.Id.String() + "/test"},
	} {
		r := e.do(rq.method, rq.path, nil)
		mustStatus(t, r, http.StatusNotFound)
		if p := r.problem(t); !strings.Contains(deref(p.Detail), "No notification channel with id") {
			t.Errorf("%s %s: %s", rq.method, rq.path, r.body)
		}
	}
	r = e.do("PATCH", "/v1/notification-channels/"+hook.Id.String(), map[string]any{"paused": false})
	mustStatus(t, r, http.StatusNotFound)
	mustStatus(t, e.do("GET", "/v1/notification-channels/not-a-uuid", nil), http.StatusBadRequest)
	noChannelSecret(t, "the server's log", []byte(e.logs.String()))
}

// Every bad field of a channel is a 400 naming it, never quoting a
// secret; on create and on PATCH.
func TestChannelValidation(t *testing.T) {
	t.Parallel()
	e, _ := notifyEnv(t)
	with := func(changes map[string]any) map[string]any {
		b := channelBody("default", "valid")
		for k, v := range changes {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	long := strings.Repeat("x", 4097)
	for name, c := range map[string]struct {
		body  any
		field string
	}{
		"no name":              {with(map[string]any{"name": nil}), "name"},
		"bad name":             {with(map[string]any{"name": "has space"}), "name"},
		"long name":            {with(map[string]any{"name": strings.Repeat("n", 201)}), "name"},
		"empty namespace":      {with(map[string]any{"namespace": ""}), "namespace"},
		"bad namespace":        {with(map[string]any{"namespace": "team/a"}), "namespace"},
		"no type":              {with(map[string]any{"type": nil}), "type"},
		"unknown type":         {with(map[string]any{"type": "email"}), "type"},
		"type not a string":    {with(map[string]any{"type": 1}), "type"},
		"no url":               {with(map[string]any{"url": nil}), "url"},
		"empty url":            {with(map[string]any{"url": ""}), "url"},
		"not http":             {with(map[string]any{"url": "ftp://example.com/x"}), "url"},
		"relative url":         {with(map[string]any{"url": "/hook"}), "url"},
		"not a url":            {with(map[string]any{"url": "http://[::1"}), "url"},
		"long url":             {with(map[string]any{"url": "https://example.com/" + long}), "url"},
		"private address":      {with(map[string]any{"url": "http://10.0.0.5/hook"}), "url"},
		"loopback":             {with(map[string]any{"url": "http://127.0.0.1:2379/v3/kv/range"}), "url"},
		"metadata":             {with(map[string]any{"url": "http://169.254.169.254/latest"}), "url"},
		"credentials":          {with(map[string]any{"url": "https://user:pw@example.com/"}), "url"},
		"no secret":            {with(map[string]any{"secret": nil}), "secret"},
		"short secret":         {with(map[string]any{"secret": "short"}), "secret"},
		"long secret":          {with(map[string]any{"secret": long}), "secret"},
		"secret not a string":  {with(map[string]any{"secret": 42}), "secret"},
		"slack with a secret":  {with(map[string]any{"type": "slack", "url": slackURL}), "secret"},
		"slack without a path": {with(map[string]any{"type": "slack", "url": "https://hooks.slack.com", "secret": nil}), "url"},
		"slack to a private":   {with(map[string]any{"type": "slack", "url": "http://192.168.1.1/services/x", "secret": nil}), "url"},
		"unknown field":        {with(map[string]any{"headers": map[string]any{}}), "headers"},
		"paused on create":     {with(map[string]any{"paused": true}), "paused"},
		"not an object":        {`[]`, "body"},
		"not JSON":             {`{"name":`, "body"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do("POST", "/v1/notification-channels", c.body)
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation || !hasField(p, c.field) {
				t.Errorf("errors %s, want %s", fieldsOf(p), c.field)
			}
			noChannelSecret(t, "the problem", r.body)
		})
	}
	// Every fault at once.
	r := e.do("POST", "/v1/notification-channels", map[string]any{"name": "a b", "type": "webhook", "url": "http://10.1.1.1/", "secret": "x"})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "name") || !hasField(p, "url") || !hasField(p, "secret") {
		t.Errorf("every fault: %s", fieldsOf(p))
	}

	hook := e.createChannel(channelBody("default", "hook"))
	slack := e.createChannel(map[string]any{"name": "slack", "type": "slack", "url": slackURL})
	for name, c := range map[string]struct {
		id    uuid.UUID
		body  any
		field string
	}{
		"another origin without a secret": {hook.Id, map[string]any{"url": "https://other.example.net/hook"}, "secret"},
		"another port without a secret":   {hook.Id, map[string]any{"url": "https://example.com:8443/hook"}, "secret"},
		"a short secret":                  {hook.Id, map[string]any{"secret": "x"}, "secret"},
		"a refused url":                   {hook.Id, map[string]any{"url": "http://localhost:8080/", "secret": hookSecret}, "url"},
		"a bad name":                      {hook.Id, map[string]any{"name": ""}, "name"},
		"a type":                          {hook.Id, map[string]any{"type": "slack"}, "type"},
		"a namespace":                     {hook.Id, map[string]any{"namespace": "team-a"}, "namespace"},
		"paused not a bool":               {hook.Id, map[string]any{"paused": "yes"}, "paused"},
		"null url":                        {hook.Id, map[string]any{"url": nil}, "url"},
		"a slack secret":                  {slack.Id, map[string]any{"secret": hookSecret}, "secret"},
		"a slack url without a path":      {slack.Id, map[string]any{"url": "https://hooks.slack.com/"}, "url"},
	} {
		t.Run("PATCH "+name, func(t *testing.T) {
			r := e.do("PATCH", "/v1/notification-channels/"+c.id.String(), c.body)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, c.field) {
				t.Errorf("errors %s, want %s", fieldsOf(p), c.field)
			}
			noChannelSecret(t, "the problem", r.body)
		})
	}
	noChannelSecret(t, "the server's log", []byte(e.logs.String()))
}

// A server without --secret-key-file refuses a channel's secret with a
// 400 naming it (a Slack channel's url), as it refuses secret headers.
func TestChannelsWithoutKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for field, body := range map[string]map[string]any{
		"secret": channelBody("default", "hook"),
		"url":    {"name": "slack", "type": "slack", "url": slackURL},
	} {
		r := e.do("POST", "/v1/notification-channels", body)
		mustStatus(t, r, http.StatusBadRequest)
		noChannelSecret(t, "the problem", r.body)
		if p := r.problem(t); !hasField(p, field) || !strings.Contains(fieldsOf(p), "no --secret-key-file") {
			t.Errorf("%v: %s, want %s", body, fieldsOf(p), field)
		}
	}
	// Without a notifier, tests are a 503.
	ch, err := e.store.CreateChannel(e.ctx, model.Channel{Namespace: "default", Name: "stored", Type: "webhook", URL: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/v1/notification-channels/"+ch.ID.String()+"/test", nil)
	mustStatus(t, r, http.StatusServiceUnavailable)
	if p := r.problem(t); p.Type != ProblemUnavailable {
		t.Errorf("problem %+v", p)
	}
}

// Rules through the API: the defaults of what is left out, lists, gets,
// changes (pausing and resuming among them), deletes; a deleted channel
// leaves its rules.
func TestRulesLifecycle(t *testing.T) {
	t.Parallel()
	e, _ := notifyEnv(t)
	a := e.createChannel(channelBody("team-a", "a"))
	b := e.createChannel(channelBody("team-a", "b"))

	r := e.do("POST", "/v1/notification-rules", ruleBody("team-a", "payments", a.Id.String()))
	mustStatus(t, r, http.StatusCreated)
	var rule models.Rule
	r.decode(t, &rule)
	if rule.Namespace != "team-a" || rule.Name != "payments" || rule.Selector != "" || len(rule.Events) != 1 ||
		rule.Events[0] != models.NotifyEventExecutionDead || len(rule.Channels) != 1 || rule.Channels[0] != a.Id ||
		rule.FailingAfter != 3 || rule.SilentGrace != "1m" || rule.LateAfter != "1m" || rule.SlowAfter != "10m" ||
		rule.GroupInterval != "1m" || rule.Paused || rule.LastSentAt != nil {
		t.Fatalf("rule with defaults: %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/notification-rules/"+rule.Id.String() {
		t.Errorf("Location %q", loc)
	}
	full := e.createRule(map[string]any{"namespace": "team-a", "name": "all", "selector": "team=payments,tier!=batch",
		"events": domain.NotifyKinds, "channels": []string{b.Id.String(), a.Id.String()}, "failing_after": 5,
		"silent_grace": "0s", "late_after": "90s", "slow_after": "168h", "group_interval": "24h", "paused": true})
	if full.Selector != "team=payments,tier!=batch" || len(full.Events) != len(domain.NotifyKinds) || full.Channels[0] != b.Id ||
		full.FailingAfter != 5 || full.SilentGrace != "0s" || full.LateAfter != "1m30s" || full.SlowAfter != "168h" ||
		full.GroupInterval != "24h" || !full.Paused {
		t.Errorf("rule with every field: %+v", full)
	}
	// The default namespace when none is given.
	c := e.createChannel(channelBody("default", "d"))
	body := ruleBody("", "default-rule", c.Id.String())
	delete(body, "namespace")
	if got := e.createRule(body); got.Namespace != "default" {
		t.Errorf("namespace %q", got.Namespace)
	}

	var l models.RuleList
	mustStatus(t, e.do("GET", "/v1/notification-rules?namespace=team-a", nil), http.StatusOK)
	e.do("GET", "/v1/notification-rules?namespace=team-a", nil).decode(t, &l)
	if len(l.Items) != 2 || l.Items[0].Name != "all" || l.Items[1].Name != "payments" {
		t.Errorf("team-a's rules: %+v", l.Items)
	}
	e.do("GET", "/v1/notification-rules", nil).decode(t, &l)
	if len(l.Items) != 3 {
		t.Errorf("every rule: %+v", l.Items)
	}
	r = e.do("GET", "/v1/notification-rules/"+rule.Id.String(), nil)
	mustStatus(t, r, http.StatusOK)

	// PATCH replaces what it gives; paused pauses and resumes.
	path := "/v1/notification-rules/" + rule.Id.String()
	r = e.do("PATCH", path, map[string]any{"events": []string{"job.failing", "job.recovered"}, "channels": []string{b.Id.String()},
		"failing_after": 2, "late_after": "5m", "selector": "team=payments"})
	mustStatus(t, r, http.StatusOK)
	var got models.Rule
	r.decode(t, &got)
	if len(got.Events) != 2 || got.Events[1] != models.NotifyEventJobRecovered || len(got.Channels) != 1 || got.Channels[0] != b.Id ||
		got.FailingAfter != 2 || got.LateAfter != "5m" || got.Selector != "team=payments" || got.Name != "payments" || got.SlowAfter != "10m" {
		t.Errorf("patched: %s", r.body)
	}
	for _, paused := range []bool{true, false} {
		r = e.do("PATCH", path, map[string]any{"paused": paused})
		mustStatus(t, r, http.StatusOK)
		if r.decode(t, &got); got.Paused != paused || got.FailingAfter != 2 {
			t.Errorf("paused %v: %s", paused, r.body)
		}
	}
	mustStatus(t, e.do("PATCH", path, map[string]any{"name": "all"}), http.StatusConflict)
	mustStatus(t, e.do("POST", "/v1/notification-rules", ruleBody("team-a", "all", a.Id.String())), http.StatusConflict)

	// Deleting a channel takes it out of its rules.
	mustStatus(t, e.do("DELETE", "/v1/notification-channels/"+b.Id.String(), nil), http.StatusNoContent)
	e.do("GET", path, nil).decode(t, &got)
	if len(got.Channels) != 0 {
		t.Errorf("a deleted channel stays in its rule: %+v", got.Channels)
	}
	e.do("GET", "/v1/notification-rules/"+full.Id.String(), nil).decode(t, &got)
	if len(got.Channels) != 1 || got.Channels[0] != a.Id {
		t.Errorf("rule all after b's deletion: %+v", got.Channels)
	}

	mustStatus(t, e.do("DELETE", path, nil), http.StatusNoContent)
	for _, rq := range []struct{ method, path string }{{"GET", path}, {"DELETE", path}, {"POST", path + "/test"}} {
		r := e.do(rq.method, rq.path, nil)
		mustStatus(t, r, http.StatusNotFound)
		if p := r.problem(t); !strings.Contains(deref(p.Detail), "No notification rule with id") {
			t.Errorf("%s %s: %s", rq.method, rq.path, r.body)
		}
	}
	mustStatus(t, e.do("PATCH", path, map[string]any{"paused": true}), http.StatusNotFound)
}

// Every bad field of a rule is a 400 naming it; on create and on PATCH.
func TestRuleValidation(t *testing.T) {
	t.Parallel()
	e, _ := notifyEnv(t)
	ch := e.createChannel(channelBody("team-a", "mine")).Id.String()
	theirs := e.createChannel(channelBody("team-b", "theirs")).Id.String()
	with := func(changes map[string]any) map[string]any {
		b := ruleBody("team-a", "valid", ch)
		for k, v := range changes {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	many := make([]string, 21)
	for i := range many {
		many[i] = uuid.NewString()
	}
	cases := map[string]struct {
		body  any
		field string
	}{
		"no name":                   {with(map[string]any{"name": nil}), "name"},
		"bad name":                  {with(map[string]any{"name": "a/b"}), "name"},
		"bad namespace":             {with(map[string]any{"namespace": "a b"}), "namespace"},
		"bad selector":              {with(map[string]any{"selector": "=payments"}), "selector"},
		"bad selector key":          {with(map[string]any{"selector": "-x=1"}), "selector"},
		"long selector":             {with(map[string]any{"selector": strings.Repeat("a", 4097)}), "selector"},
		"no events":                 {with(map[string]any{"events": nil}), "events"},
		"empty events":              {with(map[string]any{"events": []string{}}), "events"},
		"unknown event":             {with(map[string]any{"events": []string{"execution.dead", "job.exploded"}}), "events[1]"},
		"repeated event":            {with(map[string]any{"events": []string{"job.silent", "job.silent"}}), "events[1]"},
		"events not an array":       {with(map[string]any{"events": "execution.dead"}), "events"},
		"no channels":               {with(map[string]any{"channels": nil}), "channels"},
		"empty channels":            {with(map[string]any{"channels": []string{}}), "channels"},
		"unknown channel":           {with(map[string]any{"channels": []string{ch, uuid.NewString()}}), "channels[1]"},
		"another namespace's":       {with(map[string]any{"channels": []string{theirs}}), "channels[0]"},
		"repeated channel":          {with(map[string]any{"channels": []string{ch, ch}}), "channels[1]"},
		"channel not a uuid":        {with(map[string]any{"channels": []string{"mine"}}), "channels[0]"},
		"too many channels":         {with(map[string]any{"channels": many}), "channels"},
		"failing_after 0":           {with(map[string]any{"failing_after": 0}), "failing_after"},
		"failing_after 1001":        {with(map[string]any{"failing_after": 1001}), "failing_after"},
		"failing_after 2.5":         {with(map[string]any{"failing_after": 2.5}), "failing_after"},
		"silent_grace not duration": {with(map[string]any{"silent_grace": "1 minute"}), "silent_grace"},
		"late_after negative":       {with(map[string]any{"late_after": "-1s"}), "late_after"},
		"slow_after over 7 days":    {with(map[string]any{"slow_after": "169h"}), "slow_after"},
		"late_after in days":        {with(map[string]any{"late_after": "1d"}), "late_after"},
		"group_interval over a day": {with(map[string]any{"group_interval": "25h"}), "group_interval"},
		"group_interval a number":   {with(map[string]any{"group_interval": 60}), "group_interval"},
		"paused not a bool":         {with(map[string]any{"paused": 1}), "paused"},
		"unknown field":             {with(map[string]any{"channel": ch}), "channel"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.do("POST", "/v1/notification-rules", c.body)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); p.Type != ProblemValidation || !hasField(p, c.field) {
				t.Errorf("errors %s, want %s", fieldsOf(p), c.field)
			}
		})
	}
	rule := e.createRule(ruleBody("team-a", "r", ch))
	for name, c := range cases {
		body, ok := c.body.(map[string]any)
		if !ok || name == "no name" || name == "no events" || name == "no channels" || name == "bad namespace" {
			continue
		}
		if name != "unknown field" {
			for _, k := range []string{"namespace", "name", "events", "channels"} {
				if k != c.field && !strings.HasPrefix(c.field, k+"[") {
					delete(body, k)
				}
			}
		}
		t.Run("PATCH "+name, func(t *testing.T) {
			r := e.do("PATCH", "/v1/notification-rules/"+rule.Id.String(), body)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, c.field) {
				t.Errorf("errors %s, want %s", fieldsOf(p), c.field)
			}
		})
	}
	r := e.do("PATCH", "/v1/notification-rules/"+rule.Id.String(), map[string]any{"namespace": "team-b"})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "namespace") {
		t.Errorf("a namespace in a PATCH: %s", fieldsOf(p))
	}
	// The rule is as it was.
	var got models.Rule
	e.do("GET", "/v1/notification-rules/"+rule.Id.String(), nil).decode(t, &got)
	if got.Name != "r" || len(got.Events) != 1 || len(got.Channels) != 1 || got.FailingAfter != 3 {
		t.Errorf("after refused changes: %+v", got)
	}
}

// The NotifyEvent enum of the document is domain.NotifyKinds, in its
// order.
func TestNotifyEventsDocumented(t *testing.T) {
	doc, err := specDoc()
	if err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, v := range doc.Components.Schemas["NotifyEvent"].Value.Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	if !slices.Equal(enum, domain.NotifyKinds) {
		t.Errorf("NotifyEvent enum %v, domain.NotifyKinds %v", enum, domain.NotifyKinds)
	}
}

// The test endpoints send through the Notifier, a channel alone or each
// channel of a rule with the rule, and answer with each attempt; a
// Slack URL in an attempt's error is cut to its scheme and host.
func TestNotificationTests(t *testing.T) {
	t.Parallel()
	e, n := notifyEnv(t)
	hook := e.createChannel(channelBody("default", "hook"))
	slack := e.createChannel(map[string]any{"name": "slack", "type": "slack", "url": slackURL})

	r := e.do("POST", "/v1/notification-channels/"+hook.Id.String()+"/test", nil)
	mustStatus(t, r, http.StatusOK)
	var res models.DeliveryResult
	r.decode(t, &res)
	if !res.Delivered || deref(res.Status) != 200 || res.Error != nil || res.TookMs != 12 {
		t.Errorf("delivered: %s", r.body)
	}
	calls := n.called()
	if len(calls) != 1 || calls[0].channel.ID != hook.Id || calls[0].rule != nil || len(calls[0].channel.Secret) == 0 {
		t.Fatalf("notifier calls %+v", calls)
	}

	// package notify names a URL's origin only in its errors (a Slack URL
	// is a secret); the API shows them as they are.
	n.set(model.DeliveryAttempt{At: time.Now(), Error: `Post https://hooks.slack.com: dial tcp: i/o timeout`, TookMS: 5000})
	r = e.do("POST", "/v1/notification-channels/"+slack.Id.String()+"/test", nil)
	mustStatus(t, r, http.StatusOK)
	noChannelSecret(t, "a failed test", r.body)
	r.decode(t, &res)
	if res.Delivered || res.Status != nil || deref(res.Error) != `Post https://hooks.slack.com: dial tcp: i/o timeout` || res.TookMs != 5000 {
		t.Errorf("failed: %s", r.body)
	}
	n.set(model.DeliveryAttempt{At: time.Now(), Status: 500, Error: "500 Internal Server Error", TookMS: 7})
	r = e.do("POST", "/v1/notification-channels/"+hook.Id.String()+"/test", nil)
	r.decode(t, &res)
	if res.Delivered || deref(res.Status) != 500 || deref(res.Error) != "500 Internal Server Error" {
		t.Errorf("a 500: %s", r.body)
	}

	n.set(model.DeliveryAttempt{})
	rule := e.createRule(ruleBody("default", "both", slack.Id.String(), hook.Id.String()))
	r = e.do("POST", "/v1/notification-rules/"+rule.Id.String()+"/test", nil)
	mustStatus(t, r, http.StatusOK)
	var rr models.RuleTestResult
	r.decode(t, &rr)
	if len(rr.Items) != 2 || rr.Items[0].ChannelId != slack.Id || rr.Items[1].ChannelId != hook.Id || !rr.Items[0].Delivered || !rr.Items[1].Delivered {
		t.Errorf("rule test: %s", r.body)
	}
	calls = n.called()
	if len(calls) != 2 || calls[0].rule == nil || calls[0].rule.ID != rule.Id || calls[1].channel.ID != hook.Id {
		t.Errorf("notifier calls %+v", calls)
	}
	// A rule left without channels tests none.
	mustStatus(t, e.do("DELETE", "/v1/notification-channels/"+slack.Id.String(), nil), http.StatusNoContent)
	mustStatus(t, e.do("DELETE", "/v1/notification-channels/"+hook.Id.String(), nil), http.StatusNoContent)
	r = e.do("POST", "/v1/notification-rules/"+rule.Id.String()+"/test", nil)
	mustStatus(t, r, http.StatusOK)
	if r.decode(t, &rr); len(rr.Items) != 0 {
		t.Errorf("a rule without channels: %s", r.body)
	}
}

// Roles as for jobs: a reader lists and gets, an editor also creates,
// changes, deletes and tests; another namespace's channel, rule or
// notification does not exist for a key.
func TestNotificationRoles(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	reader, editor, operator := a.key("team-a", "reader", nil), a.key("team-a", "editor", nil), a.key("team-a", "operator", nil)
	readerB := a.key("team-b", "reader", nil)
	ch, rule := a.fixtureChannel("team-a"), a.fixtureRule("team-a")
	n := insertNotification(a.t, a.store, model.Notification{Namespace: "team-a", State: model.NotificationSent})

	reads := []string{"/v1/notification-channels", "/v1/notification-channels/" + ch, "/v1/notification-rules",
		"/v1/notification-rules/" + rule, "/v1/notifications", "/v1/notifications/" + n.ID.String()}
	for _, path := range reads {
		mustStatus(t, a.as(reader, "GET", path, nil), http.StatusOK)
		if strings.Count(path, "/") == 3 { // one resource
			if r := a.as(readerB, "GET", path, nil); r.status != http.StatusNotFound {
				t.Errorf("GET %s as team-b's reader: %d, want 404", path, r.status)
			}
		} else if r := a.as(readerB, "GET", path+"?namespace=team-a", nil); r.status != http.StatusForbidden {
			t.Errorf("GET %s?namespace=team-a as team-b's reader: %d, want 403", path, r.status)
		}
	}
	writes := []request{
		{"POST", "/v1/notification-channels", channelBody("team-a", "by-editor"), false},
		{"PATCH", "/v1/notification-channels/" + ch, map[string]any{"paused": true}, false},
		{"POST", "/v1/notification-channels/" + ch + "/test", nil, false},
		{"POST", "/v1/notification-rules", ruleBody("team-a", "by-editor", ch), false},
		{"PATCH", "/v1/notification-rules/" + rule, map[string]any{"paused": true}, false},
		{"POST", "/v1/notification-rules/" + rule + "/test", nil, false},
		{"DELETE", "/v1/notification-rules/" + rule, nil, false},
		{"DELETE", "/v1/notification-channels/" + ch, nil, false},
	}
	for _, w := range writes {
		for _, k := range []string{reader, operator} {
			r := a.as(k, w.method, w.path, w.body)
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s as a reader or operator: %d, want 403", w.method, w.path, r.status)
			} else if p := r.problem(t); !strings.Contains(deref(p.Detail), "does not allow") {
				t.Errorf("403 detail %q", deref(p.Detail))
			}
		}
		if r := a.as(editor, w.method, w.path, w.body); r.status < 200 || r.status > 299 {
			t.Errorf("%s %s as an editor: %d %s", w.method, w.path, r.status, r.body)
		}
	}
	// A channel of another namespace cannot be given to a rule, and a
	// rule cannot be made in a namespace the key has no role in.
	theirs := a.fixtureChannel("team-b")
	r := a.as(editor, "POST", "/v1/notification-rules", ruleBody("team-a", "theirs", theirs))
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "channels[0]") {
		t.Errorf("another namespace's channel: %s", fieldsOf(p))
	}
	mustStatus(t, a.as(editor, "POST", "/v1/notification-rules", ruleBody("team-b", "theirs", theirs)), http.StatusForbidden)
	mustStatus(t, a.as(editor, "POST", "/v1/notification-channels", channelBody("team-b", "theirs")), http.StatusForbidden)
	// A reader of every namespace lists every namespace's.
	r = a.as(a.key("*", "reader", nil), "GET", "/v1/notification-channels", nil)
	mustStatus(t, r, http.StatusOK)
	var l models.ChannelList
	if r.decode(t, &l); len(l.Items) != 3 {
		t.Errorf("every namespace's channels: %s", r.body)
	}
}

// Channel and rule changes are in the audit trail with their namespace
// and the resource before and after as the API shows it: no secret.
func TestNotificationAudit(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	editor := a.key("team-a", "editor", nil)
	r := a.as(editor, "POST", "/v1/notification-channels", channelBody("team-a", "hook"))
	mustStatus(t, r, http.StatusCreated)
	var ch models.Channel
	r.decode(t, &ch)
	cid := ch.Id.String()
	mustStatus(t, a.as(editor, "PATCH", "/v1/notification-channels/"+cid, map[string]any{"name": "hook-2", "secret": "a-new-secret-for-hook-2"}), http.StatusOK)
	r = a.as(editor, "POST", "/v1/notification-rules", ruleBody("team-a", "rule", cid))
	mustStatus(t, r, http.StatusCreated)
	var rule models.Rule
	r.decode(t, &rule)
	rid := rule.Id.String()
	mustStatus(t, a.as(editor, "PATCH", "/v1/notification-rules/"+rid, map[string]any{"paused": true}), http.StatusOK)
	mustStatus(t, a.as(editor, "POST", "/v1/notification-rules/"+rid+"/test", nil), http.StatusOK)
	// A refused change leaves no entry.
	mustStatus(t, a.as(editor, "PATCH", "/v1/notification-rules/"+rid, map[string]any{"failing_after": 0}), http.StatusBadRequest)
	mustStatus(t, a.as(editor, "DELETE", "/v1/notification-rules/"+rid, nil), http.StatusNoContent)
	mustStatus(t, a.as(editor, "DELETE", "/v1/notification-channels/"+cid, nil), http.StatusNoContent)

	r = a.as(a.admin, "GET", "/v1/audit?namespace=team-a", nil)
	mustStatus(t, r, http.StatusOK)
	noChannelSecret(t, "the audit trail", r.body)
	if strings.Contains(string(r.body), "a-new-secret") {
		t.Errorf("the audit trail shows a secret: %s", r.body)
	}
	var l models.AuditList
	r.decode(t, &l)
	type entry struct{ action, resource string }
	var got []entry
	for _, e := range l.Items {
		got = append(got, entry{e.Action, e.Resource})
		if e.Namespace != "team-a" || e.Actor == "" {
			t.Errorf("entry %+v", e)
		}
	}
	want := []entry{{"channels.delete", "channel " + cid}, {"rules.delete", "rule " + rid}, {"rules.test", "rule " + rid},
		{"rules.update", "rule " + rid}, {"rules.create", "rule " + rid}, {"channels.update", "channel " + cid},
		{"channels.create", "channel " + cid}}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	field := func(v *map[string]any, k string) any {
		if v == nil {
			return nil
		}
		return (*v)[k]
	}
	upd := l.Items[5]
	if field(upd.Before, "name") != "hook" || field(upd.After, "name") != "hook-2" || field(upd.Before, "secret_set") != true {
		t.Errorf("channel update entry: before %v after %v", upd.Before, upd.After)
	}
	if p := l.Items[3]; field(p.Before, "paused") != false || field(p.After, "paused") != true {
		t.Errorf("rule update entry: before %v after %v", p.Before, p.After)
	}
	if c := l.Items[6]; c.Before != nil || field(c.After, "name") != "hook" {
		t.Errorf("channel create entry: %+v", c)
	}
	if d := l.Items[0]; d.After != nil || field(d.Before, "name") != "hook-2" {
		t.Errorf("channel delete entry: %+v", d)
	}
	var n int
	if err := a.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log
		WHERE before::text LIKE '%s3cret%' OR after::text LIKE '%s3cret%' OR after::text LIKE '%a-new-secret%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d stored entries hold a secret (%v)", n, err)
	}
}

// Notifications are listed newest first, a page at a time, by namespace,
// rule, job and state, each with its attempts and its body as an object.
func TestListNotifications(t *testing.T) {
	t.Parallel()
	e, _ := notifyEnv(t)
	ruleA, ruleB, job := uuid.New(), uuid.New(), uuid.New()
	slack := e.createChannel(map[string]any{"namespace": "team-a", "name": "slack", "type": "slack", "url": slackURL})
	base := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	sent := base.Add(time.Minute)
	var made []model.Notification
	for i := range 7 {
		n := model.Notification{Namespace: "team-a", RuleID: ruleA, State: model.NotificationPending, CreatedAt: base.Add(time.Duration(i) * time.Second)}
		switch i % 3 {
		case 1:
			n.RuleID, n.State, n.SentAt, n.Attempts = ruleB, model.NotificationSent, &sent, 1
			n.JobIDs = []uuid.UUID{uuid.New(), job}
			n.AttemptLog = []model.DeliveryAttempt{{At: sent, Status: 200, TookMS: 30, Node: "node-1"}}
		case 2:
			n.State, n.Attempts, n.LastError = model.NotificationFailed, 2, `Post https://hooks.slack.com: EOF`
			n.ChannelID = slack.Id
			n.AttemptLog = []model.DeliveryAttempt{{At: sent, Status: 503, Error: "503 Service Unavailable", TookMS: 40},
				{At: sent.Add(time.Second), Error: `Post https://hooks.slack.com: EOF`, TookMS: 10}}
		}
		made = append(made, insertNotification(t, e.store, n))
	}
	insertNotification(t, e.store, model.Notification{Namespace: "team-b", RuleID: ruleA, State: model.NotificationPending, JobIDs: []uuid.UUID{job}})

	list := func(query string) (models.NotificationList, resp) {
		t.Helper()
		r := e.do("GET", "/v1/notifications"+query, nil)
		mustStatus(t, r, http.StatusOK)
		noChannelSecret(t, "GET /v1/notifications"+query, r.body)
		var l models.NotificationList
		r.decode(t, &l)
		return l, r
	}
	ids := func(l models.NotificationList) []uuid.UUID {
		var out []uuid.UUID
		for _, n := range l.Items {
			out = append(out, n.Id)
		}
		return out
	}
	want := func(pick func(i int) bool) []uuid.UUID {
		var out []uuid.UUID
		for i := len(made) - 1; i >= 0; i-- {
			if pick(i) {
				out = append(out, made[i].ID)
			}
		}
		return out
	}
	all := func(int) bool { return true }
	for query, pick := range map[string]func(int) bool{
		"?namespace=team-a":                                              all,
		"?namespace=team-a&state=sent":                                   func(i int) bool { return i%3 == 1 },
		"?namespace=team-a&state=failed":                                 func(i int) bool { return i%3 == 2 },
		"?namespace=team-a&rule_id=" + ruleB.String():                    func(i int) bool { return i%3 == 1 },
		"?namespace=team-a&job_id=" + job.String():                       func(i int) bool { return i%3 == 1 },
		"?namespace=team-a&rule_id=" + ruleA.String() + "&state=pending": func(i int) bool { return i%3 == 0 },
		"?namespace=team-c":                                              func(int) bool { return false },
	} {
		if l, _ := list(query); !slices.Equal(ids(l), want(pick)) {
			t.Errorf("%s: %v, want %v", query, ids(l), want(pick))
		}
	}
	if l, _ := list("?job_id=" + job.String()); len(l.Items) != 3 {
		t.Errorf("every namespace's notifications about the job: %d", len(l.Items))
	}

	// Pages, newest first, every one once.
	var paged []uuid.UUID
	cursor := ""
	for range 10 {
		l, _ := list("?namespace=team-a&limit=3&cursor=" + cursor)
		paged = append(paged, ids(l)...)
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	if !slices.Equal(paged, want(all)) {
		t.Errorf("paged %v, want %v", paged, want(all))
	}

	// One, with what it holds.
	r := e.do("GET", "/v1/notifications/"+made[4].ID.String(), nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Notification
	r.decode(t, &got)
	if got.RuleId != ruleB || got.State != models.NotificationStateSent || got.SentAt == nil || !got.SentAt.Equal(sent) ||
		len(got.JobIds) != 2 || got.JobIds[1] != job || got.Attempts != 1 || len(got.AttemptLog) != 1 ||
		deref(got.AttemptLog[0].Status) != 200 || deref(got.AttemptLog[0].Node) != "node-1" || got.AttemptLog[0].TookMs != 30 ||
		got.Kinds[0] != "execution.dead" || got.NextAttemptAt != nil || got.LastError != "" || !got.CreatedAt.Equal(made[4].CreatedAt) {
		t.Errorf("notification: %s", r.body)
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil || body["text"] != "a job died" {
		t.Errorf("body %s: %v", got.Body, err)
	}
	// A failed Slack notification, its errors as notify wrote them.
	r = e.do("GET", "/v1/notifications/"+made[5].ID.String(), nil)
	mustStatus(t, r, http.StatusOK)
	noChannelSecret(t, "a failed Slack notification", r.body)
	r.decode(t, &got)
	if got.LastError != `Post https://hooks.slack.com: EOF` || len(got.AttemptLog) != 2 || deref(got.AttemptLog[0].Error) != "503 Service Unavailable" {
		t.Errorf("failed notification: %s", r.body)
	}

	for query, field := range map[string]string{
		"?state=lost":                      "state",
		"?rule_id=x":                       "rule_id",
		"?job_id=1":                        "job_id",
		"?limit=0":                         "limit",
		"?limit=501":                       "limit",
		"?cursor=abc":                      "cursor",
		"?namespace=a%20b":                 "namespace",
		"?namespace=team-a&cursor=" + "!!": "cursor",
	} {
		r := e.do("GET", "/v1/notifications"+query, nil)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: %s, want %s", query, fieldsOf(p), field)
		}
	}
	mustStatus(t, e.do("GET", "/v1/notifications/"+uuid.NewString(), nil), http.StatusNotFound)
	mustStatus(t, e.do("GET", "/v1/notifications/x", nil), http.StatusBadRequest)

	// A key lists its namespace's.
	a := newAuthEnv(t)
	insertNotification(t, a.store, model.Notification{Namespace: "team-a", State: model.NotificationSent})
	insertNotification(t, a.store, model.Notification{Namespace: "team-b", State: model.NotificationSent})
	r = a.as(a.key("team-b", "reader", nil), "GET", "/v1/notifications", nil)
	mustStatus(t, r, http.StatusOK)
	var l models.NotificationList
	r.decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Namespace != "team-b" {
		t.Errorf("team-b's reader lists %+v", l.Items)
	}
}
