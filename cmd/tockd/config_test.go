package main

// Tests of tockd's flags: flags that cannot work stop it before it
// connects anywhere, saying which and why. What the flags do once tockd
// runs is tested in package node and beside the packages they configure.

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/secret"
)

// Flags that cannot work stop tockd serve before it connects anywhere,
// saying which flags and why.
func TestServeRefusesIncompleteTLSAndCredentialFlags(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	cert, key := ca.Server(t, "127.0.0.1")
	for _, tc := range []struct {
		name string
		set  func(*ServeCmd)
		want string
	}{
		{"cert without key", func(c *ServeCmd) { c.TLSCert = cert }, "--tls-cert and --tls-key go together"},
		{"key without cert", func(c *ServeCmd) { c.TLSKey = key }, "--tls-cert and --tls-key go together"},
		{"client CA without TLS", func(c *ServeCmd) { c.TLSClientCA = ca.CertFile }, "--tls-client-ca needs --tls-cert and --tls-key"},
		{"cert and key swapped", func(c *ServeCmd) { c.TLSCert, c.TLSKey = key, cert }, "--tls-cert, --tls-key:"},
		{"missing client CA file", func(c *ServeCmd) { c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, "/nonexistent/ca.pem" }, "--tls-client-ca: open /nonexistent/ca.pem"},
		{"NATS password without user", func(c *ServeCmd) { c.NATSPassword = "x" }, "--nats-password needs --nats-user"},
		{"two NATS credentials", func(c *ServeCmd) { c.NATSUser, c.NATSCredsFile = "u", cert }, "--nats-user, --nats-creds-file: give one way"},
		{"missing creds file", func(c *ServeCmd) { c.NATSCredsFile = "/nonexistent/tock.creds" }, "--nats-creds-file: open /nonexistent/tock.creds"},
		{"bad nkey seed file", func(c *ServeCmd) { c.NATSNkeySeedFile = cert }, "--nats-nkey-seed-file:"},
		{"NATS cert without key", func(c *ServeCmd) { c.NATSTLSCert = cert }, "--nats-tls-cert and --nats-tls-key go together"},
		{"NATS CA not PEM", func(c *ServeCmd) { c.NATSTLSCA = key }, "--nats-tls-ca: " + key + " holds no PEM certificate"},
		{"etcd user without password", func(c *ServeCmd) { c.EtcdUser = "tock" }, "--etcd-user and --etcd-password go together"},
		{"etcd TLS on an http endpoint", func(c *ServeCmd) { c.EtcdTLSCA = ca.CertFile }, "endpoint http://127.0.0.1:2379 is plain http; write it https://"},
		{"etcd key without cert", func(c *ServeCmd) { c.EtcdEndpoints = []string{"https://etcd:2379"}; c.EtcdTLSKey = key }, "--etcd-tls-cert and --etcd-tls-key go together"},
	} {
		c := ServeCmd{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, Roles: []string{"api"}}
		tc.set(&c)
		_, err := c.config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// tockd dev serves without keys, so it listens on loopback only.
func TestDevListensOnLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.5:8080": false, "example.com:8080": false} {
		if err := node.LoopbackOnly(addr); (err == nil) != ok {
			t.Errorf("loopbackOnly(%s) = %v", addr, err)
		}
	}
	d := &DevCmd{HTTPAddr: "0.0.0.0:0"}
	if err := d.Run(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("tockd dev --http-addr 0.0.0.0:0: %v", err)
	}
}

// The deploy files run tockd with API keys required, and serve /metrics
// on a port of their own.
func TestDeployFilesRequireKeys(t *testing.T) {
	for _, f := range []string{"../../deploy/compose.yaml", "../../deploy/kubernetes/tockd.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if regexp.MustCompile(`(?i)auth[^\n]*none`).MatchString(s) {
			t.Errorf("%s turns authentication off", f)
		}
		if !regexp.MustCompile(`TOCK_AUTH(:|, value:) "?keys"?`).MatchString(s) || !strings.Contains(s, "keys create") {
			t.Errorf("%s does not require keys (TOCK_AUTH keys) or say how to create the first", f)
		}
		if !strings.Contains(s, "TOCK_METRICS_ADDR") {
			t.Errorf("%s does not serve /metrics on its own port", f)
		}
	}
}

