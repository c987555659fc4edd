package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/internal/embedded"
)

// Users of the servers SecureNATS and SecureEtcd start.
const (
	NATSUser, NATSPassword = "tockd", "nats-secret"
	EtcdUser, EtcdPassword = "tock", "etcd-secret"
)

// SecureNATS starts a NATS server with JetStream that speaks only TLS
// (with ca's certificate for 127.0.0.1; with verify, clients must present
// a certificate ca signed) and knows the user NATSUser and the nkey users
// nkeys, for the test.
func SecureNATS(t testing.TB, ca *CA, verify bool, nkeys ...string) *embedded.NATS {
	t.Helper()
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca.CertFile, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	n := &embedded.NATS{Dir: t.TempDir(), Configure: func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, verify, tc, 5
		o.Users = []*server.User{{Username: NATSUser, Password: NATSPassword}}
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

// SecureEtcd starts an etcd that serves clients only over TLS (with ca's
// certificate; with clientCerts, clients must present one ca signed),
// with authentication on: root, and EtcdUser, who may read and write
// /tock/ and nothing else, as tockd's user would be set up.
func SecureEtcd(t testing.TB, ca *CA, clientCerts bool) *embedded.Etcd {
	t.Helper()
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	e := &embedded.Etcd{Dir: t.TempDir(), CertFile: cert, KeyFile: key}
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if clientCerts {
		e.ClientCAFile = ca.CertFile
		certFile, keyFile := ca.Client(t, "root")
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
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
		func() error { _, err := cli.UserAdd(ctx, EtcdUser, EtcdPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, EtcdUser, "tock"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth set-up step %d: %v", i+1, err)
		}
	}
	return e
}
