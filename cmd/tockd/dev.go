package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/internal/embedded"
)

// DevCmd runs every role in one process with etcd and NATS JetStream
// embedded. Their data lives under --data-dir, so a restart keeps state.
type DevCmd struct {
	Common
	ExecutionFlags
	HTTPFlags
	SecretFlags
	APITLSFlags
	DataDir  string `name:"data-dir" env:"TOCK_DEV_DIR" default:".dev" help:"Where embedded etcd and NATS keep their data."`
	HTTPAddr string `name:"http-addr" env:"TOCK_HTTP_ADDR" default:"127.0.0.1:8080" help:"Listen address of the REST API."`
	EtcdPort int    `name:"etcd-port" default:"2379" help:"Preferred etcd client port (a free one is used if it is taken)."`
	NATSPort int    `name:"nats-port" default:"4222" help:"Preferred NATS port (a free one is used if it is taken)."`
	Buckets  int    `name:"buckets" env:"TOCK_BUCKETS" default:"256" help:"Number of buckets of a new cluster."`
	Pprof    bool   `name:"pprof" env:"TOCK_PPROF" help:"Serve Go's profiler under /debug/pprof/ on the HTTP address."`
}

// Run starts embedded etcd and NATS, makes sure the database exists, and
// serves every role until SIGINT or SIGTERM.
func (c *DevCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLogger(c.LogLevel)
	if err := loopbackOnly(c.HTTPAddr); err != nil {
		return err
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return err
	}
	var probe Config
	c.APITLSFlags.apply(&probe)
	if _, err := probe.TLS.serverConfig(); err != nil {
		return err
	}
	scheme := "http"
	if probe.TLS.Cert != "" {
		scheme = "https" // tockctl needs --ca-cert (TOCK_CA_CERT) unless the system trusts the certificate
	}
	if err := ensureDatabase(ctx, c.PostgresURL); err != nil {
		return err
	}
	secrets, keyFile, err := c.SecretFlags.devKeys(dir)
	if err != nil {
		return err
	}

	etcd := &embedded.Etcd{Dir: dir, ClientPort: portOrFree(c.EtcdPort), PeerPort: portOrFree(c.EtcdPort + 1)}
	if err := etcd.Start(); err != nil {
		return err
	}
	defer etcd.Stop()
	ns := &embedded.NATS{Dir: dir, Port: portOrFree(c.NATSPort)}
	if err := ns.Start(); err != nil {
		return err
	}
	defer ns.Stop()

	env := fmt.Sprintf("export TOCK_SERVER=%s://%s\nexport TOCK_NATS_URL=%s\nexport ETCDCTL_ENDPOINTS=%s\nexport TOCK_POSTGRES_URL=%s\n",
		scheme, c.HTTPAddr, ns.URL(), etcd.Endpoint(), c.PostgresURL)
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "tock dev: API %s://%s  etcd %s  NATS %s\n  (source %s to point tockctl, etcdctl and executors at them)\n  secret keys: %s\n"+
		"  The API is open (no API keys) and listens on loopback only; tockd serve requires keys.\n",
		scheme, c.HTTPAddr, etcd.Endpoint(), ns.URL(), envFile, keyFile)

	cfg := Config{
		NodeID:        "dev",
		HTTPAddr:      c.HTTPAddr,
		PostgresURL:   c.PostgresURL,
		EtcdEndpoints: []string{etcd.Endpoint()},
		NATSURL:       ns.URL(),
		Cluster:       "dev",
		Roles:         map[string]bool{RoleAPI: true, RoleScheduler: true, RoleExecutor: true, RoleRecorder: true},
		Buckets:       c.Buckets,
		LeaseTTL:      5 * time.Second,
		Migrate:       true,
		Pprof:         c.Pprof,
		Logger:        log,
		AuthNone:      true, // on loopback only (loopbackOnly)
		Secrets:       secrets,
	}
	c.ExecutionFlags.apply(&cfg)
	devHTTPPolicy(&cfg, etcd)
	c.HTTPFlags.apply(&cfg, true)
	c.APITLSFlags.apply(&cfg)
	return Serve(ctx, cfg)
}

// devHTTPPolicy sets dev's rules of what the http handler may call: a
// developer's targets are local, so loopback and private addresses may be
// called (metadata services stay refused), and tock's own never: Serve
// refuses the etcd client, NATS, PostgreSQL and API addresses cfg names,
// and this adds the embedded etcd's peer port.
func devHTTPPolicy(cfg *Config, etcd *embedded.Etcd) {
	cfg.HTTPAllowPrivate = true
	cfg.HTTPOwn = append(cfg.HTTPOwn, egress.Own{What: "etcd", Addr: "127.0.0.1:" + strconv.Itoa(etcd.PeerPort)})
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

// ensureDatabase creates the database named in pgURL if it does not exist.
func ensureDatabase(ctx context.Context, pgURL string) error {
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

// loopbackOnly refuses an address dev's open API would listen on beyond
// this machine.
func loopbackOnly(addr string) error {
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
