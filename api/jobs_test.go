package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
)

func TestCreateJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)

	tests := []struct {
		name  string
		body  map[string]any
		check func(t *testing.T, j models.Job)
	}{
		{"cron in a zone, every field", map[string]any{
			"name":      "nightly-report",
			"namespace": "reports",
			"schedule":  map[string]any{"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"},
			"handler":   map[string]any{"type": "http", "url": "https://example.com/hook", "method": "put", "headers": map[string]string{"X-Team": "abc"}},
			"payload":   map[string]any{"k": "v"},
			"retry":     map[string]any{"max_attempts": 3, "initial_backoff": "1s", "max_backoff": "1m", "multiplier": 2, "jitter": "full"},
			"timeout":   "90s",
		}, func(t *testing.T, j models.Job) {
			if j.Namespace != "reports" || j.Name != "nightly-report" || j.State != models.JobStateActive {
				t.Errorf("job %+v", j)
			}
			if j.NextRunAt == nil {
				t.Fatal("no next_run_at")
			}
			local := j.NextRunAt.In(berlin)
			if local.Hour() != 9 || local.Minute() != 30 || local.Second() != 0 ||
				local.Weekday() == time.Saturday || local.Weekday() == time.Sunday || !local.After(before) {
				t.Errorf("next_run_at %v (%v in Berlin) is not a weekday 09:30 to come", j.NextRunAt, local)
			}
			if *j.Handler.Method != "PUT" || (*j.Handler.Headers)["X-Team"] != "abc" {
				t.Errorf("handler %+v", j.Handler)
			}
			if j.Payload == nil || string(*j.Payload) != `{"k":"v"}` {
				t.Errorf("payload %v", j.Payload)
			}
			if j.Retry == nil || *j.Retry.MaxAttempts != 3 || *j.Retry.Multiplier != 2 || *j.Retry.Jitter != models.RetryPolicyJitterFull ||
				*j.Retry.InitialBackoff != "1s" || *j.Retry.MaxBackoff != "1m" {
				t.Errorf("retry %+v", j.Retry)
			}
			if j.Timeout == nil || *j.Timeout != "1m30s" {
				t.Errorf("timeout %v", j.Timeout)
			}
			if j.Bucket < 0 || j.Bucket >= 16 {
				t.Errorf("bucket %d", j.Bucket)
			}
		}},
		{"at", map[string]any{
			"name":     "once-at",
			"schedule": map[string]any{"at": at.Format(time.RFC3339)},
			"handler":  map[string]any{"type": "nats", "subject": "reports.nightly", "wait_reply": true},
		}, func(t *testing.T, j models.Job) {
			if j.NextRunAt == nil || !j.NextRunAt.Equal(at) || j.Schedule.At == nil || !j.Schedule.At.Equal(at) {
				t.Errorf("next_run_at %v, schedule %+v; want %v", j.NextRunAt, j.Schedule, at)
			}
			if j.Namespace != "default" || j.Handler.Type != models.HandlerTypeNats || !*j.Handler.WaitReply {
				t.Errorf("job %+v", j)
			}
		}},
		{"@every from an anchor to come", map[string]any{
			"name":     "every-anchored",
			"schedule": map[string]any{"cron": "@every 36h", "anchor": at.In(berlin).Format(time.RFC3339)},
			"handler":  map[string]any{"type": "custom", "name": "send-email"},
		}, func(t *testing.T, j models.Job) {
			if j.NextRunAt == nil || !j.NextRunAt.Equal(at) || j.Schedule.Anchor == nil || !j.Schedule.Anchor.Equal(at) ||
				j.Schedule.Anchor.Location() != time.UTC {
				t.Errorf("next_run_at %v, schedule %+v; want both at %v in UTC", j.NextRunAt, j.Schedule, at)
			}
		}},
		{"@every with a past anchor: its phase", map[string]any{
			"name":     "every-phase",
			"schedule": map[string]any{"cron": "@every 1h", "anchor": "2020-01-01T00:20:17+01:00"},
			"handler":  map[string]any{"type": "custom", "name": "send-email"},
		}, func(t *testing.T, j models.Job) {
			if j.NextRunAt == nil || j.NextRunAt.Minute() != 20 || j.NextRunAt.Second() != 17 || !j.NextRunAt.After(before) ||
				j.NextRunAt.After(time.Now().Add(time.Hour)) {
				t.Errorf("next_run_at %v, want hh:20:17 within the hour", j.NextRunAt)
			}
		}},
		{"in", map[string]any{
			"name":     "once-in",
			"schedule": map[string]any{"in": "90s"},
			"handler":  map[string]any{"type": "custom", "name": "send-email"},
			"payload":  []int{1, 2, 3},
		}, func(t *testing.T, j models.Job) {
			lo, hi := before.Add(90*time.Second), time.Now().Add(91*time.Second)
			if j.NextRunAt == nil || j.NextRunAt.Before(lo) || j.NextRunAt.After(hi) {
				t.Errorf("next_run_at %v, want 90s from now", j.NextRunAt)
			}
			if *j.Schedule.In != "90s" || *j.Handler.Name != "send-email" || string(*j.Payload) != "[1,2,3]" {
				t.Errorf("job %+v", j)
			}
		}},
		{"now, no schedule", map[string]any{
			"name":    "once-now",
			"handler": map[string]any{"type": "http", "url": "http://hooks.example.test:9/x"},
		}, func(t *testing.T, j models.Job) {
			if j.NextRunAt == nil || j.NextRunAt.Before(before) || j.NextRunAt.After(time.Now().Add(time.Second)) {
				t.Errorf("next_run_at %v, want now", j.NextRunAt)
			}
			if *j.Handler.Method != "POST" {
				t.Errorf("method %v, want the default POST", j.Handler.Method)
			}
			if j.Payload != nil || j.Retry != nil || j.Timeout != nil {
				t.Errorf("unexpected optional fields: %+v", j)
			}
		}},
		{"now, empty schedule", map[string]any{
			"name":     "once-now-2",
			"schedule": map[string]any{},
			"handler":  map[string]any{"type": "custom", "name": "x_1"},
			"payload":  nil,
		}, func(t *testing.T, j models.Job) {
			if j.NextRunAt == nil || j.Payload != nil {
				t.Errorf("job %+v", j)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs", tc.body)
			mustStatus(t, r, http.StatusCreated)
			var j models.Job
			r.decode(t, &j)
			if j.Id == uuid.Nil {
				t.Fatal("no id")
			}
			if loc := r.header.Get("Location"); loc != "/v1/jobs/"+j.Id.String() {
				t.Errorf("Location %q", loc)
			}
			tc.check(t, j)
			got := e.getJob(j.Id)
			tc.check(t, got)
			if !got.CreatedAt.Equal(j.CreatedAt) || got.CreatedAt.Location() != time.UTC {
				t.Errorf("created_at %v then %v", j.CreatedAt, got.CreatedAt)
			}
			if !strings.Contains(string(e.do("GET", "/v1/jobs/"+j.Id.String(), nil).body), `"next_run_at":"`) {
				t.Error("next_run_at missing from the JSON")
			}
		})
	}
}

