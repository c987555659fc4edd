package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// openStore opens a migrated, initialised store on a fresh database.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st := storetest.New(t, 16)
	return st
}

// specDoc is the document loaded from openapi.yaml, with a router over it.
var specDoc = sync.OnceValues(func() (*openapi3.T, error) {
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		return nil, err
	}
	return openapi3.NewLoader().LoadFromData(raw)
})

var specRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := specDoc()
	if err != nil {
		return nil, err
	}
	return legacy.NewRouter(doc)
})

// env is an API server over a store, for one test.
type env struct {
	t     *testing.T
	st    Store
	srv   *Server
	http  *httptest.Server
	logs  *syncBuffer
	ctx   context.Context
	reg   *prometheus.Registry
	store *store.Store // the real store, when st is or wraps one
}

// newEnv serves the API over a fresh real store.
func newEnv(t *testing.T) *env {
	t.Helper()
	st := openStore(t)
	e := newEnvWith(t, st)
	e.store = st
	return e
}

// newEnvWith serves the API over st; opts change the server's Config.
func newEnvWith(t *testing.T, st Store, opts ...func(*Config)) *env {
	t.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg := Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Registry: reg,
		Open:     true, // the tests of authentication set it false (auth_test.go)
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, st: st, srv: srv, http: hs, logs: logs, ctx: context.Background(), reg: reg}
}

// resp is a response as the tests look at it.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v (zeroed first), failing the test if
// it cannot.
func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r resp) problem(t *testing.T) models.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != ProblemContentType {
		t.Fatalf("content type %q, want %q; body %s", ct, ProblemContentType, r.body)
	}
	var p models.Problem
	r.decode(t, &p)
	if p.Status != r.status {
		t.Errorf("problem status %d, response status %d", p.Status, r.status)
	}
	if p.Type == "" || p.Title == "" {
		t.Errorf("problem without type or title: %s", r.body)
	}
	return p
}

// do sends a request (body: nil, a string sent as is, or a value sent as
// JSON) and validates the response against the OpenAPI document whenever
// the document describes the route.
func (e *env) do(method, path string, body any) resp {
	e.t.Helper()
	return e.doHeaders(method, path, body, nil)
}

// doHeaders is do with request headers.
func (e *env) doHeaders(method, path string, body any, headers map[string]string) resp {
	e.t.Helper()
	var rd io.Reader
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.t.Fatal(err)
		}
	}
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, body: got}
	e.validate(req, raw, r)
	return r
}

// validate checks a response against the document.
func (e *env) validate(req *http.Request, reqBody []byte, r resp) {
	e.t.Helper()
	router, err := specRouter()
	if err != nil {
		e.t.Fatal(err)
	}
	// The router matches paths relative to the document's (absent)
	// servers: give it the request as the client addressed it.
	rq := req.Clone(e.ctx)
	rq.URL.Scheme, rq.URL.Host = "", ""
	route, params, err := router.FindRoute(rq)
	if err != nil {
		route, params, err = verbRouteOf(rq)
	}
	if err != nil {
		if r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
			e.t.Errorf("%s %s → %d: route not in the OpenAPI document: %v", req.Method, req.URL.Path, r.status, err)
		}
		return // unknown routes and methods: the 404 and 405 tests
	}
	rq.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: rq, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(e.ctx, in); err != nil {
		e.t.Errorf("%s %s → %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL.Path, r.status, err, r.body)
	}
}

// verbRouteOf finds the route of a custom method after a path parameter
// (/v1/applysets/{name}:plan), which kin-openapi's router does not match.
func verbRouteOf(req *http.Request) (*routers.Route, map[string]string, error) {
	doc, err := specDoc()
	if err != nil {
		return nil, nil, err
	}
	path := req.URL.Path
	slash, colon := strings.LastIndexByte(path, '/'), strings.LastIndexByte(path, ':')
	if slash < 0 || colon < slash {
		return nil, nil, routers.ErrPathNotFound
	}
	for tmpl, item := range doc.Paths.Map() {
		ts, tc := strings.LastIndexByte(tmpl, '/'), strings.LastIndexByte(tmpl, ':')
		if ts < 0 || tc < ts || tmpl[:ts] != path[:slash] || tmpl[tc:] != path[colon:] || !strings.HasPrefix(tmpl[ts+1:], "{") {
			continue
		}
		op := item.GetOperation(req.Method)
		if op == nil {
			return nil, nil, routers.ErrMethodNotAllowed
		}
		param := strings.Trim(tmpl[ts+1:tc], "{}")
		return &routers.Route{Spec: doc, Path: tmpl, PathItem: item, Method: req.Method, Operation: op},
			map[string]string{param: path[slash+1 : colon]}, nil
	}
	return nil, nil, routers.ErrPathNotFound
}

// mustStatus fails the test unless r has status want.
func mustStatus(t *testing.T, r resp, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
}

// createJob creates a job through the API and returns it.
func (e *env) createJob(body map[string]any) models.Job {
	e.t.Helper()
	r := e.do("POST", "/v1/jobs", body)
	mustStatus(e.t, r, http.StatusCreated)
	var j models.Job
	r.decode(e.t, &j)
	return j
}

// job is a valid job body to tweak.
func jobBody(name string) map[string]any {
	return map[string]any{
		"name":     name,
		"schedule": map[string]any{"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"},
		"handler":  map[string]any{"type": "http", "url": "https://example.com/hook"},
	}
}

func (e *env) getJob(id uuid.UUID) models.Job {
	e.t.Helper()
	r := e.do("GET", "/v1/jobs/"+id.String(), nil)
	mustStatus(e.t, r, http.StatusOK)
	var j models.Job
	r.decode(e.t, &j)
	return j
}

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hasField reports whether the problem names field.
func hasField(p models.Problem, field string) bool {
	if p.Errors == nil {
		return false
	}
	for _, fe := range *p.Errors {
		if fe.Field == field {
			return true
		}
	}
	return false
}

func fieldsOf(p models.Problem) string {
	if p.Errors == nil {
		return "(none)"
	}
	var s []string
	for _, fe := range *p.Errors {
		s = append(s, fe.Field+": "+fe.Message)
	}
	return strings.Join(s, "; ")
}
