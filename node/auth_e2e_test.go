package node_test

// API authentication end to end: tockd serve requires keys, tockd keys
// create makes the first, and JWT bearer tokens of an identity provider.
// These tests call the API as raw HTTP: they check statuses, headers and
// problem bodies that the generated client would decode away.

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/node/nodetest"
)

// keysCreate runs tockd keys create as a child process and returns its
// stdout and stderr.
func keysCreate(t *testing.T, pg string, args ...string) (string, string) {
	t.Helper()
	cmd := nodetest.Command(t, append([]string{"keys", "create", "--postgres-url", pg}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tockd keys create %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// keyLine is an API key alone on a line, as tockd keys create prints it.
var keyLine = regexp.MustCompile(`^tock_[0-9A-Za-z]{12}_[0-9A-Za-z]{32}\n$`)

// callAPI sends a request with key (none when "") and returns the status
// and body.
func callAPI(t *testing.T, key, method, url string, body any) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// tockd serve is secure by default: with no key it exits at start and
// says how to make one (or to choose --auth none); tockd keys create
// prints the first key alone on stdout; with it the API answers, without
// it 401, and the keys it makes are limited to their role; health checks
// need no key.
func TestServeRequiresKeys(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := nodetest.Command(t, e.ServeArgs("k", fmt.Sprintf("127.0.0.1:%d", port), "--auth", "keys")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("tockd serve without keys exited 0")
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("tockd serve without keys is still running after 60 s")
	}
	for _, want := range []string{"tockd keys create", "--auth none"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("its message does not name %q:\n%s", want, stderr.String())
		}
	}

	out, errOut := keysCreate(t, e.PG, "--namespace", "*", "--role", "admin", "--name", "bootstrap")
	if !keyLine.MatchString(out) {
		t.Fatalf("stdout %q is not one key alone on a line", out)
	}
	admin := strings.TrimSpace(out)
	if !strings.Contains(errOut, "role admin in every namespace") || strings.Contains(errOut, admin) {
		t.Errorf("stderr %q", errOut)
	}

	mport, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	base := e.StartProcess(t, "k", "--auth", "keys", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport)).URL
	status, h, body := callAPI(t, "", "GET", base+"/v1/jobs", nil)
	if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") ||
		h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("no key: %d %q %s", status, h.Get("WWW-Authenticate"), body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _, _ := callAPI(t, "", "GET", base+path, nil); status != http.StatusOK {
			t.Errorf("GET %s without a key: %d", path, status)
		}
	}
	if status, _, body := callAPI(t, admin, "GET", base+"/v1/jobs", nil); status != http.StatusOK {
		t.Fatalf("admin key: %d %s", status, body)
	}
	if status, _, _ := callAPI(t, "", "GET", base+"/metrics", nil); status != http.StatusUnauthorized {
		t.Errorf("/metrics without a key: %d", status)
	}
	if status, _, _ := callAPI(t, admin, "GET", base+"/metrics", nil); status != http.StatusOK {
		t.Errorf("/metrics with a key for every namespace: %d", status)
	}
	// --metrics-addr serves them without a key, and the API nothing else.
	if status, _, body := callAPI(t, "", "GET", metricsURL, nil); status != http.StatusOK || !strings.Contains(body, "tock_http_request_duration_seconds") {
		t.Errorf("--metrics-addr /metrics: %d", status)
	}
	if status, _, _ := callAPI(t, "", "GET", strings.TrimSuffix(metricsURL, "metrics")+"v1/jobs", nil); status != http.StatusNotFound {
		t.Errorf("--metrics-addr serves the API: %d", status)
	}

	status, _, body = callAPI(t, admin, "POST", base+"/v1/keys", map[string]any{"namespace": "team-a", "role": "reader"})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/keys: %d %s", status, body)
	}
	var made struct{ Key string }
	if err := json.Unmarshal([]byte(body), &made); err != nil || !keyLine.MatchString(made.Key+"\n") {
		t.Fatalf("made %s", body)
	}
	if status, _, body := callAPI(t, made.Key, "GET", base+"/v1/jobs", nil); status != http.StatusOK {
		t.Errorf("reader lists its jobs: %d %s", status, body)
	}
	job := map[string]any{"namespace": "team-a", "name": "nope", "schedule": map[string]any{"cron": "0 0 * * * *"},
		"handler": map[string]any{"type": "nats", "subject": "work.nope"}}
	status, _, body = callAPI(t, made.Key, "POST", base+"/v1/jobs", job)
	if status != http.StatusForbidden || !strings.Contains(body, "role reader in namespace team-a does not allow jobs.create") {
		t.Errorf("reader creating a job: %d %s", status, body)
	}
	if status, _, _ := callAPI(t, made.Key, "GET", base+"/v1/nodes", nil); status != http.StatusForbidden {
		t.Errorf("team-a reader reading the nodes: %d", status)
	}
}

// With --jwks-url (and its issuer and audience) serve starts without any
// key, and the identity provider's tokens call the API with the roles
// their claim gives. (That half the JWT flags, or a JWK Set over plain
// http to another machine, stop it at start is cmd/tockd's
// TestServeRefusesHalfJWTFlags.)
func TestServeWithJWKS(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	set, _ := json.Marshal(map[string]any{"keys": []any{map[string]any{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	defer jwks.Close()

	e := nodetest.New(t)
	base := e.StartProcess(t, "j", "--auth", "keys", "--jwks-url", jwks.URL, "--jwt-issuer", "https://idp.test", "--jwt-audience", "tock").URL
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "https://idp.test", "aud": "tock", "sub": "ci",
		"exp": time.Now().Add(time.Hour).Unix(), "tock_roles": map[string]any{"team-a": "editor"}})
	tok.Header["kid"] = "k1"
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	job := map[string]any{"namespace": "team-a", "name": "from-ci", "schedule": map[string]any{"cron": "0 0 * * * *"},
		"handler": map[string]any{"type": "nats", "subject": "work.ci"}}
	if status, _, body := callAPI(t, signed, "POST", base+"/v1/jobs", job); status != http.StatusCreated {
		t.Fatalf("token create: %d %s", status, body)
	}
	if status, _, _ := callAPI(t, "", "GET", base+"/v1/jobs", nil); status != http.StatusUnauthorized {
		t.Errorf("no token: %d", status)
	}
	if status, _, _ := callAPI(t, signed, "GET", base+"/v1/nodes", nil); status != http.StatusForbidden {
		t.Errorf("team-a editor reading the nodes: %d", status)
	}
}