// validationCase is a request body POST /v1/jobs refuses, the field its
// problem must name, and part of that field's message.
type validationCase struct {
	name  string
	body  any
	field string
	msg   string // part of the field's message, if set
}

// jobValidationCases are the bad bodies of POST /v1/jobs; the batch
// endpoint must refuse each of them, as an item, the same way.
func jobValidationCases() []validationCase {
	// with returns a valid body with one member changed (or removed, for nil).
	with := func(path string, v any) map[string]any {
		b := jobBody("valid-name")
		b["retry"] = map[string]any{"max_attempts": 3}
		parts := strings.Split(path, ".")
		m := b
		for _, p := range parts[:len(parts)-1] {
			m = m[p].(map[string]any)
		}
		if v == nil {
			delete(m, parts[len(parts)-1])
		} else {
			m[parts[len(parts)-1]] = v
		}
		return b
	}
	http1 := func(kv ...any) map[string]any {
		h := map[string]any{"type": "http", "url": "https://example.com/"}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i].(string)] = kv[i+1]
		}
		return h
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	return []validationCase{
		{"malformed JSON", `{"name": "x",`, "body", ""},
		{"not JSON", `hello`, "body", ""},
		{"empty body", ``, "body", ""},
		{"array body", `[1,2]`, "body", "object"},
		{"unknown top-level field", with("colour", "blue"), "colour", "unknown"},
		{"unknown schedule field", with("schedule.every", "1h"), "schedule.every", "unknown"},
		{"unknown handler field", with("handler.verb", "GET"), "handler.verb", "unknown"},
		{"unknown retry field", with("retry.tries", 2), "retry.tries", "unknown"},
		{"name missing", with("name", nil), "name", "required"},
		{"name empty", with("name", ""), "name", "required"},
		{"name not a string", with("name", 42), "name", "string"},
		{"name with a space", with("name", "nightly report"), "name", ""},
		{"name with a slash", with("name", "a/b"), "name", ""},
		{"name too long", with("name", strings.Repeat("a", 201)), "name", "200"},
		{"namespace bad", with("namespace", "ns!"), "namespace", ""},
		{"namespace empty", with("namespace", ""), "namespace", ""},
		{"schedule not an object", with("schedule", "daily"), "schedule", "object"},
		{"cron bad", with("schedule.cron", "every day"), "schedule.cron", ""},
		{"cron range", with("schedule.cron", "0 61 * * * *"), "schedule.cron", ""},
		{"cron L alone in day of week", with("schedule.cron", "0 0 9 ? * L"), "schedule.cron", "a lone L"},
		{"cron step of a day form", with("schedule.cron", "0 0 9 L/2 * *"), "schedule.cron", "L/2"},
		{"cron never runs", with("schedule.cron", "0 0 9 */20 * MON#2"), "schedule.cron", "never runs"},
		{"anchor without @every", with("schedule.anchor", "2030-01-01T00:00:00Z"), "schedule.anchor", "@every"},
		{"anchor with a fraction", with("schedule", map[string]any{"cron": "@every 1h", "anchor": "2030-01-01T00:00:00.5Z"}), "schedule.anchor", "whole second"},
		{"anchor not a time", with("schedule.anchor", "soon"), "schedule.anchor", "RFC 3339"},
		{"unknown time zone", with("schedule.timezone", "Mars/Base"), "schedule.timezone", "Mars/Base"},
		{"at in the past", map[string]any{"name": "x", "schedule": map[string]any{"at": past}, "handler": http1()}, "schedule.at", ""},
		{"at not a time", map[string]any{"name": "x", "schedule": map[string]any{"at": "tomorrow"}, "handler": http1()}, "schedule.at", "RFC 3339"},
		{"in not a duration", map[string]any{"name": "x", "schedule": map[string]any{"in": "soon"}, "handler": http1()}, "schedule.in", ""},
		{"in negative", map[string]any{"name": "x", "schedule": map[string]any{"in": "-5s"}, "handler": http1()}, "schedule.in", ""},
		{"cron and in", with("schedule.in", "5s"), "schedule", ""},
		{"start_at with at", map[string]any{"name": "x", "schedule": map[string]any{"at": "2099-01-01T00:00:00Z", "start_at": "2098-01-01T00:00:00Z"}, "handler": http1()}, "schedule.start_at", "cron"},
		{"end_at before start_at", with("schedule", map[string]any{"cron": "@hourly", "start_at": "2099-01-01T00:00:00Z", "end_at": "2098-01-01T00:00:00Z"}), "schedule.end_at", "start_at"},
		{"window over", with("schedule", map[string]any{"cron": "@hourly", "end_at": past}), "schedule.end_at", "no run"},
		{"max_runs 0", with("schedule.max_runs", 0), "schedule.max_runs", ""},
		{"max_runs not an integer", with("schedule.max_runs", "3"), "schedule.max_runs", "integer"},
		{"jitter not a duration", with("schedule.jitter", "some"), "schedule.jitter", "duration"},
		{"jitter too long", with("schedule.jitter", "48h"), "schedule.jitter", "longer"},
		{"missed policy unknown", with("missed", map[string]any{"policy": "some"}), "missed.policy", ""},
		{"missed grace too short", with("missed", map[string]any{"grace": "10ms"}), "missed.grace", "1s"},
		{"missed grace not a duration", with("missed", map[string]any{"grace": "soon"}), "missed.grace", "duration"},
		{"missed max 0", with("missed", map[string]any{"max": 0}), "missed.max", ""},
		{"missed max too big", with("missed", map[string]any{"max": 5000}), "missed.max", ""},
		{"missed unknown field", with("missed", map[string]any{"limit": 3}), "missed.limit", "unknown"},
		{"overlap unknown", with("overlap", "queue"), "overlap", ""},
		{"handler missing", with("handler", nil), "handler", "required"},
		{"handler type missing", with("handler", map[string]any{"url": "https://example.com"}), "handler.type", "required"},
		{"handler type unknown", with("handler", map[string]any{"type": "smtp"}), "handler.type", "http"},
		{"http without url", with("handler", map[string]any{"type": "http"}), "handler.url", "required"},
		{"http relative url", with("handler.url", "/hook"), "handler.url", "absolute"},
		{"http ftp url", with("handler.url", "ftp://example.com/x"), "handler.url", ""},
		{"http url garbage", with("handler.url", "http://exa mple.com:x/"), "handler.url", ""},
		{"http bad method", with("handler.method", "FETCH"), "handler.method", ""},
		{"http bad header name", with("handler.headers", map[string]string{"Bad Header": "x"}), "handler.headers", ""},
		{"http header value with newline", with("handler.headers", map[string]string{"X-A": "a\r\nX-B: b"}), "handler.headers.X-A", ""},
		{"http header not a string", with("handler.headers", map[string]any{"X-A": 1}), "handler.headers.X-A", "string"},
		{"http with a subject", with("handler.subject", "a.b"), "handler.subject", "not allowed"},
		{"nats without subject", with("handler", map[string]any{"type": "nats"}), "handler.subject", "required"},
		{"nats wildcard", with("handler", map[string]any{"type": "nats", "subject": "a.*"}), "handler.subject", ""},
		{"nats empty token", with("handler", map[string]any{"type": "nats", "subject": "a..b"}), "handler.subject", ""},
		{"nats tock subject", with("handler", map[string]any{"type": "nats", "subject": "tock.exec.http"}), "handler.subject", ""},
		{"nats with url", with("handler", map[string]any{"type": "nats", "subject": "a", "url": "https://x"}), "handler.url", "not allowed"},
		{"nats wait_reply not bool", with("handler", map[string]any{"type": "nats", "subject": "a", "wait_reply": "yes"}), "handler.wait_reply", ""},
		{"custom without name", with("handler", map[string]any{"type": "custom"}), "handler.name", "required"},
		{"custom bad name", with("handler", map[string]any{"type": "custom", "name": "send.email"}), "handler.name", ""},
		{"custom name too long", with("handler", map[string]any{"type": "custom", "name": strings.Repeat("a", 65)}), "handler.name", ""},
		{"custom named http", with("handler", map[string]any{"type": "custom", "name": "http"}), "handler.name", "built-in"},
		{"custom named nats", with("handler", map[string]any{"type": "custom", "name": "nats"}), "handler.name", "built-in"},
		{"max_attempts 0", with("retry.max_attempts", 0), "retry.max_attempts", ""},
		{"max_attempts 101", with("retry.max_attempts", 101), "retry.max_attempts", ""},
		{"max_attempts a string", with("retry.max_attempts", "3"), "retry.max_attempts", "integer"},
		{"max_attempts a fraction", with("retry.max_attempts", 2.5), "retry.max_attempts", "integer"},
		{"initial_backoff bad", with("retry.initial_backoff", "fast"), "retry.initial_backoff", ""},
		{"initial_backoff zero", with("retry.initial_backoff", "0s"), "retry.initial_backoff", ""},
		{"max_backoff negative", with("retry.max_backoff", "-1m"), "retry.max_backoff", ""},
		{"max_backoff below initial", with("retry", map[string]any{"initial_backoff": "1m", "max_backoff": "1s"}), "retry.max_backoff", ""},
		{"multiplier below 1", with("retry.multiplier", 0.5), "retry.multiplier", ""},
		{"multiplier a string", with("retry.multiplier", "2"), "retry.multiplier", "number"},
		{"jitter unknown", with("retry.jitter", "some"), "retry.jitter", ""},
		{"timeout bad", with("timeout", "forever"), "timeout", ""},
		{"timeout zero", with("timeout", "0s"), "timeout", ""},
		{"timeout over a day", with("timeout", "25h"), "timeout", "24h"},
		{"timeout a number", with("timeout", 30), "timeout", "string"},
		{"payload with a NUL", with("payload", map[string]any{"s": "a\x00b"}), "payload.s", "U+0000"},
		{"payload key with a NUL", with("payload", map[string]any{"k\x00": 1}), `payload.k\u0000`, "U+0000"},
		{"payload item with a NUL", with("payload", map[string]any{"list": []any{"ok", "\x00"}}), "payload.list[1]", "U+0000"},
		{"header value with a NUL", with("handler.headers", map[string]string{"X-A": "a\x00"}), "handler.headers.X-A", ""},
	}
}

func TestCreateJobValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range jobValidationCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs", tc.body)
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation {
				t.Errorf("type %q", p.Type)
			}
			if !hasField(p, tc.field) {
				t.Fatalf("errors do not name %q: %s", tc.field, fieldsOf(p))
			}
			if tc.msg != "" && !strings.Contains(fieldsOf(p), tc.msg) {
				t.Errorf("errors %s do not say %q", fieldsOf(p), tc.msg)
			}
			if p.Detail == nil || *p.Detail == "" {
				t.Error("no detail")
			}
		})
	}

	// Nothing was created by the rejected requests.
	r := e.do("GET", "/v1/jobs", nil)
	mustStatus(t, r, http.StatusOK)
	var list models.JobList
	r.decode(t, &list)
	if len(list.Items) != 0 {
		t.Errorf("%d jobs exist after invalid requests", len(list.Items))
	}
}

func TestCreateJobReportsEveryBadField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/v1/jobs", map[string]any{
		"name":     "bad name",
		"schedule": map[string]any{"cron": "0 0 * * * *", "timezone": "Mars/Base"},
		"handler":  map[string]any{"type": "http", "url": "nope", "verb": "GET"},
		"retry":    map[string]any{"max_attempts": "3", "jitter": "some"},
		"timeout":  "0s",
	})
	mustStatus(t, r, http.StatusBadRequest)
	p := r.problem(t)
	want := []string{"name", "schedule.timezone", "handler.url", "handler.verb", "retry.max_attempts", "retry.jitter", "timeout"}
	for _, f := range want {
		if !hasField(p, f) {
			t.Errorf("errors do not name %s: %s", f, fieldsOf(p))
		}
	}
	if len(*p.Errors) != len(want) {
		t.Errorf("%d errors, want %d: %s", len(*p.Errors), len(want), fieldsOf(p))
	}
}

