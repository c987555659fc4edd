package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/telemetry/tracing"
	"github.com/tock-sched/tock/wire"
)

// Run runs the configured roles until ctx ends, then shuts down in
// order: the executor stops pulling at once (its shutdown grace,
// Config.ShutdownGrace, starts), the HTTP server stops, then the
// components stop stage by stage (see stopStage): the scheduler hands its
// buckets back (its scanner stops firing in each before the owner key is
// deleted), the scanner stops, the dispatcher publishes what was fired
// (bounded by drainTimeout) and stops, then the executor's attempts
// finish, or are interrupted and handed back at the end of the grace,
// and the recorder records what the executor reported and stops last.
// The NATS connection is flushed before it closes, so that the last acks
// and naks reach the server. Run thus returns within the grace and a few
// seconds. If a component fails to start, or the HTTP address cannot be
// listened on, the components already started are stopped the same way
// before Run returns the error.
//
// cfg is taken with its defaults (Config.WithDefaults); a configuration
// that cannot work, or names a certificate, key or credentials file that
// cannot be read, fails before any connection is made.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	tlsCfg, err := cfg.checkFiles()
	if err != nil {
		return err
	}
	log := cfg.Logger.With("node", cfg.NodeID)

	startCtx, cancelStart := context.WithTimeout(ctx, time.Minute)
	defer cancelStart()
	policy, err := httpPolicy(startCtx, cfg)
	if err != nil {
		return err
	}
	// Migrations are not bounded by the start's minute: one that rebuilds
	// a large table (migration 37 at 10,000,000 jobs) takes longer.
	st, err := storeFor(startCtx, ctx, &cfg, log)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	if err := checkAuth(startCtx, cfg, st, log); err != nil {
		return err
	}
	apiSt, err := apiStoreFor(startCtx, cfg, st)
	if err != nil {
		return err
	}
	if apiSt != st {
		defer apiSt.Close()
	}
	nc, js, err := connectNATS(startCtx, cfg, log)
	if err != nil {
		return err
	}
	defer closeNATS(nc, log)
	etcd, err := etcdClient(cfg)
	if err != nil {
		return err
	}
	if etcd != nil {
		defer etcd.Close()
	}
	d := deps{st: st, apiSt: apiSt, nc: nc, js: js, etcd: etcd, log: log, http: policy, reg: prometheus.DefaultRegisterer,
		tracer: cfg.Tracing.Tracer(), tracerProvider: cfg.Tracing.Provider()}
	if !cfg.NoChangeFeed {
		d.changes = changes.NewFeed(js, log)
		d.changes.Replicas = cfg.StreamReplicas
	}
	if cfg.Roles.Has(RoleAPI) {
		// The JWK Set is refreshed until Run returns.
		if d.jwt, err = jwtConfig(ctx, cfg.JWT); err != nil {
			return err
		}
	}

	pgCtx, pgStop := context.WithCancel(ctx)
	if d.pg, err = watchPostgres(pgCtx, st, d.reg, log); err != nil {
		pgStop()
		return err
	}
	// Before the store closes (deferred above).
	defer func() { pgStop(); d.pg.wait() }()
	if err := registerNodeMetrics(cfg, d); err != nil {
		return err
	}

	r := &runner{parent: ctx, log: log, failed: make(chan error, 8)}
	for _, c := range components(cfg, d) {
		if !c.on {
			continue
		}
		if err := r.start(c); err != nil {
			r.stop()
			return err
		}
	}
	handler, err := httpHandler(cfg, d)
	if err != nil {
		r.stop()
		return err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			r.stop()
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	httpSrv := &http.Server{Handler: handler, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, TLSConfig: tlsCfg,
		// Failed TLS handshakes, among others, are reported here.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	httpDone := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			httpDone <- httpSrv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
			return
		}
		httpDone <- httpSrv.Serve(ln)
	}()
	if cfg.MetricsAddr != "" {
		msrv, err := metricsServer(cfg, httpDone)
		if err != nil {
			_ = httpSrv.Close()
			r.stop()
			return err
		}
		defer msrv.Close()
	}
	log.Info("tockd started", "http", ln.Addr().String(), "tls", tlsCfg != nil, "client_certs", cfg.TLS.ClientCA != "",
		"roles", cfg.Roles.String(), "buckets", cfg.Buckets)
	if cfg.Ready != nil {
		close(cfg.Ready)
	}

	runErr := waitForEnd(ctx, r.failed, httpDone, log)
	log.Info("tockd shutting down", "grace", cfg.ShutdownGrace)
	r.stopEarly()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = httpSrv.Shutdown(sctx)
	scancel()
	r.stop()
	log.Info("tockd stopped")
	return runErr
}

