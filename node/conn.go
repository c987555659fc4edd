package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// This file turns the node's TLS and credential settings into what each
// connection needs: a tls.Config for the API's listener, nats.Options for
// every NATS connection, and a clientv3.Config for every etcd client.
// PostgreSQL needs nothing here: pgx reads sslmode, sslrootcert, sslcert
// and sslkey from --postgres-url itself.

// TLSFiles are the PEM files of a TLS client: CA, the certificates to
// trust for the server (empty: the system's roots); Cert and Key, the
// client's own certificate and key, for a server that asks for one.
type TLSFiles struct {
	CA, Cert, Key string
}

// set reports whether any file is named.
func (f TLSFiles) set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// check rejects a certificate without its key, or a key without its
// certificate; flag is the flags' common prefix (--nats-tls), for errors.
func (f TLSFiles) check(flag string) error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%s-cert and %s-key go together: give both or neither", flag, flag)
	}
	return nil
}

// clientConfig is the TLS configuration the files describe; flag is the
// flags' common prefix (--nats-tls), for errors.
func (f TLSFiles) clientConfig(flag string) (*tls.Config, error) {
	if err := f.check(flag); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := certPool(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s-ca: %w", flag, err)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s-cert, %s-key: %w", flag, flag, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// certPool reads the PEM certificates in file.
func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// APITLS serves the HTTP address (REST API, /metrics, health checks)
// over TLS when Cert and Key are set. With ClientCA, every client must
// present a certificate signed by one of its CAs.
type APITLS struct {
	Cert, Key, ClientCA string
}

// check rejects settings that name half of what TLS needs.
func (t APITLS) check() error {
	if t.Cert == "" && t.Key == "" {
		if t.ClientCA != "" {
			return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over TLS only")
		}
		return nil
	}
	if t.Cert == "" || t.Key == "" {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	return nil
}

// ServerConfig is the listener's TLS configuration, its files read;
// nil when TLS is off.
func (t APITLS) ServerConfig() (*tls.Config, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.Cert == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if t.ClientCA != "" {
		pool, err := certPool(t.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// NATSAuth is how a node authenticates to NATS (at most one of a user and
// password, an nkey seed file and a JWT credentials file; a user and
// password in the URL work too) and checks its certificate.
type NATSAuth struct {
	User, Password string
	NkeySeedFile   string
	CredsFile      string
	TLS            TLSFiles
}

// check rejects a password without a user, and more than one way to
// authenticate.
func (a NATSAuth) check() error {
	if a.Password != "" && a.User == "" {
		return errors.New("--nats-password needs --nats-user")
	}
	var given []string
	for _, g := range []struct {
		flag string
		set  bool
	}{{"--nats-user", a.User != ""}, {"--nats-nkey-seed-file", a.NkeySeedFile != ""}, {"--nats-creds-file", a.CredsFile != ""}} {
		if g.set {
			given = append(given, g.flag)
		}
	}
	if len(given) > 1 {
		return fmt.Errorf("%s: give one way to authenticate to NATS", strings.Join(given, ", "))
	}
	return a.TLS.check("--nats-tls")
}

// options are the nats.Options that authenticate the connection and set
// up its TLS, their files read. Every NATS connection tockd makes uses
// them.
func (a NATSAuth) options() ([]nats.Option, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(a.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey-seed-file: %w", err)
		}
		opts = append(opts, o)
	}
	if a.CredsFile != "" {
		// nats.go reads the file at each connect; read it now too, so
		// that a wrong path fails the start, not every reconnect.
		if _, err := os.ReadFile(a.CredsFile); err != nil {
			return nil, fmt.Errorf("--nats-creds-file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.TLS.set() {
		cfg, err := a.TLS.clientConfig("--nats-tls")
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// dialNATS connects to url with opts. A server that refuses the node (a
// wrong password, an unknown certificate) fails it at once; a server that
// cannot be reached yet is connected to in the background
// (nats.RetryOnFailedConnect), so that a node starts while NATS is down,
// and warn is told why.
func dialNATS(url string, opts []nats.Option, warn func(error)) (*nats.Conn, error) {
	nc, err := nats.Connect(url, opts...)
	if err == nil || !natsUnreachable(err) {
		return nc, err
	}
	warn(err)
	return nats.Connect(url, append(opts, nats.RetryOnFailedConnect(true))...)
}

// redactURLs is a comma-separated list of URLs with their passwords
// replaced by xxxxx, for logs and errors.
func redactURLs(list string) string {
	urls := strings.Split(list, ",")
	for i, s := range urls {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil {
			urls[i] = u.Redacted()
		}
	}
	return strings.Join(urls, ",")
}

// natsUnreachable reports whether err says that no NATS server answered
// (down, not resolvable, too slow), rather than that one refused the
// connection.
func natsUnreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) ||
		(errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)
}

// EtcdAuth is how a node authenticates to etcd (a user and password) and
// checks its certificate.
type EtcdAuth struct {
	User, Password string
	TLS            TLSFiles
}

// check rejects half a user and password, and TLS settings for plain
// http endpoints.
func (a EtcdAuth) check(endpoints []string) error {
	// clientv3 ignores a user without a password, and a password
	// without a user: both would connect unauthenticated.
	if (a.User == "") != (a.Password == "") {
		return errors.New("--etcd-user and --etcd-password go together: give both or neither")
	}
	if a.TLS.set() {
		for _, e := range endpoints {
			if strings.HasPrefix(e, "http://") {
				return fmt.Errorf("--etcd-tls-*: endpoint %s is plain http; write it https://", e)
			}
		}
	}
	return a.TLS.check("--etcd-tls")
}

// etcdConfig is the client configuration for endpoints, authenticated and
// secured as a says, its files read. Every etcd client tockd makes uses
// it.
func etcdConfig(endpoints []string, a EtcdAuth) (clientv3.Config, error) {
	// DialTimeout bounds the log-in at start (with a user; connections
	// are otherwise made lazily). clientv3 also waits this long plus a
	// second for a lease's first keep-alive answer before it gives the
	// keep-alive up, so it shapes the scheduler's lease handling too:
	// it stays what it was before etcd credentials existed.
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: etcdLogger()}
	if err := a.check(endpoints); err != nil {
		return cfg, err
	}
	cfg.Username, cfg.Password = a.User, a.Password
	if a.TLS.set() {
		tlsCfg, err := a.TLS.clientConfig("--etcd-tls")
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tlsCfg
	}
	return cfg, nil
}

// etcdLogger keeps the etcd client's own log to errors: its warnings
// (retried calls, cancelled requests at shutdown) are noise next to what
// tock logs about etcd itself.
func etcdLogger() *zap.Logger {
	lg, err := zap.NewProduction(zap.IncreaseLevel(zap.ErrorLevel))
	if err != nil {
		return zap.NewNop()
	}
	return lg
}