func TestCreateJobWrongContentType(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, struct{ Store }{})
	req, _ := http.NewRequest("POST", e.http.URL+"/v1/jobs", strings.NewReader(`name=x`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType || res.Header.Get("Content-Type") != ProblemContentType {
		t.Errorf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

func TestCreateJobDuplicateName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob(jobBody("dup"))
	r := e.do("POST", "/v1/jobs", jobBody("dup"))
	mustStatus(t, r, http.StatusConflict)
	p := r.problem(t)
	if p.Type != ProblemConflict || p.Detail == nil || !strings.Contains(*p.Detail, "dup") {
		t.Errorf("problem %+v", p)
	}
	// The same name in another namespace is another job.
	b := jobBody("dup")
	b["namespace"] = "other"
	e.createJob(b)
}

func TestJobByIDErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	unknown := uuid.New().String()
	routes := []struct{ method, path string }{
		{"GET", "/v1/jobs/%s"},
		{"PATCH", "/v1/jobs/%s"},
		{"DELETE", "/v1/jobs/%s"},
		{"POST", "/v1/jobs/%s/pause"},
		{"POST", "/v1/jobs/%s/resume"},
		{"POST", "/v1/jobs/%s/run"},
		{"GET", "/v1/jobs/%s/executions"},
		{"GET", "/v1/jobs/%s/preview"},
		{"GET", "/v1/executions/%s"},
	}
	for _, rt := range routes {
		var body any
		if rt.method == "PATCH" {
			body = map[string]any{"timeout": "5s"}
		}
		t.Run(rt.method+" "+rt.path+" bad id", func(t *testing.T) {
			r := e.do(rt.method, fmt.Sprintf(rt.path, "not-a-uuid"), body)
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation || !hasField(p, "id") {
				t.Errorf("problem does not name id: %s", r.body)
			}
		})
		t.Run(rt.method+" "+rt.path+" unknown id", func(t *testing.T) {
			r := e.do(rt.method, fmt.Sprintf(rt.path, unknown), body)
			mustStatus(t, r, http.StatusNotFound)
			p := r.problem(t)
			if p.Type != ProblemNotFound || p.Detail == nil || !strings.Contains(*p.Detail, unknown) {
				t.Errorf("problem %s", r.body)
			}
		})
	}
}

func TestListJobsPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var names []string
	for i := range 7 {
		n := fmt.Sprintf("job-%02d", i)
		names = append(names, n)
		e.createJob(jobBody(n))
	}
	other := jobBody("other-1")
	other["namespace"] = "elsewhere"
	e.createJob(other)

	// Three pages of three, three and one in the default namespace.
	var got []string
	cursor := ""
	pages := 0
	for {
		q := "/v1/jobs?namespace=default&limit=3"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := e.do("GET", q, nil)
		mustStatus(t, r, http.StatusOK)
		var page models.JobList
		r.decode(t, &page)
		pages++
		for _, j := range page.Items {
			got = append(got, j.Name)
		}
		if page.NextCursor == nil {
			if strings.Contains(string(r.body), "next_cursor") {
				t.Error("last page carries next_cursor")
			}
			break
		}
		if len(page.Items) != 3 {
			t.Errorf("page %d has %d items", pages, len(page.Items))
		}
		cursor = *page.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if pages != 3 || strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%d pages: %v, want %v", pages, got, names)
	}

	list := func(q string) []string {
		t.Helper()
		r := e.do("GET", "/v1/jobs"+q, nil)
		mustStatus(t, r, http.StatusOK)
		var page models.JobList
		r.decode(t, &page)
		var out []string
		for _, j := range page.Items {
			out = append(out, j.Namespace+"/"+j.Name)
		}
		return out
	}
	if all := list(""); len(all) != 8 || all[0] != "default/job-00" || all[7] != "elsewhere/other-1" {
		t.Errorf("all jobs: %v", all)
	}
	if got := list("?name_prefix=other"); len(got) != 1 || got[0] != "elsewhere/other-1" {
		t.Errorf("prefix other: %v", got)
	}
	if got := list("?name_prefix=job-0&limit=2"); len(got) != 2 {
		t.Errorf("prefix job-0 limit 2: %v", got)
	}
	// State filter: pause two.
	r := e.do("GET", "/v1/jobs?name_prefix=job-0&limit=2", nil)
	var page models.JobList
	r.decode(t, &page)
	for _, j := range page.Items {
		mustStatus(t, e.do("POST", "/v1/jobs/"+j.Id.String()+"/pause", nil), http.StatusOK)
	}
	if got := list("?state=paused"); strings.Join(got, ",") != "default/job-00,default/job-01" {
		t.Errorf("paused: %v", got)
	}
	if got := list("?state=active&namespace=default"); len(got) != 5 {
		t.Errorf("active in default: %v", got)
	}
	if got := list("?state=completed"); len(got) != 0 {
		t.Errorf("completed: %v", got)
	}
	if r := e.do("GET", "/v1/jobs?state=completed", nil); !strings.Contains(string(r.body), `"items":[]`) {
		t.Errorf("empty page is not an empty array: %s", r.body)
	}
}

