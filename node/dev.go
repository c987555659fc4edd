package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/internal/embedded"
)

// Dev is tockd dev: every role in one process, with etcd and NATS
// JetStream embedded, for one machine.
type Dev struct {
	// Node is the node's configuration. RunDev sets its connections
	// (etcd, NATS: the embedded servers), its identity ("dev"), its
	// roles (all), authentication (none: the API listens on loopback
	// only) and its egress rules (DevHTTPPolicy); Node.AllowedHosts
	// defaults to the loopback names.
	Node Config
	// DataDir is where the embedded etcd and NATS keep their data, so
	// that a restart keeps state.
	DataDir string
	// EtcdPort and NATSPort are the preferred ports of the embedded
	// servers; free ones are used if they are taken.
	EtcdPort, NATSPort int
	// SecretKeyFile is --secret-key-file; when empty, secret.keys in
	// DataDir is used, created with one new key if missing.
	SecretKeyFile string
	// Out is where RunDev says where everything listens (os.Stderr if
	// nil).
	Out io.Writer
}

// devHosts are the hosts tockd dev answers for when AllowedHosts is not
// given: its API listens on loopback.
var devHosts = []string{"localhost", "127.0.0.1", "[::1]"}

// RunDev checks that the API listens on loopback only, makes sure the
// database exists, starts embedded etcd and NATS, writes an env file
// pointing tockctl at them, and runs every role (Run) until ctx ends.
func RunDev(ctx context.Context, d Dev) error {
	if err := LoopbackOnly(d.Node.HTTPAddr); err != nil {
		return err
	}
	out := d.Out
	if out == nil {
		out = os.Stderr
	}
	dir, err := filepath.Abs(d.DataDir)
	if err != nil {
		return err
	}
	if _, err := d.Node.TLS.ServerConfig(); err != nil {
		return err
	}
	scheme := "http"
	if d.Node.TLS.Cert != "" {
		scheme = "https" // tockctl needs --ca-cert (TOCK_CA_CERT) unless the system trusts the certificate
	}
	if err := EnsureDatabase(ctx, d.Node.PostgresURL); err != nil {
		return err
	}
	secrets, keyFile, err := devKeys(d.SecretKeyFile, dir)
	if err != nil {
		return err
	}

	etcd := &embedded.Etcd{Dir: dir, ClientPort: portOrFree(d.EtcdPort), PeerPort: portOrFree(d.EtcdPort + 1)}
	if err := etcd.Start(); err != nil {
		return err
	}
	defer etcd.Stop()
	ns := &embedded.NATS{Dir: dir, Port: portOrFree(d.NATSPort)}
	if err := ns.Start(); err != nil {
		return err
	}
	defer ns.Stop()

	env := fmt.Sprintf("export TOCK_SERVER=%s://%s\nexport TOCK_NATS_URL=%s\nexport ETCDCTL_ENDPOINTS=%s\nexport TOCK_POSTGRES_URL=%s\n",
		scheme, d.Node.HTTPAddr, ns.URL(), etcd.Endpoint(), d.Node.PostgresURL)
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		return err
	}
	if !d.Node.NoUI {
		fmt.Fprintf(out, "tock dev: dashboard %s://%s/ui/\n", scheme, d.Node.HTTPAddr)
	}
	fmt.Fprintf(out, "tock dev: API %s://%s  etcd %s  NATS %s\n  (source %s to point tockctl, etcdctl and executors at them)\n  secret keys: %s\n"+
		"  The API is open (no API keys) and listens on loopback only; tockd serve requires keys.\n",
		scheme, d.Node.HTTPAddr, etcd.Endpoint(), ns.URL(), envFile, keyFile)

	cfg := d.Node
	cfg.NodeID = "dev"
	cfg.EtcdEndpoints = []string{etcd.Endpoint()}
	cfg.NATSURL = ns.URL()
	cfg.Cluster = "dev"
	cfg.Roles = AllRoles
	cfg.LeaseTTL = 5 * time.Second
	cfg.Migrate = true
	cfg.AuthNone = true // on loopback only (LoopbackOnly)
	cfg.Secrets = secrets
	DevHTTPPolicy(&cfg, etcd.PeerPort)
	if len(cfg.AllowedHosts) == 0 {
		cfg.AllowedHosts = devHosts
	}
	return Run(ctx, cfg)
}

// DevHTTPPolicy sets dev's rules of what the http handler may call: a
// developer's targets are local, so loopback and private addresses may be
// called (metadata services stay refused), and tock's own never: Run
// refuses the etcd client, NATS, PostgreSQL and API addresses cfg names,
// and this adds the embedded etcd's peer port.
func DevHTTPPolicy(cfg *Config, etcdPeerPort int) {
	cfg.HTTPAllowPrivate = true
	cfg.HTTPOwn = append(cfg.HTTPOwn, egress.Own{What: "etcd", Addr: "127.0.0.1:" + strconv.Itoa(etcdPeerPort)})
}

// portOrFree returns port if nothing listens on it, else 0 (pick a free one).
func portOrFree(port int) int {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return 0
	}
	l.Close()
	return port
}

// EnsureDatabase creates the database named in pgURL if it does not
// exist, as tockd dev does at start.
func EnsureDatabase(ctx context.Context, pgURL string) error {
	// pgxpool's parser, not net/url: it reads key=value DSNs too, and it
	// takes the pool's own settings (pool_max_conns) out of the URL, which
	// a plain connection would send to the server and be refused for.
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return fmt.Errorf("--postgres-url: %w", err)
	}
	name := cfg.ConnConfig.Database
	if name == "" || name == "postgres" {
		return nil
	}
	admin := cfg.ConnConfig.Copy()
	admin.Database = "postgres"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, admin)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL at %s (is it running? `make dev` starts it): %w", admin.Host, err)
	}
	defer conn.Close(cctx)
	_, err = conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// LoopbackOnly refuses an address dev's open API would listen on beyond
// this machine.
func LoopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--http-addr %s: tockd dev serves the API without authentication, so it listens on loopback only "+
			"(127.0.0.1, [::1] or localhost); use tockd serve with API keys to expose it", addr)
	}
	return nil
}
