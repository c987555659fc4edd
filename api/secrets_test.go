package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
)

// The values the secrets tests give; none may appear in an answer, a
// log line, a metric or a stored row.
const (
	secretValue      = "Bearer s3cret-api-5d1e"
	plainSecretValue = "plain-tok-77aa"
)

// noSecret fails the test if what holds a secret value, or the value of
// the plain header named like a credential, which is hidden from answers
// only (it is stored and sent as it is: it is not a secret header).
func noSecret(t *testing.T, where string, what []byte) {
	t.Helper()
	noSealed(t, where, what)
	for _, v := range []string{plainSecretValue, "plain-tok"} {
		if bytes.Contains(what, []byte(v)) {
			t.Errorf("%s shows a hidden header (%q): %s", where, v, what)
		}
	}
}

// noSealed fails the test if what holds the secret header's value.
func noSealed(t *testing.T, where string, what []byte) {
	t.Helper()
	for _, v := range []string{secretValue, "s3cret"} {
		if bytes.Contains(what, []byte(v)) {
			t.Errorf("%s shows a secret (%q): %s", where, v, what)
		}
	}
}

// A job's secret headers and its credential-named plain headers are
// "***" in every answer; the database holds only ciphertext; a PATCH
// with "***" keeps the stored value, null removes them.
func TestSecretHeadersNeverShown(t *testing.T) {
	t.Parallel()
	k := testenv.Keyring(t)
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) { c.Secrets = k })
	e.store = st

	body := jobBody("with-secrets")
	body["handler"] = map[string]any{"type": "http", "url": "https://example.com/hook",
		"headers":        map[string]string{"X-Team": "payments", "X-Api-Token": plainSecretValue},
		"secret_headers": map[string]string{"Authorization": secretValue}}
	r := e.do("POST", "/v1/jobs", body)
	mustStatus(t, r, http.StatusCreated)
	noSecret(t, "POST /v1/jobs", r.body)
	var j models.Job
	r.decode(t, &j)
	if j.Handler.SecretHeaders == nil || (*j.Handler.SecretHeaders)["Authorization"] != "***" ||
		(*j.Handler.Headers)["X-Api-Token"] != "***" || (*j.Handler.Headers)["X-Team"] != "payments" {
		t.Fatalf("handler as created: %s", r.body)
	}
	path := "/v1/jobs/" + j.Id.String()

	// Every answer that shows the job.
	for _, rq := range []struct{ method, path string }{
		{"GET", path}, {"GET", "/v1/jobs"}, {"GET", "/v1/jobs?namespace=default"}, {"POST", path + "/pause"}, {"POST", path + "/resume"},
		{"GET", path + "/preview"},
	} {
		r := e.do(rq.method, rq.path, nil)
		mustStatus(t, r, http.StatusOK)
		noSecret(t, rq.method+" "+rq.path, r.body)
		if rq.path != path+"/preview" && !bytes.Contains(r.body, []byte(`"secret_headers":{"Authorization":"***"}`)) {
			t.Errorf("%s %s: no masked secret header in %s", rq.method, rq.path, r.body)
		}
	}
	batch := e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{
		map[string]any{"name": "batched", "handler": map[string]any{"type": "http", "url": "https://example.com/b",
			"secret_headers": map[string]string{"X-Api-Key": secretValue}}},
	}})
	mustStatus(t, batch, http.StatusOK)
	noSecret(t, "POST /v1/jobs:batch", batch.body)
	if !bytes.Contains(batch.body, []byte(`"secret_headers":{"X-Api-Key":"***"}`)) {
		t.Errorf("batch: %s", batch.body)
	}

	// An idempotent create keeps its answer: masked too.
	keyed := jobBody("keyed")
	keyed["handler"] = map[string]any{"type": "http", "url": "https://example.com/k",
		"secret_headers": map[string]string{"Authorization": secretValue}}
	r = e.doHeaders("POST", "/v1/jobs", keyed, map[string]string{"Idempotency-Key": "secret-1"})
	mustStatus(t, r, http.StatusCreated)
	noSecret(t, "idempotent POST", r.body)

	// A run: its execution, as the API shows it and as stored.
	run := e.do("POST", path+"/run", nil)
	mustStatus(t, run, http.StatusAccepted)
	var x models.Execution
	run.decode(t, &x)
	noSecret(t, "POST run", run.body)
	got := e.do("GET", "/v1/executions/"+x.Id.String(), nil)
	mustStatus(t, got, http.StatusOK)
	noSecret(t, "GET execution", got.body)

	// Stored: jobs, job specs and executions hold ciphertext under k1 (the
	// plain header is stored as it came).
	rows := e.storedText(t)
	noSealed(t, "the database", []byte(rows))
	if !strings.Contains(rows, `"kid": "k1"`) || strings.Count(rows, `"secret_headers"`) < 6 {
		t.Errorf("stored rows lack the sealed headers: %s", rows)
	}

	// A PATCH sending "***" keeps both stored values, and the same
	// ciphertext.
	before, err := st.GetJob(e.ctx, j.Id)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do("PATCH", path, map[string]any{"handler": map[string]any{"type": "http", "url": "https://example.com/hook",
		"headers":        map[string]string{"X-Team": "ops", "X-Api-Token": "***"},
		"secret_headers": map[string]string{"Authorization": "***"}}})
	mustStatus(t, r, http.StatusOK)
	noSecret(t, "PATCH", r.body)
	after, err := st.GetJob(e.ctx, j.Id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Handler.SecretHeaders["Authorization"].Data, before.Handler.SecretHeaders["Authorization"].Data) ||
		after.Handler.Headers["X-Api-Token"] != plainSecretValue || after.Handler.Headers["X-Team"] != "ops" {
		t.Errorf("after a PATCH with ***: %+v", after.Handler)
	}
	plain, err := k.Open("k1", after.Handler.SecretHeaders["Authorization"].Data, domain.SecretHeaderAD("Authorization"))
	if err != nil || string(plain) != secretValue {
		t.Errorf("the kept value opens to %q, %v", plain, err)
	}
	// A PATCH that would carry a stored value to another origin is a 400
	// naming the field.
	r = e.do("PATCH", path, map[string]any{"handler": map[string]any{"type": "http", "url": "https://elsewhere.example/",
		"headers": map[string]string{"X-Api-Token": "***"}, "secret_headers": map[string]string{"Authorization": "***"}}})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "handler.headers.X-Api-Token") || !hasField(p, "handler.secret_headers.Authorization") {
		t.Errorf("carrying hidden values elsewhere: %s", fieldsOf(p))
	}
	// Left out of a handler change: kept. Null: removed.
	r = e.do("PATCH", path, map[string]any{"handler": map[string]any{"type": "http", "url": "https://example.com/other"}})
	mustStatus(t, r, http.StatusOK)
	if !bytes.Contains(r.body, []byte(`"secret_headers":{"Authorization":"***"}`)) {
		t.Errorf("secret headers left out were not kept: %s", r.body)
	}
	r = e.do("PATCH", path, map[string]any{"handler": map[string]any{"type": "http", "url": "https://example.com/other", "secret_headers": nil}})
	mustStatus(t, r, http.StatusOK)
	if bytes.Contains(r.body, []byte(`secret_headers`)) {
		t.Errorf("secret_headers null did not remove them: %s", r.body)
	}

	noSecret(t, "the server's log", []byte(e.logs.String()))
	noSecret(t, "GET /metrics", e.do("GET", "/metrics", nil).body)
}