// TestListJobsFilters lists jobs by handler, set-based selectors and
// next run, alone and combined, and counts them.
func TestListJobsFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, team := range []string{"a", "b", "c", ""} {
		body := jobBody(fmt.Sprintf("job-%d", i))
		if team != "" {
			body["labels"] = map[string]string{"team": team}
		}
		if i%2 == 1 {
			body["handler"] = map[string]any{"type": "custom", "name": "worker"}
		}
		e.createJob(body)
	}
	list := func(q string) (names []string, page models.JobList) {
		t.Helper()
		r := e.do("GET", "/v1/jobs?namespace=default&"+q, nil)
		mustStatus(t, r, http.StatusOK)
		r.decode(t, &page)
		for _, j := range page.Items {
			names = append(names, j.Name)
		}
		return names, page
	}
	for _, tc := range []struct{ query, want string }{
		{"handler=worker", "job-1,job-3"},
		{"handler=http", "job-0,job-2"},
		{"handler=nats", ""},
		{"selector=" + url.QueryEscape("team in (a,c)"), "job-0,job-2"},
		{"selector=" + url.QueryEscape("team notin (a,c)"), "job-1,job-3"},
		{"selector=" + url.QueryEscape("team in (a,b),team!=a") + "&handler=worker", "job-1"},
		{"selector=!team", "job-3"},
		{"next_run_after=2000-01-01T00:00:00Z", "job-0,job-1,job-2,job-3"},
		{"next_run_before=2000-01-01T00:00:00Z", ""},
		{"next_run_after=2000-01-01T00:00:00Z&next_run_before=2999-01-01T00:00:00%2B01:00&handler=worker", "job-1,job-3"},
		{"next_run_after=2000-01-01T00:00:00Z&state=paused", ""},
	} {
		got, _ := list(tc.query)
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s: %v, want %s", tc.query, got, tc.want)
		}
	}
	// The count is of every match, whatever the page; absent unless asked.
	if _, page := list("limit=1&count=true&selector=team"); len(page.Items) != 1 || page.Total == nil || *page.Total != 3 || !*page.TotalExact {
		t.Errorf("count of 3: %+v", page)
	}
	if _, page := list("handler=nats&count=true"); page.Total == nil || *page.Total != 0 || !*page.TotalExact {
		t.Errorf("count of none: %+v", page)
	}
	if r := e.do("GET", "/v1/jobs?limit=1", nil); strings.Contains(string(r.body), "total") {
		t.Errorf("a total not asked for: %s", r.body)
	}
}

func TestListJobsBadQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ query, field string }{
		{"state=sleeping", "state"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=-1", "limit"},
		{"limit=ten", "limit"},
		{"cursor=bogus", "cursor"},
		{"namespace=a%20b", "namespace"},
		{"name_prefix=" + strings.Repeat("x", 201), "name_prefix"},
		{"name_prefix=a%00", "name_prefix"},
		{"name_prefix=a%20b", "name_prefix"},
		{"selector=team%20in%20()", "selector"},
		{"selector=team%20in%20(a", "selector"},
		{"selector=team%20notin%20(-a)", "selector"},
		{"selector=team%3D%3D%3D", "selector"},
		{"handler=a%20b", "handler"},
		{"handler=a%00", "handler"},
		{"next_run_after=tomorrow", "next_run_after"},
		{"next_run_before=2026-13-01T00:00:00Z", "next_run_before"},
		{"next_run_before=24h", "next_run_before"},
		{"count=maybe", "count"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.do("GET", "/v1/jobs?"+tc.query, nil)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, tc.field) {
				t.Errorf("errors do not name %s: %s", tc.field, fieldsOf(p))
			}
		})
	}
}

func TestPatchJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := jobBody("patched")
	body["payload"] = map[string]any{"a": 1}
	body["timeout"] = "10s"
	j := e.createJob(body)
	path := "/v1/jobs/" + j.Id.String()

	// Handler, payload, retry and timeout; the schedule is untouched.
	r := e.do("PATCH", path, map[string]any{
		"handler": map[string]any{"type": "custom", "name": "reports"},
		"payload": []string{"x"},
		"retry":   map[string]any{"max_attempts": 5, "jitter": "none"},
		"timeout": "2m",
	})
	mustStatus(t, r, http.StatusOK)
	var p models.Job
	r.decode(t, &p)
	if p.Handler.Type != models.HandlerTypeCustom || *p.Handler.Name != "reports" || p.Handler.Url != nil ||
		string(*p.Payload) != `["x"]` || *p.Retry.MaxAttempts != 5 || *p.Timeout != "2m" {
		t.Errorf("patched job %+v", p)
	}
	if !p.NextRunAt.Equal(*j.NextRunAt) || *p.Schedule.Cron != *j.Schedule.Cron {
		t.Errorf("schedule changed: %v %+v", p.NextRunAt, p.Schedule)
	}
	if !p.UpdatedAt.After(j.UpdatedAt) && !p.UpdatedAt.Equal(j.UpdatedAt) {
		t.Errorf("updated_at went back: %v → %v", j.UpdatedAt, p.UpdatedAt)
	}
	if g := e.getJob(j.Id); *g.Handler.Name != "reports" || *g.Timeout != "2m" {
		t.Errorf("GET after PATCH: %+v", g)
	}

	// null removes payload and timeout; {} resets retry.
	r = e.do("PATCH", path, `{"payload": null, "timeout": null, "retry": {}}`)
	mustStatus(t, r, http.StatusOK)
	p = models.Job{}
	r.decode(t, &p)
	if p.Payload != nil || p.Timeout != nil || p.Retry != nil {
		t.Errorf("after clearing: %s", r.body)
	}

	// A new schedule recomputes next_run_at.
	r = e.do("PATCH", path, map[string]any{"schedule": map[string]any{"in": "1h"}})
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if d := time.Until(*p.NextRunAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("next_run_at %v is not an hour away", p.NextRunAt)
	}

	// A paused job stays paused when its schedule changes.
	mustStatus(t, e.do("POST", path+"/pause", nil), http.StatusOK)
	r = e.do("PATCH", path, map[string]any{"schedule": map[string]any{"cron": "*/5 * * * * *"}})
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if p.State != models.JobStatePaused || p.NextRunAt != nil || *p.Schedule.Cron != "*/5 * * * * *" {
		t.Errorf("paused job after schedule change: %s", r.body)
	}
	// ... and resumes on the new one.
	r = e.do("POST", path+"/resume", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if p.State != models.JobStateActive || p.NextRunAt == nil || p.NextRunAt.Second()%5 != 0 || time.Until(*p.NextRunAt) > 6*time.Second {
		t.Errorf("resumed job: %s", r.body)
	}

	// An empty patch changes nothing.
	r = e.do("PATCH", path, map[string]any{})
	mustStatus(t, r, http.StatusOK)

	// Bad patches.
	for _, tc := range []struct {
		name  string
		body  any
		field string
	}{
		{"name cannot change", map[string]any{"name": "renamed"}, "name"},
		{"namespace cannot change", map[string]any{"namespace": "x"}, "namespace"},
		{"bad zone", map[string]any{"schedule": map[string]any{"cron": "0 0 * * * *", "timezone": "Mars/Base"}}, "schedule.timezone"},
		{"at in the past", map[string]any{"schedule": map[string]any{"at": "2001-01-01T00:00:00Z"}}, "schedule.at"},
		{"schedule null", `{"schedule": null}`, "schedule"},
		{"handler null", `{"handler": null}`, "handler"},
		{"bad handler", map[string]any{"handler": map[string]any{"type": "nats"}}, "handler.subject"},
		{"bad retry", map[string]any{"retry": map[string]any{"max_attempts": 1000}}, "retry.max_attempts"},
		{"bad timeout", map[string]any{"timeout": "48h"}, "timeout"},
		{"malformed", `{"timeout":`, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PATCH", path, tc.body)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, tc.field) {
				t.Errorf("errors do not name %s: %s", tc.field, fieldsOf(p))
			}
		})
	}
	// A bad patch of an unknown job is still a 400.
	r = e.do("PATCH", "/v1/jobs/"+uuid.NewString(), map[string]any{"timeout": "forever"})
	mustStatus(t, r, http.StatusBadRequest)
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(map[string]any{
		"name":     "every-minute",
		"schedule": map[string]any{"cron": "0 * * * * *"},
		"handler":  map[string]any{"type": "http", "url": "https://example.com/"},
	})
	path := "/v1/jobs/" + j.Id.String()

	for range 2 { // pausing twice is pausing once
		r := e.do("POST", path+"/pause", nil)
		mustStatus(t, r, http.StatusOK)
		var p models.Job
		r.decode(t, &p)
		if p.State != models.JobStatePaused || p.NextRunAt != nil {
			t.Fatalf("paused: %s", r.body)
		}
	}
	if g := e.getJob(j.Id); g.State != models.JobStatePaused || g.NextRunAt != nil {
		t.Errorf("GET after pause: %+v", g)
	}
	if !strings.Contains(string(e.do("GET", path, nil).body), `"next_run_at":null`) {
		t.Error("a paused job's next_run_at is not null")
	}

	for range 2 {
		r := e.do("POST", path+"/resume", nil)
		mustStatus(t, r, http.StatusOK)
	}
	g := e.getJob(j.Id)
	if g.State != models.JobStateActive || g.NextRunAt == nil || g.NextRunAt.Second() != 0 ||
		g.NextRunAt.Before(time.Now().Add(-time.Second)) || time.Until(*g.NextRunAt) > time.Minute {
		t.Errorf("GET after resume: %+v", g)
	}

	// A one-shot job whose moment passed while it was paused runs on resume.
	at := e.createJob(map[string]any{
		"name":     "once",
		"schedule": map[string]any{"at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		"handler":  map[string]any{"type": "http", "url": "https://example.com/"},
	})
	mustStatus(t, e.do("POST", "/v1/jobs/"+at.Id.String()+"/pause", nil), http.StatusOK)
	sj, err := e.store.GetJob(e.ctx, at.Id)
	if err != nil {
		t.Fatal(err)
	}
	passed := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	sj.Schedule.At = &passed
	if err := e.store.UpdateJob(e.ctx, sj); err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/v1/jobs/"+at.Id.String()+"/resume", nil)
	mustStatus(t, r, http.StatusOK)
	var p models.Job
	r.decode(t, &p)
	if p.NextRunAt == nil || p.NextRunAt.Before(passed.Add(time.Minute-time.Second)) || time.Until(*p.NextRunAt) > time.Second {
		t.Errorf("resumed past one-shot: next_run_at %v, want now", p.NextRunAt)
	}

	// A completed job can be neither resumed nor paused.
	done := e.complete(at.Id)
	for _, action := range []string{"resume", "pause"} {
		r := e.do("POST", "/v1/jobs/"+done.String()+"/"+action, nil)
		mustStatus(t, r, http.StatusConflict)
		if p := r.problem(t); p.Type != ProblemConflict {
			t.Errorf("%s: type %q", action, p.Type)
		}
	}
	// A new schedule brings it back.
	r = e.do("PATCH", "/v1/jobs/"+done.String(), map[string]any{"schedule": map[string]any{"in": "1m"}})
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if p.State != models.JobStateActive || p.NextRunAt == nil {
		t.Errorf("completed job with a new schedule: %s", r.body)
	}
}