// closeFlush bounds the flush of the NATS connection when a node stops.
const closeFlush = 2 * time.Second

// closeNATS flushes nc, so that the acks and naks of the last attempts
// (published without waiting for an answer) reach the server, then
// closes it.
func closeNATS(nc *nats.Conn, log *slog.Logger) {
	if nc.IsConnected() {
		if err := nc.FlushTimeout(closeFlush); err != nil {
			log.Warn("flush NATS at shutdown", "err", err)
		}
	}
	nc.Close()
}

// CheckFiles reads the certificates, keys and credentials c names (TLS,
// NATSAuth, EtcdAuth) and reports the first that cannot be used, so that
// tockd refuses its flags before it connects anywhere. Run checks them
// too.
func (c Config) CheckFiles() error {
	_, err := c.checkFiles()
	return err
}

// checkFiles is CheckFiles, returning the API listener's TLS
// configuration too (nil: plain HTTP).
func (c Config) checkFiles() (*tls.Config, error) {
	tlsCfg, err := c.TLS.ServerConfig()
	if err != nil {
		return nil, err
	}
	if _, err := c.NATSAuth.options(); err != nil {
		return nil, err
	}
	if _, err := etcdConfig(c.EtcdEndpoints, c.EtcdAuth); err != nil {
		return nil, err
	}
	return tlsCfg, nil
}

// waitForEnd waits until ctx ends (nil), a component fails (its error) or
// the HTTP server stops by itself (its error).
func waitForEnd(ctx context.Context, failed <-chan error, httpDone <-chan error, log *slog.Logger) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		log.Error("role failed; shutting down", "err", err)
		return err
	case err := <-httpDone:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	}
}

// storeFor opens Postgres for the roles that need it (api, scheduler,
// recorder; nil for the others), migrates it if cfg says so, and sets
// cfg.Buckets to the cluster's stored bucket count. While no Postgres
// server answers, or none takes writes yet (a failover in progress), it
// retries until ctx ends; a server that refuses the node (a wrong
// password, no such database) fails the start at once. The migrations
// run under migrateCtx, for as long as they take.
func storeFor(ctx, migrateCtx context.Context, cfg *Config, log *slog.Logger) (*store.Store, error) {
	if !cfg.Roles.needsStore() {
		return nil, nil
	}
	var b retry.Backoff
	for {
		st, err := openStore(ctx, migrateCtx, cfg, log)
		if err == nil || !store.Unavailable(err) || !b.Wait(ctx, log, "PostgreSQL not reachable yet; retrying", "err", err) {
			return st, err
		}
	}
}

// apiStoreFor opens the API's own pool (issue 44: the API's reads never
// wait for, nor hold, the connections the scheduler and the recorder
// fire and record with): cfg.APIPoolConns connections, each statement
// cut at cfg.APIStatementTimeout. It is st when the node runs no API or
// cfg says to share (APIPoolConns < 0).
func apiStoreFor(ctx context.Context, cfg Config, st *store.Store) (*store.Store, error) {
	if st == nil || !cfg.Roles.Has(RoleAPI) || cfg.APIPoolConns < 0 {
		return st, nil
	}
	opts := append(storeOptions(cfg), store.ForRequests(cfg.APIPoolConns, cfg.APIStatementTimeout))
	api, err := store.Open(ctx, cfg.PostgresURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("the API's pool: %w", err)
	}
	if _, err := api.Init(ctx, cfg.Buckets); err != nil {
		api.Close()
		return nil, fmt.Errorf("the API's pool: %w", err)
	}
	return api, nil
}

// storeOptions are the options of every store the node opens.
func storeOptions(cfg Config) []store.Option {
	var opts []store.Option
	if cfg.TraceDB && cfg.Tracing != nil {
		opts = append(opts, store.WithQueryTracer(otelpgx.NewTracer(
			otelpgx.WithTracerProvider(tracing.ChildOnly(cfg.Tracing.Provider())))))
	}
	return opts
}

