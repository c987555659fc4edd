package node

// TLS and credentials on every connection tockd makes to NATS and etcd
// (the API's listener: tls_e2e_test.go; PostgreSQL: pgtls_e2e_test.go),
// each tested against a real server configured that way.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
)

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
	ns := testenv.SecureNATS(t, ca, true, nkey)
	clientCert, clientKey := ca.Client(t, "tockd")
	tlsOK := TLSFiles{CA: ca.CertFile, Cert: clientCert, Key: clientKey}
	withCreds := strings.Replace(ns.URL(), "nats://", "nats://"+testenv.NATSUser+":"+testenv.NATSPassword+"@", 1)

	for _, tc := range []struct {
		name string
		url  string
		auth NATSAuth
		want string // "" to connect
	}{
		{"user and password", ns.URL(), NATSAuth{User: testenv.NATSUser, Password: testenv.NATSPassword, TLS: tlsOK}, ""},
		{"user and password in the URL", withCreds, NATSAuth{TLS: tlsOK}, ""},
		{"nkey seed file", ns.URL(), NATSAuth{NkeySeedFile: seedFile, TLS: tlsOK}, ""},
		{"wrong password", ns.URL(), NATSAuth{User: testenv.NATSUser, Password: "wrong", TLS: tlsOK}, "authorization violation"},
		{"no credentials", ns.URL(), NATSAuth{TLS: tlsOK}, "authorization violation"},
		{"unknown nkey", ns.URL(), NATSAuth{NkeySeedFile: strangerSeed, TLS: tlsOK}, "authorization violation"},
		{"server's CA not trusted", ns.URL(), NATSAuth{User: testenv.NATSUser, Password: testenv.NATSPassword,
			TLS: TLSFiles{Cert: clientCert, Key: clientKey}}, "certificate signed by unknown authority"},
		{"no client certificate", ns.URL(), NATSAuth{User: testenv.NATSUser, Password: testenv.NATSPassword, TLS: TLSFiles{CA: ca.CertFile}},
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
	wrong := strings.Replace(withCreds, testenv.NATSPassword, "wrong-secret", 1)
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
	opts, _ := NATSAuth{User: testenv.NATSUser, Password: testenv.NATSPassword, TLS: tlsOK}.options()
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
	etcd := testenv.SecureEtcd(t, ca, true)
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
	cli, err := connect(EtcdAuth{User: testenv.EtcdUser, Password: testenv.EtcdPassword, TLS: tlsOK}, 20*time.Second)
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

	if _, err := connect(EtcdAuth{User: testenv.EtcdUser, Password: "wrong", TLS: tlsOK}, 20*time.Second); err == nil ||
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
		c, err := connect(EtcdAuth{User: testenv.EtcdUser, Password: testenv.EtcdPassword, TLS: files}, 2*time.Second)
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

func TestNATSReconnectDelayBacksOffWithJitter(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		base     time.Duration
	}{{0, 250 * time.Millisecond}, {1, 250 * time.Millisecond}, {2, 500 * time.Millisecond}, {4, 2 * time.Second}, {100, 2 * time.Second}} {
		for range 50 {
			if d := natsReconnectDelay(tc.attempts); d < tc.base || d >= tc.base*3/2 {
				t.Errorf("attempt %d: waits %s, want [%s, %s)", tc.attempts, d, tc.base, tc.base*3/2)
			}
		}
	}
}