// complete fires a one-shot job through the store, the way the scanner
// does, which completes it.
func (e *env) complete(id uuid.UUID) uuid.UUID {
	e.t.Helper()
	j, err := e.store.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.ClaimBucket(e.ctx, j.Bucket, "test-node", 1); err != nil {
		e.t.Fatal(err)
	}
	res, err := e.store.Fire(e.ctx, "test-node", map[int]int64{j.Bucket: 1},
		[]store.Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: *j.NextRunAt}})
	if err != nil {
		e.t.Fatal(err)
	}
	_ = res
	if g := e.getJob(id); g.State != models.JobStateCompleted {
		e.t.Fatalf("job %s is %s after firing, want completed", id, g.State)
	}
	return id
}

func TestDeleteJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("doomed"))
	path := "/v1/jobs/" + j.Id.String()
	r := e.do("DELETE", path, nil)
	mustStatus(t, r, http.StatusNoContent)
	if len(r.body) != 0 {
		t.Errorf("204 with a body: %s", r.body)
	}
	mustStatus(t, e.do("GET", path, nil), http.StatusNotFound)
	mustStatus(t, e.do("DELETE", path, nil), http.StatusNotFound)
	// The name is free again.
	e.createJob(jobBody("doomed"))
}

var _ = domain.JobActive

