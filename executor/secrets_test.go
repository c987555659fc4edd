package executor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/secret"
)

// sealed seals value for header name, as the API does.
func sealed(t *testing.T, k *secret.Keyring, name, value string) domain.SealedSecret {
	t.Helper()
	kid, ct, err := k.Seal([]byte(value), domain.SecretHeaderAD(name))
	if err != nil {
		t.Fatal(err)
	}
	return domain.SealedSecret{KeyID: kid, Data: ct}
}

// secretExecution is an http execution to url with the secret headers
// Authorization and X-Api-Key sealed under k.
func secretExecution(t *testing.T, k *secret.Keyring, url string) *Execution {
	t.Helper()
	x := httpExecution(url)
	x.Handler.Headers = map[string]string{"X-Team": "payments"}
	x.Handler.SecretHeaders = map[string]domain.SealedSecret{
		"Authorization": sealed(t, k, "Authorization", "Bearer s3cret-token"),
		"X-Api-Key":     sealed(t, k, "X-Api-Key", "key-0f9e8d"),
	}
	return x
}

// The executor opens secret headers just before the request: the target
// gets their values, beside the plain headers.
func TestHTTPHandlerSendsSecretHeaders(t *testing.T) {
	k := testenv.Keyring(t)
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	if _, err := HTTPHandlerWith(HTTPOptions{Client: srv.Client(), Secrets: k})(context.Background(), secretExecution(t, k, srv.URL)); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for name, want := range map[string]string{"Authorization": "Bearer s3cret-token", "X-Api-Key": "key-0f9e8d", "X-Team": "payments"} {
		if h.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, h.Get(name), want)
		}
	}
}

// An execution whose secrets cannot be opened fails for good, without a
// request, saying which header and why, and never showing a value.
func TestHTTPHandlerSecretsThatCannotBeOpened(t *testing.T) {
	k := testenv.Keyring(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()

	swapped := secretExecution(t, k, srv.URL)
	s := swapped.Handler.SecretHeaders
	s["Authorization"], s["X-Api-Key"] = s["X-Api-Key"], s["Authorization"]
	unknown := secretExecution(t, k, srv.URL)
	u := unknown.Handler.SecretHeaders["X-Api-Key"]
	u.KeyID = "k0"
	unknown.Handler.SecretHeaders = map[string]domain.SealedSecret{"X-Api-Key": u}

	for _, tc := range []struct {
		name string
		h    Func
		x    *Execution
		want string
	}{
		{"no key file", HTTPHandlerWith(HTTPOptions{Client: srv.Client()}), secretExecution(t, k, srv.URL),
			"this executor has no --secret-key-file"},
		{"HTTPHandler", HTTPHandler(srv.Client()), secretExecution(t, k, srv.URL), "no --secret-key-file"},
		{"another key", HTTPHandlerWith(HTTPOptions{Client: srv.Client(), Secrets: testenv.Keyring(t)}), secretExecution(t, k, srv.URL),
			"cannot decrypt it: secret: key \"k1\": the ciphertext does not authenticate"},
		{"values swapped between headers", HTTPHandlerWith(HTTPOptions{Client: srv.Client(), Secrets: k}), swapped,
			"does not authenticate"},
		{"unknown key id", HTTPHandlerWith(HTTPOptions{Client: srv.Client(), Secrets: k}), unknown,
			"secret header X-Api-Key: cannot decrypt it: secret: key \"k0\": sealed under a key this keyring does not hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.h(context.Background(), tc.x)
			if !IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want a permanent failure saying %q", err, tc.want)
			}
			for _, v := range []string{"s3cret", "0f9e8d"} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error %q shows a secret", err)
				}
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}
}

// Secret headers follow a redirect to the same origin, never one to
// another (another port is another origin).
func TestHTTPHandlerSecretsStayWithTheirOrigin(t *testing.T) {
	k := testenv.Keyring(t)
	elsewhere := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere <- r.Header.Clone()
	}))
	defer other.Close()
	same := make(chan http.Header, 1)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		case "/here":
			http.Redirect(w, r, srv.URL+"/landing", http.StatusTemporaryRedirect)
		default:
			same <- r.Header.Clone()
		}
	}))
	defer srv.Close()
	h := HTTPHandlerWith(HTTPOptions{Client: srv.Client(), Secrets: k})

	if _, err := h(context.Background(), secretExecution(t, k, srv.URL+"/here")); err != nil {
		t.Fatal(err)
	}
	if got := <-same; got.Get("Authorization") != "Bearer s3cret-token" || got.Get("X-Api-Key") != "key-0f9e8d" {
		t.Errorf("same-origin redirect: Authorization %q, X-Api-Key %q; want both sent", got.Get("Authorization"), got.Get("X-Api-Key"))
	}
	if _, err := h(context.Background(), secretExecution(t, k, srv.URL+"/away")); err != nil {
		t.Fatal(err)
	}
	got := <-elsewhere
	if got.Get("Authorization") != "" || got.Get("X-Api-Key") != "" {
		t.Errorf("redirect to another origin: Authorization %q, X-Api-Key %q; want neither", got.Get("Authorization"), got.Get("X-Api-Key"))
	}
	if got.Get("X-Team") != "payments" || got.Get("Idempotency-Key") == "" {
		t.Errorf("redirect to another origin lost the plain headers: %v", got)
	}
}