func openStore(ctx, migrateCtx context.Context, cfg *Config, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.PostgresURL, storeOptions(*cfg)...)
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := st.Migrate(migrateCtx); err != nil {
			st.Close()
			return nil, err
		}
	}
	n, err := st.Init(ctx, cfg.Buckets)
	if err != nil {
		st.Close()
		return nil, err
	}
	if n != cfg.Buckets {
		log.Info("cluster bucket count is fixed at creation; using the stored value", "buckets", n)
	}
	cfg.Buckets = n
	return st, nil
}

// connectNATS connects to NATS, which every role uses: the API tells
// executors of cancellations and reads their handler states. It creates
// the streams unless the node runs the API alone: an API-only node leaves
// them to the other roles, so it starts (and serves jobs) while NATS is
// down. A server that refuses the node's credentials or certificates
// fails the start at once.
func connectNATS(ctx context.Context, cfg Config, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	auth, err := cfg.NATSAuth.options()
	if err != nil {
		return nil, nil, err
	}
	opts := append([]nats.Option{
		nats.Name("tockd " + cfg.NodeID),
		// Reconnect for ever; with several URLs (a cluster's servers),
		// to any that answers.
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(natsReconnectDelay),
		// Permission violations, among others, arrive here and nowhere
		// else: a publish NATS refuses returns no error.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS", "err", err) }),
	}, auth...)
	shown := redactURLs(cfg.NATSURL) // a password in the URL stays out of logs
	nc, err := dialNATS(cfg.NATSURL, opts, func(err error) {
		log.Warn("NATS not reachable yet; connecting in the background", "url", shown, "err", err)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS %s: %w", shown, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Roles.Has(RoleScheduler) || cfg.Roles.Has(RoleExecutor) || cfg.Roles.Has(RoleRecorder) {
		if err := wire.EnsureStreamsReplicas(ctx, js, cfg.StreamReplicas); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("create streams on %s with --stream-replicas %d: %w", shown, cfg.StreamReplicas, err)
		}
		if !cfg.NoChangeFeed {
			if err := wire.EnsureChangeStream(ctx, js, cfg.StreamReplicas); err != nil {
				nc.Close()
				return nil, nil, fmt.Errorf("create the change feed's stream on %s: %w", shown, err)
			}
		}
	}
	return nc, js, nil
}

// natsReconnectDelay is how long a node waits after trying every NATS
// server in vain for the attempts-th time: 250 ms, doubling up to 2 s,
// plus up to half of it at random, so that a cluster's nodes do not all
// knock at once on a server that comes back.
func natsReconnectDelay(attempts int) time.Duration {
	d := 250 * time.Millisecond << min(max(attempts-1, 0), 3)
	return d + rand.N(d/2)
}

// etcdClient is the etcd client of a node with the scheduler role, which
// keeps its membership and buckets in etcd, or the API role, which reads
// them there for /v1/nodes and /v1/buckets; nil for other nodes. The
// client dials lazily, so an API node starts (and serves jobs) with etcd
// down; but with a user and password it authenticates at once, so etcd
// must answer at start then.
func etcdClient(cfg Config) (*clientv3.Client, error) {
	if !cfg.Roles.needsEtcd() {
		return nil, nil
	}
	ecfg, err := etcdConfig(cfg.EtcdEndpoints, cfg.EtcdAuth)
	if err != nil {
		return nil, err
	}
	etcd, err := clientv3.New(ecfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(cfg.EtcdEndpoints, ","), err)
	}
	return etcd, nil
}

// deps are the connections a node's components share.
type deps struct {
	st *store.Store // nil unless the api, scheduler or recorder role runs
	// apiSt is the API's own store (apiStoreFor): st unless the api role
	// runs with its own pool.
	apiSt *store.Store
	nc    *nats.Conn
	js    jetstream.JetStream
	etcd  *clientv3.Client // nil unless the api or scheduler role runs
	log   *slog.Logger
	// http is what the http handler may call (httpPolicy).
	http *egress.Policy
	// jwt verifies JWT bearer tokens (api role, --jwks-url); nil: keys
	// only.
	jwt *api.JWTConfig
	// reg is where the components register their metrics: the default
	// registry, which /metrics serves.
	reg prometheus.Registerer
	// pg is the state of the PostgreSQL connection (non-API nodes'
	// /readyz; the API's checks the database itself).
	pg *pgState
	// changes is the change feed: the recorder and the API publish to it,
	// the API's GET /v1/changes reads it.
	changes *changes.Feed
	// tracer is the node's tracer, nil when tracing is off; tracerProvider
	// its provider (a no-op one when off).
	tracer         trace.Tracer
	tracerProvider trace.TracerProvider
}
