package api

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobs"
)

// rawJob is a valid job body (as JSON text) whose payload is payload.
func rawJob(name, payload string) string {
	return `{"name":"` + name + `","schedule":{"cron":"@hourly"},` +
		`"handler":{"type":"http","url":"https://example.com/hook"},"payload":` + payload + `}`
}

// What Postgres's jsonb cannot store is refused with 400 naming the
// field, in POST and PATCH, wherever in the body it is.
func TestUnstorableJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("stored"))
	for _, tc := range []struct {
		name, payload, field, msg string
	}{
		{"NUL", `{"s":"a\u0000"}`, "payload.s", "U+0000"},
		{"lone surrogate", `{"s":"\ud800"}`, "payload.s", "surrogate"},
		{"reversed pair", `["\udc00\ud800"]`, "payload[0]", "surrogate"},
		{"invalid UTF-8", "{\"s\":\"\xff\xfe\"}", "payload.s", "UTF-8"},
		{"invalid UTF-8 in a key", "{\"\xc3\":1}", "payload.\uFFFD", "UTF-8"},
		{"exponent too large", `{"n":1e1000000}`, "payload.n", "number"},
		{"exponent too small", `[1e-1000000]`, "payload[0]", "number"},
		{"too many digits", `{"n":` + strings.Repeat("9", 131073) + `}`, "payload.n", "number"},
		{"too large once escaped", `"` + strings.Repeat("<", 50<<10) + `"`, "payload", "262144"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/v1/jobs", rawJob("json-"+strings.ReplaceAll(tc.name, " ", "-"), tc.payload)},
				{"PATCH", "/v1/jobs/" + j.Id.String(), `{"payload":` + tc.payload + `}`},
				{"POST", "/v1/jobs:batch", `{"jobs":[` + rawJob("batch-"+strings.ReplaceAll(tc.name, " ", "-"), tc.payload) + `]}`},
			} {
				r := e.do(req.method, req.path, req.body)
				if req.path == "/v1/jobs:batch" {
					mustStatus(t, r, http.StatusOK)
					var res models.JobBatchResult
					r.decode(t, &res)
					if p := res.Items[0].Problem; res.Failed != 1 || p == nil || !hasField(*p, "jobs[0]."+tc.field) {
						t.Errorf("batch: %s", r.body)
					}
					continue
				}
				mustStatus(t, r, http.StatusBadRequest)
				p := r.problem(t)
				if !hasField(p, tc.field) || !strings.Contains(fieldsOf(p), tc.msg) {
					t.Errorf("%s: errors %s, want %s: …%s…", req.method, fieldsOf(p), tc.field, tc.msg)
				}
			}
		})
	}
	// Elsewhere in the body too: a label, a header.
	for body, field := range map[string]string{
		`{"labels":{"team":"\ud800"}}`: "labels.team",
		`{"handler":{"type":"http","url":"https://example.com","headers":{"X-A":"\udfff"}}}`: "handler.headers.X-A",
		"{\"description\":\"\xff\"}": "description",
	} {
		r := e.do("PATCH", "/v1/jobs/"+j.Id.String(), body)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: errors %s, want %s", body, fieldsOf(p), field)
		}
	}

	// What fits is stored, and comes back as it was sent.
	big := `"` + strings.Repeat("<", 40<<10) + `"` // 40 KiB, 240 KiB escaped
	r := e.do("PATCH", "/v1/jobs/"+j.Id.String(), `{"payload":{"n":[1e3,-0.5e-2],"s":`+big+`,"e":"\ud83d\ude00"}}`)
	mustStatus(t, r, http.StatusOK)
	if g := e.getJob(j.Id); g.Payload == nil || !strings.Contains(string(*g.Payload), `"e":"😀"`) {
		t.Errorf("payload not stored")
	}
}

// The payload limit is what executors receive, and a payload just
// inside it is accepted.
func TestPayloadLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fits := `"` + strings.Repeat("a", jobs.MaxPayloadBytes-2) + `"`
	mustStatus(t, e.do("POST", "/v1/jobs", rawJob("fits", fits)), http.StatusCreated)
	over := `"` + strings.Repeat("a", jobs.MaxPayloadBytes-1) + `"`
	r := e.do("POST", "/v1/jobs", rawJob("over", over))
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "payload") {
		t.Errorf("errors %s", fieldsOf(p))
	}
}

// Query and path parameters holding U+0000 or bytes that are not UTF-8
// are refused with 400 naming them, before any query.
func TestBadParameterText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("params"))
	for path, field := range map[string]string{
		"/v1/jobs?name_prefix=%00":                             "name_prefix",
		"/v1/jobs?name_prefix=%FF":                             "name_prefix",
		"/v1/jobs?namespace=%C3":                               "namespace",
		"/v1/jobs?selector=a%3D%00":                            "selector",
		"/v1/jobs?cursor=%00":                                  "cursor",
		"/v1/executions?error=%FF%FE":                          "error",
		"/v1/executions?job=a%00":                              "job",
		"/v1/executions?handler=%80":                           "handler",
		"/v1/stats?group_by=%00":                               "group_by",
		"/v1/jobs/" + j.Id.String() + "/executions?cursor=%FF": "cursor",
		"/v1/namespaces/a%00b":                                 "namespace",
		"/v1/jobs?%FF=1":                                       "query",
	} {
		r := e.do("GET", path, nil)
		if path == "/v1/namespaces/a%00b" {
			r = e.do("PUT", path, map[string]any{"retention": "7d"})
		}
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: errors %s, want %s", path, fieldsOf(p), field)
		}
	}
}

