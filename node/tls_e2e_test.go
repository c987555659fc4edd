package node_test

// TLS on the API's listener, and tockd serve's TLS and credential flags
// for NATS and etcd, each against a real server configured that way.
// These tests call the API as raw HTTP with HTTPS clients of their own.

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
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// httpsClient trusts ca's certificates (the system's if ca is nil) and
// presents the certificate in certFile and keyFile if they are set.
func httpsClient(t *testing.T, ca *testenv.CA, certFile, keyFile string) *http.Client {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		pem, err := os.ReadFile(ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(pem)
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
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	ns := testenv.SecureNATS(t, ca, false)
	etcd := testenv.SecureEtcd(t, ca, false)
	pg := testenv.Postgres(t)
	cert, key := ca.Server(t, "127.0.0.1", "localhost")

	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := nodetest.Command(t, "serve", "--node-id", "tls", "--http-addr", addr, "--postgres-url", pg,
		"--cluster", "tls", "--buckets", "16", "--lease-ttl", "2s", "--log-level", "warn",
		"--tls-cert", cert, "--tls-key", key, "--auth", "none", // keys: auth_e2e_test.go
		"--nats-url", ns.URL(), "--nats-tls-ca", ca.CertFile,
		"--etcd-endpoints", etcd.Endpoint(), "--etcd-user", testenv.EtcdUser, "--etcd-tls-ca", ca.CertFile)
	// Secrets by environment, as a deployment would pass them.
	cmd.Env = append(os.Environ(), "TOCK_NATS_USER="+testenv.NATSUser, "TOCK_NATS_PASSWORD="+testenv.NATSPassword,
		"TOCK_ETCD_PASSWORD="+testenv.EtcdPassword)
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
	nc, err := nats.Connect(ns.URL(), nats.UserInfo(testenv.NATSUser, testenv.NATSPassword), nats.RootCAs(ca.CertFile))
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

	var j models.Job
	if code := send(t, hc, "POST", base+"/v1/jobs", map[string]any{"name": "tls",
		"handler": map[string]any{"type": "custom", "name": "tls-job"}}, &j); code != http.StatusCreated {
		t.Fatalf("create job over HTTPS: %d", code)
	}
	testenv.WaitFor(t, 30*time.Second, "the job's execution to succeed", func() bool {
		var page models.ExecutionList
		send(t, hc, "GET", base+"/v1/jobs/"+j.Id.String()+"/executions", nil, &page)
		return len(page.Items) == 1 && page.Items[0].State == "succeeded" && nodetest.Str(page.Items[0].Output) == "over TLS"
	})
}

// With --tls-client-ca, the API wants a client certificate signed by
// that CA: a client without one, or with one another CA signed, is
// refused during the handshake; one with a right certificate is served.
func TestServeRequiresClientCertificates(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	clients := testenv.NewCA(t, "clients")
	other := testenv.NewCA(t, "other")
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	e := nodetest.New(t)
	base := e.StartWith(t, "mtls", func(c *node.Config) {
		c.Roles = node.RolesOf(node.RoleAPI)
		c.TLS = node.APITLS{Cert: cert, Key: key, ClientCA: clients.CertFile}
	}).URL

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