// TestStartAtPastYear9999: a cron schedule whose first run from its
// start_at comes after the year 9999, which no RFC 3339 time can write,
// is a 400 naming schedule.start_at, wherever a schedule is sent (once
// the job was stored, its create answered 500, and so did every list
// holding it); one whose first run is in 9999 is taken.
func TestStartAtPastYear9999(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	late := map[string]any{"cron": "@yearly", "start_at": "9999-06-01T00:00:00Z"}
	j := e.createJob(jobBody("stored"))
	for _, req := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/v1/jobs", map[string]any{"name": "late", "schedule": late, "handler": jobBody("x")["handler"]}, "schedule.start_at"},
		{"PATCH", "/v1/jobs/" + j.Id.String(), map[string]any{"schedule": late}, "schedule.start_at"},
		{"POST", "/v1/schedules:preview", map[string]any{"schedule": late}, "schedule.start_at"},
		{"POST", "/v1/jobs", map[string]any{"name": "monthly", "schedule": map[string]any{"cron": "@monthly", "start_at": "9999-12-01T00:00:01Z"},
			"handler": jobBody("x")["handler"]}, "schedule.start_at"},
	} {
		r := e.do(req.method, req.path, req.body)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, req.field) {
			t.Errorf("%s %s: errors %s, want %s", req.method, req.path, fieldsOf(p), req.field)
		}
	}
	r := e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{map[string]any{"name": "late", "schedule": late, "handler": jobBody("x")["handler"]}}})
	mustStatus(t, r, http.StatusOK)
	var res models.JobBatchResult
	r.decode(t, &res)
	if p := res.Items[0].Problem; res.Failed != 1 || p == nil || !hasField(*p, "jobs[0].schedule.start_at") {
		t.Errorf("batch: %s, want its job refused naming jobs[0].schedule.start_at", r.body)
	}

	in9999 := e.createJob(map[string]any{"name": "in-9999", "schedule": map[string]any{"cron": "@monthly", "start_at": "9999-06-01T00:00:00Z"},
		"handler": jobBody("x")["handler"]})
	if in9999.NextRunAt == nil || in9999.NextRunAt.Year() != 9999 {
		t.Errorf("next run %v, want one in 9999", in9999.NextRunAt)
	}
	mustStatus(t, e.do("GET", "/v1/jobs", nil), http.StatusOK)
}
