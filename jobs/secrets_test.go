package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/secret"
	"github.com/tock-sched/tock/store/storetest"
)

// opened is the value of h's secret header name, opened with k.
func opened(t *testing.T, k *secret.Keyring, h domain.Handler, name string) string {
	t.Helper()
	s, ok := h.SecretHeaders[name]
	if !ok {
		t.Fatalf("no secret header %s in %v", name, h.SecretHeaders)
	}
	v, err := k.Open(s.KeyID, s.Data, domain.SecretHeaderAD(name))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return string(v)
}

// faultOf is the message of the fault err names field with, "" if none.
func faultOf(err error, field string) string {
	for _, f := range Faults(err) {
		if f.Field == field {
			return f.Message
		}
	}
	return ""
}

// Build seals secret headers: the job holds only ciphertext, which opens
// to the value given, for its header only.
func TestBuildSealsSecretHeaders(t *testing.T) {
	t.Parallel()
	k := testenv.Keyring(t)
	svc := newService(t, struct{ Store }{}, Config{Clock: &fakeClock{}, Secrets: k})
	nj := validJob("sealed")
	nj.Handler.Headers = map[string]string{"X-Team": "payments"}
	nj.SecretHeaders = map[string]string{"Authorization": "Bearer s3cret-token"}
	j, err := svc.Build(nj, fixed(t0))
	if err != nil {
		t.Fatal(err)
	}
	if got := opened(t, k, j.Handler, "Authorization"); got != "Bearer s3cret-token" {
		t.Errorf("opened %q", got)
	}
	if s := j.Handler.SecretHeaders["Authorization"]; s.KeyID != "k1" {
		t.Errorf("sealed under %q, want k1", s.KeyID)
	}
	raw, err := json.Marshal(j.Handler)
	if err != nil || bytes.Contains(raw, []byte("s3cret")) || !bytes.Contains(raw, []byte(`"secret_headers":{"Authorization":{"kid":"k1","ct":"`)) {
		t.Errorf("the handler as stored: %s, %v", raw, err)
	}
}

