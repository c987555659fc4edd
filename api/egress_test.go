package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/egress"
)

// A job whose http URL the cluster's policy refuses by its text is a 400
// naming handler.url, on create and on PATCH; with the default policy
// (no Config.HTTPPolicy) every spelling of a refused address is refused.
func TestCreateJobRefusedURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for url, want := range map[string]string{
		"http://127.0.0.1:2379/v3/kv/range":               "127.0.0.1 is a loopback address",
		"http://127.1/":                                   "ambiguous numeric host",
		"http://0x7f000001/":                              "ambiguous numeric host",
		"http://2130706433/":                              "ambiguous numeric host",
		"http://0177.0.0.1/":                              "ambiguous numeric host",
		"http://[::ffff:127.0.0.1]/":                      "127.0.0.1 is a loopback address",
		"http://[::1]/":                                   "::1 is a loopback address",
		"http://localhost:8080/":                          "localhost is a loopback name",
		"http://10.0.0.5/":                                "10.0.0.5 is a private address",
		"http://192.168.1.1/":                             "192.168.1.1 is a private address",
		"http://172.16.0.1/":                              "172.16.0.1 is a private address",
		"http://[fd00::1]/":                               "is a unique-local address",
		"http://[fe80::1]/":                               "is a link-local address",
		"http://169.254.169.254/latest/meta-data/":        "169.254.169.254 is a cloud metadata address",
		"http://metadata.google.internal/computeMetadata": "metadata.google.internal is a cloud metadata service",
		"https://user:secret@example.com/hook":            "credentials",
	} {
		t.Run(url, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs", urlJob("refused", url))
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation || !hasField(p, "handler.url") {
				t.Fatalf("problem %s, want a validation problem naming handler.url", fieldsOf(p))
			}
			if msg := fieldsOf(p); !strings.Contains(msg, "refused: ") || !strings.Contains(msg, want) {
				t.Errorf("errors %s do not say %q", msg, want)
			}
			if strings.Contains(string(r.body), "secret") {
				t.Errorf("the problem shows the URL's password: %s", r.body)
			}
		})
	}

	j := e.createJob(jobBody("public"))
	r := e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"handler": map[string]any{"type": "http", "url": "http://10.1.1.1/x"}})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); !hasField(p, "handler.url") {
		t.Errorf("PATCH to a private address: %s, want handler.url", fieldsOf(p))
	}
}

// The cluster's policy decides: tockd dev's allows local targets but
// never tock's own addresses.
func TestCreateJobURLPolicy(t *testing.T) {
	t.Parallel()
	p, err := egress.New(context.Background(), egress.Rules{AllowPrivate: true,
		Own: []egress.Own{{What: "etcd", Addr: "127.0.0.1:2379"}, {What: "API", Addr: "127.0.0.1:8080"}}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, openStore(t), func(c *Config) { c.HTTPPolicy = p })
	mustStatus(t, e.do("POST", "/v1/jobs", urlJob("local", "http://127.0.0.1:9000/hook")), http.StatusCreated)
	for _, url := range []string{"http://127.0.0.1:2379/v3/kv/put", "http://localhost:8080/v1/jobs", "http://[::ffff:127.0.0.1]:2379/"} {
		r := e.do("POST", "/v1/jobs", urlJob("own", url))
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, "handler.url") || !strings.Contains(fieldsOf(p), "is tock's own") {
			t.Errorf("%s: %s, want handler.url refused as tock's own", url, fieldsOf(p))
		}
	}
}

// urlJob is jobBody(name) with an http handler calling url.
func urlJob(name, url string) map[string]any {
	b := jobBody(name)
	b["handler"] = map[string]any{"type": "http", "url": url}
	return b
}