// storedText is every stored jobs, job_specs and executions row, and the
// kept answers of idempotent writes, as text.
func (e *env) storedText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{"SELECT to_jsonb(j)::text FROM jobs j", "SELECT to_jsonb(s)::text FROM job_specs s", "SELECT to_jsonb(x)::text FROM executions x",
		"SELECT coalesce(convert_from(response, 'UTF8'), '') FROM idempotency_keys"} {
		rows, err := e.store.Pool().Query(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// A server without --secret-key-file refuses secret headers with a 400
// naming the field, and never echoes the value.
func TestSecretHeadersWithoutKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := jobBody("no-key")
	body["handler"] = map[string]any{"type": "http", "url": "https://example.com/hook",
		"secret_headers": map[string]string{"Authorization": secretValue}}
	r := e.do("POST", "/v1/jobs", body)
	mustStatus(t, r, http.StatusBadRequest)
	noSecret(t, "the problem", r.body)
	p := r.problem(t)
	if !hasField(p, "handler.secret_headers") || !strings.Contains(fieldsOf(p), "this server has no --secret-key-file") {
		t.Errorf("problem: %s", fieldsOf(p))
	}
	j := e.createJob(jobBody("plain"))
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"handler": body["handler"]})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "handler.secret_headers") {
		t.Errorf("PATCH problem: %s", fieldsOf(p))
	}
	// Bad input is named as the field, without the value, whatever the
	// server holds.
	body["handler"] = map[string]any{"type": "http", "url": "https://example.com/hook",
		"secret_headers": map[string]any{"Authorization": 42}}
	r = e.do("POST", "/v1/jobs", body)
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "handler.secret_headers.Authorization") {
		t.Errorf("a number as a value: %s", fieldsOf(p))
	}
	noSecret(t, "the server's log", []byte(e.logs.String()))
}
