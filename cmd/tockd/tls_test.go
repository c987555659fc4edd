package main

// TLS and credentials on every connection tockd makes: the API's
// listener, NATS, etcd (PostgreSQL: pgtls_test.go), each tested against
// a real server configured that way.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
)

// Users of the secured NATS and etcd servers.
const (
	natsUser, natsPassword = "tockd", "nats-secret"
	etcdUser, etcdPassword = "tock", "etcd-secret"
)

// secureNATS starts a NATS server with JetStream that speaks only TLS
// (with ca's certificate for 127.0.0.1; with verify, clients must present
// a certificate ca signed) and knows the user natsUser and the nkey
// users nkeys, for the test.
func secureNATS(t *testing.T, ca *testenv.CA, verify bool, nkeys ...string) *embedded.NATS {
	t.Helper()
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca.CertFile, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	n := &embedded.NATS{Dir: t.TempDir(), Configure: func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, verify, tc, 5
		o.Users = []*server.User{{Username: natsUser, Password: natsPassword}}
		for _, k := range nkeys {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: k})
		}
	}}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// secureEtcd starts an etcd that serves clients only over TLS (with ca's
// certificate; with clientCerts, clients must present one ca signed),
// with authentication on: root, and etcdUser, who may read and write
// /tock/ and nothing else, as tockd's user would be set up.
func secureEtcd(t *testing.T, ca *testenv.CA, clientCerts bool) *embedded.Etcd {
	t.Helper()
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	e := &embedded.Etcd{Dir: t.TempDir(), CertFile: cert, KeyFile: key}
	var admin TLSFiles
	admin.CA = ca.CertFile
	if clientCerts {
		e.ClientCAFile = ca.CertFile
		admin.Cert, admin.Key = ca.Client(t, "root")
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)

	tc, err := admin.clientConfig("admin")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, TLS: tc, DialTimeout: 5 * time.Second, Logger: etcdLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "tock"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "tock", "/tock/", clientv3.GetPrefixRangeEnd("/tock/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, etcdUser, etcdPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, etcdUser, "tock"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth set-up step %d: %v", i+1, err)
		}
	}
	return e
}

// httpsClient trusts ca's certificates (the system's if ca is nil) and
// presents the certificate in certFile and keyFile if they are set.
func httpsClient(t *testing.T, ca *testenv.CA, certFile, keyFile string) *http.Client {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		pool, err := certPool(ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names: Go's client would keep a
		// certificate the server's CAs did not sign to itself.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	// HTTP/1.1: over HTTP/2, a handshake the server refuses after the
	// client's part of it (TLS 1.3) fails as "http2: client conn could
	// not be established", without the server's alert.
	tr.ForceAttemptHTTP2 = false
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// send sends a JSON request with hc and decodes a 2xx answer into out.
func send(t *testing.T, hc *http.Client, method, url string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, raw, err)
		}
	}
	return resp.StatusCode
}