// Forged cursors are refused with 400 naming cursor.
func TestForgedCursors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("cursor-a"))
	e.createJob(jobBody("cursor-b"))
	r := e.do("GET", "/v1/jobs?limit=1", nil)
	var page models.JobList
	r.decode(t, &page)
	if page.NextCursor == nil {
		t.Fatal("no cursor")
	}
	mustStatus(t, e.do("GET", "/v1/jobs?limit=1&cursor="+*page.NextCursor, nil), http.StatusOK)
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{
		enc(`["default\u0000","x"]`),
		enc(`["default","x\u0000"]`),
		enc(`["default"]`),
		enc(`[ "default","x"]`),
		enc("[\"default\",\"\xff\"]"),
		enc(`"00000000-0000-0000-0000-000000000000\u0000"`),
		strings.Repeat("A", 5000),
		*page.NextCursor + "=",
		"!!",
	} {
		for _, path := range []string{"/v1/jobs", "/v1/executions", "/v1/jobs/" + j.Id.String() + "/executions",
			"/v1/jobs/" + j.Id.String() + "/skips", "/v1/jobs/" + j.Id.String() + "/backfills", "/v1/notifications"} {
			r := e.do("GET", path+"?cursor="+c, nil)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, "cursor") {
				t.Errorf("%s?cursor=%s: errors %s", path, c, fieldsOf(p))
			}
		}
	}
}

// send sends a raw request to e's server.
func (e *env) send(t *testing.T, method, path, body string, header map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// A body that is not JSON is refused with 415, a missing Content-Type
// included (a browser's fetch of a Blob sends none, and asks nothing
// first); a request without a body needs none.
func TestBodyMediaType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("media"))
	body := rawJob("media-2", "1")
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"text/json", "application/json; charset=iso-8859-1", "application/json;;"} {
		res := e.send(t, "POST", "/v1/jobs", body, map[string]string{"Content-Type": ct})
		if res.StatusCode != http.StatusUnsupportedMediaType || res.Header.Get("Content-Type") != ProblemContentType {
			t.Errorf("Content-Type %q: status %d, content type %q", ct, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8", "application/merge-patch+json"} {
		res := e.send(t, "POST", "/v1/jobs", rawJob(fmt.Sprintf("media-ok-%d", i), "1"), map[string]string{"Content-Type": ct})
		if res.StatusCode != http.StatusCreated {
			t.Errorf("Content-Type %q: status %d", ct, res.StatusCode)
		}
	}
	if res := e.send(t, "POST", "/v1/jobs/"+j.Id.String()+"/pause", "", nil); res.StatusCode != http.StatusOK {
		t.Errorf("pause without a body: status %d", res.StatusCode)
	}
}

// With AllowedHosts, a request naming another Host is refused with 421;
// health checks are not.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, openStore(t), func(c *Config) { c.AllowedHosts = []string{"localhost", "127.0.0.1", "[::1]", "api.example.com:8443"} })
	for host, want := range map[string]int{
		"localhost":            http.StatusOK,
		"LOCALHOST:8080":       http.StatusOK,
		"127.0.0.1:1":          http.StatusOK,
		"[::1]:8080":           http.StatusOK,
		"[::1]":                http.StatusOK,
		"api.example.com:8443": http.StatusOK,
		"api.example.com":      http.StatusMisdirectedRequest,
		"evil.example":         http.StatusMisdirectedRequest,
		"evil.example:8080":    http.StatusMisdirectedRequest,
		"localhost.evil":       http.StatusMisdirectedRequest,
	} {
		res := e.send(t, "GET", "/v1/jobs", "", map[string]string{"Host": host})
		if res.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, res.StatusCode, want)
		}
		if want != http.StatusOK && res.Header.Get("Content-Type") != ProblemContentType {
			t.Errorf("Host %s: content type %q", host, res.Header.Get("Content-Type"))
		}
	}
	if res := e.send(t, "GET", "/healthz", "", map[string]string{"Host": "10.0.0.7:8080"}); res.StatusCode != http.StatusOK {
		t.Errorf("health check by IP: %d", res.StatusCode)
	}
	// Without AllowedHosts, any Host.
	open := newEnv(t)
	if res := open.send(t, "GET", "/v1/jobs", "", map[string]string{"Host": "evil.example"}); res.StatusCode != http.StatusOK {
		t.Errorf("no allowed hosts: %d", res.StatusCode)
	}
}

// CORS headers go only to the configured origins; by default, to none.
func TestCORS(t *testing.T) {
	t.Parallel()
	plain := newEnv(t)
	origin := map[string]string{"Origin": "https://console.example.com"}
	res := plain.send(t, "GET", "/v1/jobs", "", origin)
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("CORS header without --cors-origins: %q", v)
	}
	pre := map[string]string{"Origin": "https://console.example.com", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type"}
	res = plain.send(t, "OPTIONS", "/v1/jobs", "", pre)
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("preflight answered without --cors-origins: %q", v)
	}

	e := newEnvWith(t, openStore(t), func(c *Config) { c.CORSOrigins = []string{"https://console.example.com"} })
	res = e.send(t, "GET", "/v1/jobs", "", origin)
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "https://console.example.com" {
		t.Errorf("allowed origin: %q", v)
	}
	res = e.send(t, "OPTIONS", "/v1/jobs", "", pre)
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "https://console.example.com" || res.StatusCode >= 300 {
		t.Errorf("preflight: status %d, origin %q", res.StatusCode, v)
	}
	res = e.send(t, "GET", "/v1/jobs", "", map[string]string{"Origin": "https://evil.example"})
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("other origin: %q", v)
	}

	if _, err := New(Config{Store: struct{ Store }{}, CORSOrigins: []string{"console.example.com"}}); err == nil {
		t.Error("an origin without a scheme was accepted")
	}
}
