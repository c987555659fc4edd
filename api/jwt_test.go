package api

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
)

// idp is an identity provider: an RSA key served as a JWK Set.
type idp struct {
	key *rsa.PrivateKey
	url string
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	set, _ := json.Marshal(map[string]any{"keys": []any{map[string]any{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(hs.Close)
	return &idp{key: key, url: hs.URL}
}

// token signs claims (iss, aud, exp, iat filled in unless given).
func (p *idp) token(t *testing.T, claims jwt.MapClaims, key *rsa.PrivateKey) string {
	t.Helper()
	full := jwt.MapClaims{"iss": "https://idp.test", "aud": "tock", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		full[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, full)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// JWT bearer tokens verified against a JWK Set URL, with their roles
// claim mapped to grants, beside keys; a token of another issuer or
// audience, expired, or signed by another key, is a 401.
func TestJWTBearerTokens(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kf, err := keyfunc.NewDefaultCtx(ctx, []string{p.url})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) {
		c.Open = false
		c.JWT = &JWTConfig{Keyfunc: kf.Keyfunc, Issuer: "https://idp.test", Audience: "tock"}
	})
	e.store = st
	a := &authEnv{env: e}
	a.admin = a.key(auth.AllNamespaces, "admin", nil) // keys work beside tokens
	other := a.fixtureJob("team-b")

	editor := p.token(t, jwt.MapClaims{"sub": "alice", "tock_roles": map[string]any{"team-a": "editor"}}, p.key)
	b := jobBody("by-token")
	b["namespace"] = "team-a"
	mustStatus(t, a.as(editor, "POST", "/v1/jobs", b), http.StatusCreated)
	b["namespace"] = "team-b"
	if r := a.as(editor, "POST", "/v1/jobs", b); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "jwt:alice has no role in namespace team-b") {
		t.Errorf("team-b create: %d %s", r.status, r.body)
	}
	if r := a.as(editor, "GET", "/v1/jobs/"+other, nil); r.status != http.StatusNotFound {
		t.Errorf("team-b job: %d", r.status)
	}
	reader := p.token(t, jwt.MapClaims{"sub": "bob", "tock_roles": []any{"team-a:reader"}}, p.key)
	mustStatus(t, a.as(reader, "GET", "/v1/jobs?namespace=team-a", nil), http.StatusOK)
	b["namespace"] = "team-a"
	b["name"] = "by-reader"
	if r := a.as(reader, "POST", "/v1/jobs", b); r.status != http.StatusForbidden ||
		!strings.Contains(string(r.body), "role reader in namespace team-a does not allow jobs.create") {
		t.Errorf("reader create: %d %s", r.status, r.body)
	}
	// A token with roles in several namespaces names the one it lists.
	two := p.token(t, jwt.MapClaims{"sub": "carol", "tock_roles": []any{"team-a:reader", "team-b:reader"}}, p.key)
	if r := a.as(two, "GET", "/v1/jobs", nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"namespace"`) {
		t.Errorf("two namespaces, none named: %d %s", r.status, r.body)
	}
	mustStatus(t, a.as(two, "GET", "/v1/jobs?namespace=team-b", nil), http.StatusOK)
	// The audit trail names the token's subject.
	r := a.as(a.admin, "GET", "/v1/audit?action=jobs.create&namespace=team-a", nil)
	mustStatus(t, r, http.StatusOK)
	var l models.AuditList
	r.decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Actor != "jwt:alice" {
		t.Errorf("audit: %s", r.body)
	}

	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	roles := map[string]any{"team-a": "admin"}
	for name, tok := range map[string]string{
		"another issuer":   p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": roles, "iss": "https://evil.test"}, p.key),
		"another audience": p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": roles, "aud": "other"}, p.key),
		"expired":          p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": roles, "exp": time.Now().Add(-time.Minute).Unix()}, p.key),
		"no expiry":        p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": roles, "exp": nil}, p.key),
		"another key":      p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": roles}, stranger),
		"no subject":       p.token(t, jwt.MapClaims{"tock_roles": roles}, p.key),
		"a bad role":       p.token(t, jwt.MapClaims{"sub": "x", "tock_roles": map[string]any{"team-a": "root"}}, p.key),
		"unsigned":         unsigned(t, jwt.MapClaims{"sub": "x", "iss": "https://idp.test", "aud": "tock", "exp": time.Now().Add(time.Hour).Unix(), "tock_roles": roles}),
		"not a token":      "garbage",
	} {
		r := a.as(tok, "GET", "/v1/jobs?namespace=team-a", nil)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
}

func unsigned(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