// tockd serve started with the TLS and credential flags: its API answers
// HTTPS only (plain HTTP and clients that do not trust its CA get
// nothing), /metrics and the health checks on the same listener; and its
// NATS (TLS, user and password) and etcd (TLS, user and password, auth
// on) connections work: a job fires (etcd ownership), is dispatched and
// run by a custom executor, and its result recorded (NATS).
func TestServeFlagsSecureAPINATSAndEtcd(t *testing.T) {
	ca := testenv.NewCA(t, "tock")
	ns := secureNATS(t, ca, false)
	etcd := secureEtcd(t, ca, false)
	pg := testenv.Postgres(t)
	cert, key := ca.Server(t, "127.0.0.1", "localhost")

	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(os.Args[0], "serve", "--node-id", "tls", "--http-addr", addr, "--postgres-url", pg,
		"--cluster", "tls", "--buckets", "16", "--lease-ttl", "2s", "--log-level", "warn",
		"--tls-cert", cert, "--tls-key", key, "--auth", "none", // keys: auth_test.go
		"--nats-url", ns.URL(), "--nats-tls-ca", ca.CertFile,
		"--etcd-endpoints", etcd.Endpoint(), "--etcd-user", etcdUser, "--etcd-tls-ca", ca.CertFile)
	// Secrets by environment, as a deployment would pass them.
	cmd.Env = append(os.Environ(), "TOCKD_E2E_CHILD=1", "TOCK_NATS_USER="+natsUser, "TOCK_NATS_PASSWORD="+natsPassword,
		"TOCK_ETCD_PASSWORD="+etcdPassword)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("tockd stderr:\n%s", stderr.String())
		}
	})
	hc := httpsClient(t, ca, "", "")
	base := "https://" + addr
	testenv.WaitFor(t, 60*time.Second, "tockd ready over HTTPS", func() bool {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(metrics, []byte("tock_")) {
		t.Errorf("GET /metrics over HTTPS: %d, tock metrics: %t", resp.StatusCode, bytes.Contains(metrics, []byte("tock_")))
	}
	// Plain HTTP on the same port gets no API answer (Go's server says
	// 400 to a plain request on a TLS listener).
	if resp, err := http.Get("http://" + addr + "/v1/jobs"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || bytes.Contains(body, []byte(`"items"`)) {
			t.Errorf("plain HTTP: %d %s, want 400 and no API answer", resp.StatusCode, body)
		}
	}
	// A client that does not trust tock's CA refuses the server.
	var unknownCA x509.UnknownAuthorityError
	if _, err := httpsClient(t, nil, "", "").Get(base + "/readyz"); !errors.As(err, &unknownCA) {
		t.Errorf("HTTPS without tock's CA: %v, want an unknown authority error", err)
	}
	// TLS 1.2 at least.
	old := httpsClient(t, ca, "", "")
	tc := old.Transport.(*http.Transport).TLSClientConfig
	tc.MinVersion, tc.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := old.Get(base + "/readyz"); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("HTTPS with TLS 1.1: %v, want the server to refuse the protocol version", err)
	}

	// A job runs through etcd, NATS and Postgres.
	nc, err := nats.Connect(ns.URL(), nats.UserInfo(natsUser, natsPassword), nats.RootCAs(ca.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w, err := executor.New(executor.Config{NATS: nc, ExecutorID: "tls-executor", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("tls-job", func(_ context.Context, x *executor.Execution) (string, error) { return "over TLS", nil })
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()

	var j job
	if code := send(t, hc, "POST", base+"/v1/jobs", map[string]any{"name": "tls",
		"handler": map[string]any{"type": "custom", "name": "tls-job"}}, &j); code != http.StatusCreated {
		t.Fatalf("create job over HTTPS: %d", code)
	}
	testenv.WaitFor(t, 30*time.Second, "the job's execution to succeed", func() bool {
		var page struct{ Items []execution }
		send(t, hc, "GET", base+"/v1/jobs/"+j.ID+"/executions", nil, &page)
		return len(page.Items) == 1 && page.Items[0].State == "succeeded" && page.Items[0].Output == "over TLS"
	})
}

// With --tls-client-ca, the API wants a client certificate signed by
// that CA: a client without one, or with one another CA signed, is
// refused during the handshake; one with a right certificate is served.
func TestServeRequiresClientCertificates(t *testing.T) {
	ca := testenv.NewCA(t, "tock")
	clients := testenv.NewCA(t, "clients")
	other := testenv.NewCA(t, "other")
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	e := newEnv(t)
	base := e.startNodeWith(t, "mtls", func(c *Config) {
		c.Roles = map[string]bool{RoleAPI: true}
		c.TLS = APITLS{Cert: cert, Key: key, ClientCA: clients.CertFile}
	})
	base = strings.Replace(base, "http://", "https://", 1)

	goodCert, goodKey := clients.Client(t, "operator")
	if code := send(t, httpsClient(t, ca, goodCert, goodKey), "GET", base+"/v1/jobs", nil, nil); code != http.StatusOK {
		t.Errorf("GET /v1/jobs with a client certificate: %d, want 200", code)
	}
	badCert, badKey := other.Client(t, "intruder")
	for _, tc := range []struct {
		name string
		hc   *http.Client
		want string
	}{
		{"no client certificate", httpsClient(t, ca, "", ""), "tls: certificate required"},
		{"a certificate another CA signed", httpsClient(t, ca, badCert, badKey), "tls: unknown certificate authority"},
	} {
		resp, err := tc.hc.Get(base + "/v1/jobs")
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: %d, want the handshake refused", tc.name, resp.StatusCode)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want the server's alert %q", tc.name, err, tc.want)
		}
	}
}

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
		c := ServeCmd{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, Roles: []string{RoleAPI}}
		tc.set(&c)
		_, err := c.config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// tockd's NATS connection (NATSAuth.options, then dialNATS, as Serve
// connects) against a server that speaks only TLS, wants client
// certificates and knows a user and an nkey: each way to authenticate
// connects, and a wrong password, an unknown nkey, an untrusted server
// certificate or a missing client certificate fail the connection at once
// with an error saying so, rather than being retried in the background.
func TestNATSConnectionTLSAndCredentials(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	nkey, seedFile := nkeyUser(t)
	_, strangerSeed := nkeyUser(t)
	ns := secureNATS(t, ca, true, nkey)
	clientCert, clientKey := ca.Client(t, "tockd")
	tlsOK := TLSFiles{CA: ca.CertFile, Cert: clientCert, Key: clientKey}
	withCreds := strings.Replace(ns.URL(), "nats://", "nats://"+natsUser+":"+natsPassword+"@", 1)

	for _, tc := range []struct {
		name string
		url  string
		auth NATSAuth
		want string // "" to connect
	}{
		{"user and password", ns.URL(), NATSAuth{User: natsUser, Password: natsPassword, TLS: tlsOK}, ""},
		{"user and password in the URL", withCreds, NATSAuth{TLS: tlsOK}, ""},
		{"nkey seed file", ns.URL(), NATSAuth{NkeySeedFile: seedFile, TLS: tlsOK}, ""},
		{"wrong password", ns.URL(), NATSAuth{User: natsUser, Password: "wrong", TLS: tlsOK}, "authorization violation"},
		{"no credentials", ns.URL(), NATSAuth{TLS: tlsOK}, "authorization violation"},
		{"unknown nkey", ns.URL(), NATSAuth{NkeySeedFile: strangerSeed, TLS: tlsOK}, "authorization violation"},
		{"server's CA not trusted", ns.URL(), NATSAuth{User: natsUser, Password: natsPassword,
			TLS: TLSFiles{Cert: clientCert, Key: clientKey}}, "certificate signed by unknown authority"},
		{"no client certificate", ns.URL(), NATSAuth{User: natsUser, Password: natsPassword, TLS: TLSFiles{CA: ca.CertFile}},
			// In TLS 1.3 the server refuses the certificate after the
			// client's handshake is done: the client reads the alert, or
			// its first write finds the connection closed (once in CI).
			"certificate required|connection closed by remote after tls handshake"},
	} {
		opts, err := tc.auth.options()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var retried error
		start := time.Now()
		nc, err := dialNATS(tc.url, append(opts, nats.Timeout(5*time.Second)), func(err error) { retried = err })
		if retried != nil {
			t.Errorf("%s: taken for an unreachable server and retried: %v", tc.name, retried)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "":
			if !nc.IsConnected() || !nc.TLSRequired() {
				t.Errorf("%s: connected %t, over TLS %t", tc.name, nc.IsConnected(), nc.TLSRequired())
			}
			if st, err := nc.TLSConnectionState(); err != nil || !st.HandshakeComplete {
				t.Errorf("%s: TLS handshake not complete: %v", tc.name, err)
			}
		case err == nil:
			t.Errorf("%s: connected, want an error saying %q", tc.name, tc.want)
		case !slices.ContainsFunc(strings.Split(tc.want, "|"), func(w string) bool { return strings.Contains(strings.ToLower(err.Error()), w) }):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		case time.Since(start) > 5*time.Second:
			t.Errorf("%s: failed after %s, want at once", tc.name, time.Since(start))
		}
		if nc != nil {
			nc.Close()
		}
	}

	// As Serve connects: the error names the server, not the password.
	wrong := strings.Replace(withCreds, natsPassword, "wrong-secret", 1)
	_, _, err := connectNATS(context.Background(), Config{NATSURL: wrong, NodeID: "t", NATSAuth: NATSAuth{TLS: tlsOK}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || strings.Contains(err.Error(), "wrong-secret") || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("connectNATS with a wrong password in the URL: %v; want an authorization violation, the password left out", err)
	}

	// A server that is down is no reason not to start: the connection
	// is made in the background (and warn told why).
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var nc *nats.Conn
	opts, _ := NATSAuth{User: natsUser, Password: natsPassword, TLS: tlsOK}.options()
	var warned error
	nc, err = dialNATS(fmt.Sprintf("nats://127.0.0.1:%d", port), opts, func(err error) { warned = err })
	if err != nil || warned == nil {
		t.Errorf("NATS down: err %v, warned %v; want a connection retried in the background and a warning", err, warned)
	}
	if nc != nil {
		nc.Close()
	}
}

// nkeyUser makes a user nkey and returns its public key and a file
// holding its seed.
func nkeyUser(t *testing.T) (pub, seedFile string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, seedFile
}

// --nats-creds-file against a server in operator (decentralised JWT)
// mode: a user JWT its account signed connects; one a stranger account
// signed is refused.
func TestNATSCredsFile(t *testing.T) {
	t.Parallel()
	operator, _ := nkeys.CreateOperator()
	opPub, _ := operator.PublicKey()
	account, _ := nkeys.CreateAccount()
	accPub, _ := account.PublicKey()
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(accPub, accJWT); err != nil {
		t.Fatal(err)
	}
	ns := &embedded.NATS{Dir: t.TempDir(), Configure: func(o *server.Options) {
		o.JetStream = false // accounts here have no JetStream limits; this is about connecting
		o.TrustedKeys = []string{opPub}
		o.AccountResolver = resolver
	}}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Stop)

	good := credsFile(t, account)
	stranger, _ := nkeys.CreateAccount()
	bad := credsFile(t, stranger)
	for _, tc := range []struct {
		name, file, want string
	}{
		{"user of the account", good, ""},
		{"user of a stranger account", bad, "authorization violation"},
	} {
		opts, err := NATSAuth{CredsFile: tc.file}.options()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := dialNATS(ns.URL(), opts, func(err error) { t.Errorf("%s: retried: %v", tc.name, err) })
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if nc != nil {
			nc.Close()
		}
	}
}

// credsFile writes a .creds file for a new user of account.
func credsFile(t *testing.T, account nkeys.KeyPair) string {
	t.Helper()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	userJWT, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// tockd's etcd configuration (etcdConfig, as Serve builds its client)
// against an etcd with client TLS (client certificates wanted) and
// authentication on: with its user, password and certificates it reads,
// writes and keeps leases under /tock/ as the scheduler does; a wrong
// password, no credentials, an untrusted server certificate or no client
// certificate are refused.
func TestEtcdTLSAndAuth(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	etcd := secureEtcd(t, ca, true)
	cert, key := ca.Client(t, "tockd")
	tlsOK := TLSFiles{CA: ca.CertFile, Cert: cert, Key: key}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// dial is how long the client's log-in may take: the refused ones
	// wait for all of it.
	connect := func(a EtcdAuth, dial time.Duration) (*clientv3.Client, error) {
		cfg, err := etcdConfig([]string{etcd.Endpoint()}, a)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialTimeout = dial
		return clientv3.New(cfg)
	}
	cli, err := connect(EtcdAuth{User: etcdUser, Password: etcdPassword, TLS: tlsOK}, 20*time.Second)
	if err != nil {
		t.Fatalf("connect with user and TLS: %v", err)
	}
	defer cli.Close()
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if _, err := cli.Put(ctx, "/tock/tls/members/n1", "{}", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put under /tock/: %v", err)
	}
	if r, err := cli.Get(ctx, "/tock/tls/", clientv3.WithPrefix()); err != nil || r.Count != 1 {
		t.Fatalf("get under /tock/: %v, %v", r, err)
	}
	if _, err := cli.Put(ctx, "/other", "x"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("put outside /tock/: %v, want permission denied (the user's role is what README says)", err)
	}

	if _, err := connect(EtcdAuth{User: etcdUser, Password: "wrong", TLS: tlsOK}, 20*time.Second); err == nil ||
		!strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("wrong password: %v, want authentication failed", err)
	}
	anon, err := connect(EtcdAuth{TLS: tlsOK}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	// (etcd takes a client certificate's common name for the user when
	// no password is given: tockd's certificate names no etcd user.)
	if _, err := anon.Get(ctx, "/tock/tls/", clientv3.WithPrefix()); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("no credentials: %v, want permission denied", err)
	}
	for name, files := range map[string]TLSFiles{
		"server's CA not trusted": {Cert: cert, Key: key},
		"no client certificate":   {CA: ca.CertFile},
	} {
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := connect(EtcdAuth{User: etcdUser, Password: etcdPassword, TLS: files}, 2*time.Second)
		if err == nil {
			_, err = c.Get(short, "/tock/tls/")
			c.Close()
		}
		cancel()
		if err == nil {
			t.Errorf("%s: connected and read, want refused", name)
		}
	}
}