// Half the JWT flags, or a JWK Set over plain http to another machine,
// stop tockd serve at start. (That serve with all of them accepts the
// identity provider's tokens is node's TestServeWithJWKS.)
func TestServeRefusesHalfJWTFlags(t *testing.T) {
	jwks := httptest.NewServer(http.NotFoundHandler())
	defer jwks.Close()

	for _, bad := range [][]string{
		{"--jwks-url", jwks.URL},
		{"--jwt-issuer", "https://idp.test"},
		{"--jwks-url", "http://idp.example.com/jwks.json", "--jwt-issuer", "https://idp.test", "--jwt-audience", "tock"},
	} {
		var c ServeCmd
		parser, err := kong.New(&c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(bad); err != nil {
			t.Fatal(err)
		}
		if _, err := c.config(); err == nil || !strings.Contains(err.Error(), "jwks") && !strings.Contains(err.Error(), "jwt") {
			t.Errorf("serve %v: %v", bad, err)
		}
	}

}

// writeKeys writes a key file of these lines, mode 0600, and returns its
// path.
func writeKeys(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newKey is a new key line of id.
func newKey(t *testing.T, id string) string {
	t.Helper()
	line, err := secret.GenerateKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// tockd refuses, at start, a key file others may read, saying how to fix
// it; and one it can read gives the api and executor roles their keys.
func TestServeSecretKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeKeys(t, dir, "keys", newKey(t, "k1"))
	cfg, err := (&ServeCmd{Roles: []string{"api"}, SecretFlags: SecretFlags{SecretKeyFile: path}}).config()
	if err != nil || cfg.Secrets == nil || cfg.Secrets.Primary() != "k1" {
		t.Fatalf("config with a 0600 key file: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = (&ServeCmd{Roles: []string{"api"}, SecretFlags: SecretFlags{SecretKeyFile: path}}).config()
	if err == nil || !strings.Contains(err.Error(), "--secret-key-file") || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others may read: %v", err)
	}
	if cfg, err := (&ServeCmd{Roles: []string{"api"}}).config(); err != nil || cfg.Secrets != nil {
		t.Errorf("no key file: %v, %v", cfg.Secrets, err)
	}
}

// tockd dev bounds its API as serve does: the same limits by default,
// and the limit flags reach its node (without them a dev server's reads
// ran unbounded, and every measurement of reads against firing on it
// with them; issue 44).
func TestDevTakesTheAPILimits(t *testing.T) {
	parse := func(cmd any, args ...string) {
		t.Helper()
		parser, err := kong.New(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	var serve ServeCmd
	parse(&serve)
	want, err := serve.config()
	if err != nil {
		t.Fatal(err)
	}
	var dev DevCmd
	parse(&dev)
	got := dev.config()
	if got.Limits != want.Limits || got.APIPoolConns != want.APIPoolConns || got.APIStatementTimeout != want.APIStatementTimeout {
		t.Errorf("dev's API limits %+v (pool %d, statement timeout %s); serve's %+v (pool %d, statement timeout %s)",
			got.Limits, got.APIPoolConns, got.APIStatementTimeout, want.Limits, want.APIPoolConns, want.APIStatementTimeout)
	}
	if got.Limits.ReadShare == 0 || got.Limits.RequestTimeout == 0 {
		t.Errorf("dev's reads unbounded by default: %+v", got.Limits)
	}
	dev = DevCmd{}
	parse(&dev, "--api-read-share", "0.25", "--api-pool-conns", "2", "--api-request-timeout", "5s")
	got = dev.config()
	if got.Limits.ReadShare != 0.25 || got.APIPoolConns != 2 || got.Limits.RequestTimeout != 5*time.Second {
		t.Errorf("dev --api-read-share 0.25 --api-pool-conns 2 --api-request-timeout 5s: %+v, pool %d", got.Limits, got.APIPoolConns)
	}
}