// Every fault of secret headers, each naming its field; no message shows
// a value.
func TestSecretHeaderFaults(t *testing.T) {
	t.Parallel()
	k := testenv.Keyring(t)
	withKey := newService(t, struct{ Store }{}, Config{Clock: &fakeClock{}, Secrets: k})
	noKey := newService(t, struct{ Store }{}, Config{Clock: &fakeClock{}})
	many := map[string]string{}
	for i := range MaxSecretHeaders + 1 {
		many["X-S"+string(rune('a'+i))] = "v"
	}
	for _, tc := range []struct {
		name    string
		svc     *Service
		handler domain.Handler
		secrets map[string]string
		field   string
		msg     string
	}{
		{"no key file", noKey, validJob("").Handler, map[string]string{"Authorization": "Bearer s3cret"},
			"handler.secret_headers", "this server has no --secret-key-file"},
		{"bad name", withKey, validJob("").Handler, map[string]string{"Bad Name": "s3cret"},
			"handler.secret_headers", `"Bad Name" is not a valid header name`},
		{"empty", withKey, validJob("").Handler, map[string]string{"Authorization": ""},
			"handler.secret_headers.Authorization", "must not be empty"},
		{"control characters", withKey, validJob("").Handler, map[string]string{"Authorization": "s3cret\r\nX-Evil: 1"},
			"handler.secret_headers.Authorization", "must not contain control characters"},
		{"too long", withKey, validJob("").Handler, map[string]string{"Authorization": strings.Repeat("s3cret", 700)},
			"handler.secret_headers.Authorization", "must be at most 4096 bytes"},
		{"the mask", withKey, validJob("").Handler, map[string]string{"Authorization": "***"},
			"handler.secret_headers.Authorization", `is "***", what the API shows in place of a secret`},
		{"same name twice", withKey, validJob("").Handler, map[string]string{"Authorization": "s3cret", "authorization": "s3cret"},
			"handler.secret_headers.authorization", `is the same header as "Authorization"`},
		{"also plain", withKey, domain.Handler{Type: "http", URL: "https://example.com/", Headers: map[string]string{"x-api-key": "k"}},
			map[string]string{"X-Api-Key": "s3cret"}, "handler.secret_headers.X-Api-Key", `is also in handler.headers (as "x-api-key")`},
		{"not http", withKey, domain.Handler{Type: "nats", Subject: "orders"}, map[string]string{"Authorization": "s3cret"},
			"handler.secret_headers", "is not allowed for handler type nats"},
		{"too many", withKey, validJob("").Handler, many, "handler.secret_headers", "must hold at most 16 headers"},
		{"masked plain header", withKey, domain.Handler{Type: "http", URL: "https://example.com/", Headers: map[string]string{"Authorization": "***"}},
			nil, "handler.headers.Authorization", `is "***", what the API shows in place of a sensitive header's value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nj := validJob("x")
			nj.Handler, nj.SecretHeaders = tc.handler, tc.secrets
			_, err := tc.svc.Build(nj, fixed(t0))
			if msg := faultOf(err, tc.field); !strings.Contains(msg, tc.msg) {
				t.Fatalf("faults %v; want %s: %q", err, tc.field, tc.msg)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%v shows a value", err)
			}
		})
	}
	// A plain header named like a credential is still allowed (jobs made
	// before secret headers have them); the API hides its value.
	nj := validJob("x")
	nj.Handler.Headers = map[string]string{"Authorization": "Bearer plain"}
	if _, err := noKey.Build(nj, fixed(t0)); err != nil {
		t.Errorf("a plain Authorization header: %v", err)
	}
}

// A change of the handler keeps, replaces or removes secret headers as
// told, and keeps stored values only for the same origin.
func TestUpdateSecretHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := testenv.Keyring(t)
	st := storetest.New(t, 16)
	svc := newService(t, st, Config{Clock: &fakeClock{t: t0}, Secrets: k})
	nj := validJob("secret-patch")
	nj.Handler.Headers = map[string]string{"X-Team": "payments", "X-Auth-Token": "plain-t1"}
	nj.SecretHeaders = map[string]string{"Authorization": "Bearer one", "X-Api-Key": "key-one"}
	j, err := svc.Create(ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	stored := j.Handler.SecretHeaders
	handler := func(url string, headers map[string]string) *domain.Handler {
		return &domain.Handler{Type: "http", URL: url, Headers: headers}
	}
	const url = "https://example.com/hook"
	plain := map[string]string{"X-Team": "payments", "X-Auth-Token": "***"}

	// Left out: every secret header kept as it was (the same ciphertext,
	// so the same job spec); the masked plain header keeps its value.
	got, err := svc.Update(ctx, j.ID, Patch{Handler: handler("HTTPS://Example.com:443/other", plain)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Handler.SecretHeaders["Authorization"].Data, stored["Authorization"].Data) ||
		!bytes.Equal(got.Handler.SecretHeaders["X-Api-Key"].Data, stored["X-Api-Key"].Data) || got.Handler.Headers["X-Auth-Token"] != "plain-t1" {
		t.Fatalf("kept: %+v", got.Handler)
	}

	// "***" keeps one (any case), a new value replaces, one left out goes.
	got, err = svc.Update(ctx, j.ID, Patch{Handler: handler(url, plain),
		SecretHeaders: &map[string]string{"authorization": "***", "X-New": "new-value"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Handler.SecretHeaders) != 2 || opened(t, k, got.Handler, "authorization") != "Bearer one" ||
		opened(t, k, got.Handler, "X-New") != "new-value" {
		t.Fatalf("after keep and replace: %v", got.Handler.SecretHeaders)
	}

	// Another origin: stored values are not carried there.
	for _, tc := range []struct {
		name    string
		p       Patch
		field   string
		wantMsg string
	}{
		{"left out", Patch{Handler: handler("https://elsewhere.example/hook", map[string]string{"X-Team": "payments"})},
			"handler.secret_headers", "another origin"},
		{"masked", Patch{Handler: handler("http://example.com/hook", nil), SecretHeaders: &map[string]string{"X-New": "***"}},
			"handler.secret_headers.X-New", "another origin"},
		{"masked plain", Patch{Handler: handler("https://example.com:8443/hook", plain), SecretHeaders: &map[string]string{}},
			"handler.headers.X-Auth-Token", "another origin"},
		{"masked but not stored", Patch{Handler: handler(url, nil), SecretHeaders: &map[string]string{"X-Gone": "***"}},
			"handler.secret_headers.X-Gone", "the job has no secret header X-Gone"},
		{"clashing with a kept one", Patch{Handler: handler(url, map[string]string{"x-new": "plain"})},
			"handler.secret_headers.X-New", "is also in handler.headers"},
		{"without the handler", Patch{SecretHeaders: &map[string]string{"Authorization": "x"}},
			"handler.secret_headers", "only with the handler"},
	} {
		before, _ := st.GetJob(ctx, j.ID)
		_, err := svc.Update(ctx, j.ID, tc.p)
		if msg := faultOf(err, tc.field); !strings.Contains(msg, tc.wantMsg) {
			t.Errorf("%s: %v; want %s: %q", tc.name, err, tc.field, tc.wantMsg)
		}
		if after, _ := st.GetJob(ctx, j.ID); after.Version != before.Version {
			t.Errorf("%s: the refused change was written", tc.name)
		}
	}
	// Given again, they go to the new origin.
	got, err = svc.Update(ctx, j.ID, Patch{Handler: handler("https://elsewhere.example/hook", nil),
		SecretHeaders: &map[string]string{"Authorization": "Bearer two"}})
	if err != nil || opened(t, k, got.Handler, "Authorization") != "Bearer two" || len(got.Handler.SecretHeaders) != 1 {
		t.Fatalf("new origin, new value: %v, %v", got.Handler.SecretHeaders, err)
	}
	// An empty map removes them; so does another handler type.
	got, err = svc.Update(ctx, j.ID, Patch{Handler: handler("https://elsewhere.example/hook", nil), SecretHeaders: &map[string]string{}})
	if err != nil || got.Handler.SecretHeaders != nil {
		t.Fatalf("removed: %v, %v", got.Handler.SecretHeaders, err)
	}
	if _, err := svc.Update(ctx, j.ID, Patch{Handler: handler(url, nil), SecretHeaders: &map[string]string{"Authorization": "Bearer three"}}); err != nil {
		t.Fatal(err)
	}
	got, err = svc.Update(ctx, j.ID, Patch{Handler: &domain.Handler{Type: "nats", Subject: "orders"}})
	if err != nil || got.Handler.SecretHeaders != nil {
		t.Fatalf("to nats: %+v, %v", got.Handler, err)
	}
}

// A credential stored as a plain header before secret headers existed
// moves into the secret ones with "***", without being typed again; a
// server without a key says it cannot.
func TestUpdateMovesAPlainHeaderIntoSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := testenv.Keyring(t)
	st := storetest.New(t, 16)
	noKey := newService(t, st, Config{Clock: &fakeClock{t: t0}})
	nj := validJob("old-style")
	nj.Handler.Headers = map[string]string{"Authorization": "Bearer stored-in-clear", "X-Team": "payments"}
	j, err := noKey.Create(ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	move := Patch{Handler: &domain.Handler{Type: "http", URL: nj.Handler.URL, Headers: map[string]string{"X-Team": "payments"}},
		SecretHeaders: &map[string]string{"Authorization": "***"}}
	if _, err := noKey.Update(ctx, j.ID, move); !strings.Contains(faultOf(err, "handler.secret_headers.Authorization"), "no --secret-key-file") {
		t.Errorf("without a key: %v", err)
	}
	withKey := newService(t, st, Config{Clock: &fakeClock{t: t0}, Secrets: k})
	got, err := withKey.Update(ctx, j.ID, move)
	if err != nil {
		t.Fatal(err)
	}
	if opened(t, k, got.Handler, "Authorization") != "Bearer stored-in-clear" || len(got.Handler.Headers) != 1 {
		t.Errorf("moved: %+v", got.Handler)
	}
	raw, _ := json.Marshal(got.Handler)
	if bytes.Contains(raw, []byte("stored-in-clear")) {
		t.Errorf("the value is still in clear: %s", raw)
	}
}
