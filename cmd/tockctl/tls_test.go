package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/storetest"
)

// tockctl against the API served over HTTPS with client certificates
// required (as tockd --tls-cert --tls-key --tls-client-ca serves it):
// with --ca-cert, --client-cert and --client-key (or their TOCK_*
// variables) it works; without the CA it refuses the server, without a
// client certificate the server refuses it, and half a key pair is a
// usage error.
func TestTLSServer(t *testing.T) {
	ca := testenv.NewCA(t, "tock")
	cert, key := ca.Server(t, "127.0.0.1")
	clientCert, clientKey := ca.Client(t, "operator")
	srv, err := api.New(api.Config{Store: storetest.New(t, 4), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(), Open: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca.CertFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	hs.StartTLS()
	t.Cleanup(hs.Close)

	ok(t, hs.URL, "--ca-cert", ca.CertFile, "--client-cert", clientCert, "--client-key", clientKey,
		"jobs", "create", "--name", "over-tls", "--in", "1h", "--custom", "x")
	out := ok(t, hs.URL, "--ca-cert", ca.CertFile, "--client-cert", clientCert, "--client-key", clientKey, "jobs", "list")
	if r := rows(t, out, jobHeader); len(r) != 1 {
		t.Errorf("jobs list over TLS: %q", r)
	}

	tockctl(t, hs.URL, "--client-cert", clientCert, "--client-key", clientKey, "jobs", "list").
		failed(t, 1, "certificate signed by unknown authority")
	tockctl(t, hs.URL, "--ca-cert", ca.CertFile, "jobs", "list").failed(t, 1, "tls: certificate required")
	tockctl(t, hs.URL, "--ca-cert", ca.CertFile, "--client-cert", clientCert, "jobs", "list").
		failed(t, 1, "--client-cert and --client-key go together")

	t.Setenv("TOCK_CA_CERT", ca.CertFile)
	t.Setenv("TOCK_CLIENT_CERT", clientCert)
	t.Setenv("TOCK_CLIENT_KEY", clientKey)
	ok(t, hs.URL, "jobs", "list")
}
