package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
)

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := specDoc()
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi %q, want 3.0.x", doc.OpenAPI)
	}
}

// The embedded document (what /openapi.json serves and the generated code
// was made from) must be openapi.yaml as it is: run go generate ./api.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	// A document of its own: specDoc's is shared with other tests, and
	// normalizedOperationIDs changes it.
	fromFile, err := openapi3.NewLoader().LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	// oapi-codegen capitalises operation ids in the copy it embeds.
	a, _ := json.Marshal(normalizedOperationIDs(fromFile))
	b, _ := json.Marshal(normalizedOperationIDs(embedded))
	if string(a) != string(b) {
		t.Fatal("openapi.gen.go is stale: run go generate ./api")
	}
}

func normalizedOperationIDs(doc *openapi3.T) *openapi3.T {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			op.OperationID = strings.ToLower(op.OperationID)
		}
	}
	return doc
}

// echoParam is a path parameter in an Echo route; a colon escaped with a
// backslash (/v1/jobs\:batch) is a literal one.
var echoParam = regexp.MustCompile(`(^|[^\\]):([A-Za-z0-9_]+)`)

// documentPath turns an Echo route into the OpenAPI document's form.
func documentPath(route string) string {
	return strings.ReplaceAll(echoParam.ReplaceAllString(route, "$1{$2}"), `\:`, ":")
}

// Every route Echo serves under /v1 is documented, and every documented
// operation is routed.
func TestRoutesMatchDocument(t *testing.T) {
	doc, err := specDoc()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: struct{ Store }{}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	for _, r := range srv.echo.Routes() {
		if r.Method == "echo_route_not_found" {
			continue
		}
		routed[r.Method+" "+documentPath(r.Path)] = true
	}
	// The custom methods after a parameter are one route each
	// (verbs.go), which stands for its methods.
	for _, r := range srv.verbRoutes {
		routed[r] = true
		delete(routed, r[:strings.LastIndexByte(r, ':')])
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for r := range routed {
		if strings.Contains(r, " /v1/") && !documented[r] {
			t.Errorf("route %s is served but not in openapi.yaml", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("operation %s is documented but not routed", d)
		}
	}
	if t.Failed() {
		t.Logf("routed: %v", keys(routed))
		t.Logf("documented: %v", keys(documented))
	}
	if len(documented) < 16 {
		t.Errorf("only %d documented operations", len(documented))
	}
}

func TestServesItsDocument(t *testing.T) {
	e := newEnvWith(t, struct{ Store }{})
	r := e.do("GET", "/openapi.json", nil)
	mustStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content type %q", ct)
	}
	doc, err := openapi3.NewLoader().LoadFromData(r.body)
	if err != nil {
		t.Fatalf("served document does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("served document is invalid: %v", err)
	}
	if doc.Paths.Find("/v1/jobs/{id}") == nil {
		t.Error("served document lacks /v1/jobs/{id}")
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The public operations declare the 400 their parameters' check can give
// (a query value that is not UTF-8 text), and give it as documented.
func TestPublicOperationsAnswerBadParametersWith400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		r := e.do("GET", path+"?verbose=%FF", nil)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, "verbose") {
			t.Errorf("GET %s: problem fields %s, want verbose", path, fieldsOf(p))
		}
	}
}

// A payload may be any JSON value, null included (OpenAPI 3.0 has no
// "any type, or null" without a type: the document says anyOf the JSON
// types, the object one nullable); each is accepted as sent and read back.
func TestPayloadTakesAnyJSONValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, payload := range []string{`{"a":[1,{"b":null}]}`, `[1,"x"]`, `"text"`, `12.5`, `true`, `null`} {
		body := jobBody(fmt.Sprintf("any-%d", i))
		body["payload"] = json.RawMessage(payload)
		j := e.createJob(body)
		got := "null"
		if j.Payload != nil {
			got = string(*j.Payload)
		}
		if got != payload {
			t.Errorf("payload %s read back as %s", payload, got)
		}
		r := e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"payload": json.RawMessage(`{"patched":true}`)})
		mustStatus(t, r, http.StatusOK)
	}
}
