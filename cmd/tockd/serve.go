package main

import (
	"github.com/MicahParks/keyfunc/v3"

	"github.com/tock-sched/tock/domain"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/backfill"
	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/maintenance"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/recorder"
	"github.com/tock-sched/tock/scanner"
	"github.com/tock-sched/tock/secret"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/wire"
)

// Roles.
const (
	RoleAPI       = "api"
	RoleScheduler = "scheduler"
	RoleExecutor  = "executor"
	RoleRecorder  = "recorder"
)

// Timeouts of the HTTP server, so that slow or idle clients do not hold
// connections for ever. A request must arrive whole (a 16 MiB batch at
// about 1 Mbit/s) within readTimeout; its answer, handler time included,
// must be written within writeTimeout (the API streams nothing; a bulk
// pause over very many jobs that takes longer still completes, but its
// answer is lost, and a /debug/pprof profile may last at most as long).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 2 * time.Minute
	writeTimeout      = 5 * time.Minute
	idleTimeout       = 2 * time.Minute
)

// Config is a tockd node's configuration.
type Config struct {
	NodeID        string
	HTTPAddr      string
	PostgresURL   string
	EtcdEndpoints []string
	NATSURL       string
	Cluster       string
	Roles         map[string]bool
	Buckets       int
	LeaseTTL      time.Duration
	Migrate       bool
	Logger        *slog.Logger
	// Pprof serves Go's profiler under /debug/pprof/ on the HTTP address.
	Pprof bool
	// Retry is the cluster's default retry policy (api role).
	Retry domain.RetryPolicy
	// Retention is how long execution history is kept for namespaces
	// without their own, CompletedJobRetention how long a completed
	// one-shot job is kept (see store.ApplyRetention).
	Retention, CompletedJobRetention time.Duration
	// ArchiveDir, if set, is where each day of execution history is
	// written (archive.Day) before retention drops it; a day that cannot
	// be written is not dropped.
	ArchiveDir string
	// AuditRetention is how long the audit trail is kept.
	AuditRetention time.Duration
	// Missed and Overlap are the cluster's default missed-run and overlap
	// policies (api role: stored with new jobs; scheduler role: for jobs
	// stored without one).
	Missed  domain.MissedPolicy
	Overlap string
	// Executor role: attempts in flight per queue and per handler, the
	// ack wait of the queues' consumers, and the per-handler breakers.
	ExecutorConcurrency   int
	ExecutorMaxPerHandler int
	ExecutorAckWait       time.Duration
	Breaker               executor.BreakerConfig
	// FireBacklogFor and FireBacklogMin bound how far firing runs ahead
	// of execution (scanner.Config.BacklogFor and MinBacklog; 0: their
	// defaults); a negative FireBacklogFor turns backpressure off, and
	// firing then goes on at the due rate however much waits.
	FireBacklogFor time.Duration
	FireBacklogMin int
	// BackfillRate is the most backfill runs a scheduler node creates per
	// second (backfill.Config.Rate); 0 means backfill.DefaultRate.
	BackfillRate float64
	// HTTPAllowPrivate, HTTPAllow and HTTPDeny are the rules of what the
	// http handler may call (egress.Rules), for the api role (a job's URL
	// is checked when it is created) and the executor role (every
	// connection is checked as it is made). The zero values refuse
	// loopback, private, link-local, unique-local and metadata addresses.
	// Whatever they say, tock's own addresses are refused: the API's,
	// etcd's, NATS's and PostgreSQL's as this Config names them, and
	// HTTPOwn.
	HTTPAllowPrivate    bool
	HTTPAllow, HTTPDeny []string
	HTTPOwn             []egress.Own
	// AllowedHosts and CORSOrigins guard the API against browsers (see
	// api.Config).
	AllowedHosts, CORSOrigins []string
	// AuthNone serves the API without authentication (tockd serve --auth
	// none, tockd dev); otherwise every call needs an API key, and an api
	// node refuses to start while no key exists (errNoKeys).
	AuthNone bool
	// MetricsAddr, if set, is a second listener serving /metrics without
	// authentication (and the profiler, with Pprof), for Prometheus on a
	// network the API's clients cannot reach.
	MetricsAddr string
	// Limits are the API's rate limits and quotas for keys.
	Limits api.Limits
	// JWT, when its URL is set, accepts JWT bearer tokens verified with
	// the JWK Set at that URL (the api role).
	JWT JWTSettings
	// Secrets are the keys of --secret-key-file: the api role seals
	// secret headers with them, the executor role opens them. Nil: no
	// key (see secrets.go).
	Secrets *secret.Keyring
	// TLS, once its certificate and key are set, serves the HTTP address
	// over TLS (see APITLS).
	TLS APITLS
	// NATSAuth and EtcdAuth authenticate the node's connections to NATS
	// and etcd and check those servers' certificates. PostgreSQL's are
	// in PostgresURL (sslmode, sslrootcert, sslcert, sslkey).
	NATSAuth NATSAuth
	EtcdAuth EtcdAuth
	// Listener, if set, is used instead of listening on HTTPAddr.
	Listener net.Listener
	// Ready, if set, is closed once every role has started.
	Ready chan<- struct{}
}

// Serve runs the configured roles until ctx ends, then shuts down in
// order: the HTTP server first, then the components stage by stage (see
// stopStage): the scheduler hands its buckets back (its scanner stops
// firing in each before the owner key is deleted), the scanner stops, the
// dispatcher publishes what was fired (bounded by drainTimeout) and
// stops, then executors finish their attempts, and the recorder stops
// last. If a component fails to start, or the HTTP address cannot be
// listened on, the components already started are stopped the same way
// before Serve returns the error.
func Serve(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.NodeID == "" {
		cfg.NodeID = partition.DefaultNodeID()
	}
	log = log.With("node", cfg.NodeID)

	startCtx, cancelStart := context.WithTimeout(ctx, time.Minute)
	defer cancelStart()
	policy, err := httpPolicy(startCtx, cfg)
	if err != nil {
		return err
	}
	tlsCfg, err := cfg.TLS.serverConfig()
	if err != nil {
		return err
	}
	st, err := storeFor(startCtx, &cfg, log)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	if err := checkAuth(startCtx, cfg, st, log); err != nil {
		return err
	}
	nc, js, err := connectNATS(startCtx, cfg, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	etcd, err := etcdClient(cfg)
	if err != nil {
		return err
	}
	if etcd != nil {
		defer etcd.Close()
	}
	d := deps{st: st, nc: nc, js: js, etcd: etcd, log: log, http: policy, reg: prometheus.DefaultRegisterer}
	if cfg.Roles[RoleAPI] {
		// The JWK Set is refreshed until Serve returns.
		if d.jwt, err = jwtConfig(ctx, cfg.JWT); err != nil {
			return err
		}
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
		"roles", cfg.Roles, "buckets", cfg.Buckets)
	if cfg.Ready != nil {
		close(cfg.Ready)
	}

	runErr := waitForEnd(ctx, r.failed, httpDone, log)
	log.Info("tockd shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = httpSrv.Shutdown(sctx)
	scancel()
	r.stop()
	log.Info("tockd stopped")
	return runErr
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
// cfg.Buckets to the cluster's stored bucket count.
func storeFor(ctx context.Context, cfg *Config, log *slog.Logger) (*store.Store, error) {
	if !cfg.Roles[RoleAPI] && !cfg.Roles[RoleScheduler] && !cfg.Roles[RoleRecorder] {
		return nil, nil
	}
	st, err := store.Open(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := st.Migrate(ctx); err != nil {
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
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
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
	if cfg.Roles[RoleScheduler] || cfg.Roles[RoleExecutor] || cfg.Roles[RoleRecorder] {
		if err := wire.EnsureStreams(ctx, js); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("create streams on %s: %w", shown, err)
		}
	}
	return nc, js, nil
}

// etcdClient is the etcd client of a node with the scheduler role, which
// keeps its membership and buckets in etcd, or the API role, which reads
// them there for /v1/nodes and /v1/buckets; nil for other nodes. The
// client dials lazily, so an API node starts (and serves jobs) with etcd
// down; but with a user and password it authenticates at once, so etcd
// must answer at start then.
func etcdClient(cfg Config) (*clientv3.Client, error) {
	if !cfg.Roles[RoleAPI] && !cfg.Roles[RoleScheduler] {
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
	st   *store.Store // nil unless the api, scheduler or recorder role runs
	nc   *nats.Conn
	js   jetstream.JetStream
	etcd *clientv3.Client // nil unless the api or scheduler role runs
	log  *slog.Logger
	// http is what the http handler may call (httpPolicy).
	http *egress.Policy
	// jwt verifies JWT bearer tokens (api role, --jwks-url); nil: keys
	// only.
	jwt *api.JWTConfig
	// reg is where the components register their metrics: the default
	// registry, which /metrics serves.
	reg prometheus.Registerer
}

// runFunc runs a component until its context ends.
type runFunc func(ctx context.Context) error

// component is one long-running part of a node: a role, or one of the
// scheduler role's parts.
type component struct {
	name string
	// on says whether this node runs it (from Config.Roles).
	on bool
	// stage is its place in the stop order.
	stage stopStage
	// start builds it and returns what runs it.
	start func() (runFunc, error)
	// drain, if set, is called before the component is stopped, with a
	// context that ends after drainTimeout.
	drain func(ctx context.Context) error
}

// stopStage is a place in the stop order. Stages stop one after another
// in the order declared here; the components of one stage stop together,
// each given 15s before Serve gives up on it with a warning.
type stopStage int

const (
	// The partition node hands its buckets back: for each, the scanner
	// stops firing in it, then the owner key is deleted; then the node
	// deletes its member key and revokes its lease. So the node has left
	// etcd before the scanner stops. Partition maintenance, wipe
	// recovery and lost-work rescue stop alongside it.
	stopBuckets stopStage = iota
	// The scanner, which now fires in no bucket.
	stopScanner
	// The dispatcher, once it has published what the scanner fired last
	// (see drainTimeout).
	stopDispatcher
	// Executors, once their attempts in flight have finished.
	stopExecutor
	// The recorder, last.
	stopRecorder

	stopStages // how many stages there are
)

// drainTimeout bounds the dispatcher's drain at shutdown. What the
// scanner fired last is usually due at most its FireLead (500ms) ahead,
// so this covers it and the publish acks. What is still waiting after it
// (runs of a burst fired up to MaxFireLead ahead, retries
// read ahead of their backoff's end, publishes NATS does not acknowledge)
// stays in the outbox, and the bucket's next owner publishes it.
const drainTimeout = time.Second

// components is the table of what a node runs, in start order.
func components(cfg Config, d deps) []component {
	sched := cfg.Roles[RoleScheduler]
	// The scheduler's parts are wired to one another: they are built
	// together, when the first of them starts.
	parts := sync.OnceValues(func() (*scheduler, error) { return newScheduler(cfg, d) })
	part := func(run func(s *scheduler) runFunc) func() (runFunc, error) {
		return func() (runFunc, error) {
			s, err := parts()
			if err != nil {
				return nil, err
			}
			return run(s), nil
		}
	}
	return []component{
		{name: "dispatcher", on: sched, stage: stopDispatcher,
			start: part(func(s *scheduler) runFunc { return s.disp.Run }),
			drain: func(ctx context.Context) error {
				s, err := parts()
				if err != nil {
					return err
				}
				return s.disp.Drain(ctx)
			}},
		{name: "wipe-recovery", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc { return s.wipe.Run })},
		{name: "lost-work", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc { return s.lost.Run })},
		{name: "scanner", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.scan.Run })},
		{name: "backlog", on: sched && cfg.FireBacklogFor >= 0, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.backlog.Run })},
		{name: "backfill", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.back.Run })},
		{name: "partition", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc {
				return func(ctx context.Context) error { return s.node.Run(ctx, s.scan) }
			})},
		{name: "maintenance", on: sched, stage: stopBuckets,
			start: func() (runFunc, error) {
				p, err := maintenancePass(d.st, d.log, cfg, d.reg, false)
				if err != nil {
					return nil, err
				}
				return p.Run, nil
			}},
		{name: "recorder", on: cfg.Roles[RoleRecorder], stage: stopRecorder,
			start: func() (runFunc, error) {
				r, err := recorder.New(recorder.Config{JS: d.js, Store: d.st, Logger: d.log, Registerer: d.reg})
				if err != nil {
					return nil, err
				}
				return r.Run, nil
			}},
		{name: "executor", on: cfg.Roles[RoleExecutor], stage: stopExecutor,
			start: func() (runFunc, error) { return newExecutor(cfg, d) }},
	}
}

// scheduler is the scheduler role's parts.
type scheduler struct {
	disp *dispatcher.Dispatcher
	node *partition.Node
	scan *scanner.Scanner
	wipe *maintenance.WipeRecovery
	lost *maintenance.LostWorkRescuer
	back *backfill.Runner
	// backlog is read by the scanner (backpressure); nil when it is off.
	backlog *dispatcher.BacklogWatch
}

func newScheduler(cfg Config, d deps) (*scheduler, error) {
	// One clock, the database's, for the scanner (which keeps it synced),
	// the dispatcher, wipe recovery and lost-work rescue.
	clk := clock.New(d.st.Now, clock.Options{})
	disp, err := dispatcher.New(dispatcher.Config{JS: d.js, Store: d.st, Failer: d.st, Clock: clk, Logger: d.log, Registerer: d.reg})
	if err != nil {
		return nil, err
	}
	node, err := partition.New(partition.Config{
		Client: d.etcd, Cluster: cfg.Cluster, NodeID: cfg.NodeID, Addr: cfg.HTTPAddr,
		Buckets: cfg.Buckets, TTL: cfg.LeaseTTL, Logger: d.log, Fencing: d.st, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	scfg := scanner.Config{
		Store: d.st, Dispatcher: disp, Clock: clk, NodeID: cfg.NodeID, Logger: d.log, LeaseValid: node.Valid,
		Missed: cfg.Missed, Registerer: d.reg,
		Cancel: func(ctx context.Context, id uuid.UUID) error { return wire.CancelExecution(ctx, d.js, id.String()) },
	}
	var backlog *dispatcher.BacklogWatch
	if cfg.FireBacklogFor >= 0 {
		if backlog, err = dispatcher.NewBacklogWatch(dispatcher.BacklogConfig{JS: d.js, Dispatcher: disp, Logger: d.log}); err != nil {
			return nil, err
		}
		scfg.Backlog, scfg.BacklogFor, scfg.MinBacklog = backlog, cfg.FireBacklogFor, cfg.FireBacklogMin
	}
	scan, err := scanner.New(scfg)
	if err != nil {
		return nil, err
	}
	wipe, err := maintenance.NewWipeRecovery(maintenance.WipeRecoveryConfig{
		JS: d.js, Store: d.st, Buckets: func() []int { return slices.Sorted(maps.Keys(node.Owned())) },
		Now: clk.Now, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	lost, err := maintenance.NewLostWorkRescuer(maintenance.LostWorkRescuerConfig{
		Store: d.st, Buckets: scan.Owned, Now: clk.Now, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	back, err := backfill.New(backfill.Config{
		Store: d.st, Dispatcher: disp, NodeID: cfg.NodeID, Owned: node.Owned, LeaseValid: node.Valid,
		Rate: cfg.BackfillRate, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	return &scheduler{disp: disp, node: node, scan: scan, wipe: wipe, lost: lost, back: back, backlog: backlog}, nil
}

func newExecutor(cfg Config, d deps) (runFunc, error) {
	w, err := executor.New(executor.Config{
		NATS: d.nc, ExecutorID: cfg.NodeID, Logger: d.log,
		Concurrency: cfg.ExecutorConcurrency, MaxPerHandler: cfg.ExecutorMaxPerHandler,
		AckWait: cfg.ExecutorAckWait, Breaker: cfg.Breaker,
		Registerer: d.reg, // served on /metrics
	})
	if err != nil {
		return nil, err
	}
	w.Handle(domain.HandlerHTTP, executor.HTTPHandlerWith(executor.HTTPOptions{Client: d.http.Client(), Secrets: keys(cfg.Secrets)}))
	w.Handle(domain.HandlerNATS, executor.NATSHandler(d.nc))
	return w.Run, nil
}

// runner runs components, each under its own context, so that they stop
// in order, whether or not the parent context has ended.
type runner struct {
	parent  context.Context
	log     *slog.Logger
	running []*running
	// failed receives the first errors of components that stopped by
	// themselves; more are dropped.
	failed chan error
}

// running is a started component.
type running struct {
	component
	cancel   context.CancelFunc
	finished chan struct{}
}

// start builds c and runs it in a goroutine of its own.
func (r *runner) start(c component) error {
	run, err := c.start()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.parent))
	rc := &running{component: c, cancel: cancel, finished: make(chan struct{})}
	r.running = append(r.running, rc)
	go func() {
		defer close(rc.finished)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			select {
			case r.failed <- fmt.Errorf("%s: %w", c.name, err):
			default:
			}
		}
	}()
	return nil
}

// stop stops the started components, stage by stage.
func (r *runner) stop() {
	for stage := range stopStages {
		var wg sync.WaitGroup
		for _, rc := range r.running {
			if rc.stage == stage {
				wg.Go(func() { r.stopOne(rc) })
			}
		}
		wg.Wait()
	}
}

// stopOne drains rc if it drains, cancels it and waits for it to finish.
func (r *runner) stopOne(rc *running) {
	if rc.drain != nil {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		_ = rc.drain(ctx) // what is left stays in the outbox
		cancel()
	}
	rc.cancel()
	select {
	case <-rc.finished:
	case <-time.After(15 * time.Second):
		r.log.Warn("role did not stop in time", "role", rc.name)
	}
}

// httpHandler serves the API on an api node, and only metrics and health
// checks on the others; with the profiler if cfg asks for it.
func httpHandler(cfg Config, d deps) (http.Handler, error) {
	var handler http.Handler
	if cfg.Roles[RoleAPI] {
		srv, err := api.New(api.Config{Store: d.st, Logger: d.log, Cluster: partition.NewObserver(d.etcd, cfg.Cluster),
			Executors: api.JetStreamExecutors{JS: d.js}, DefaultRetry: cfg.Retry,
			DefaultMissed: cfg.Missed, DefaultOverlap: cfg.Overlap, Retention: cfg.Retention, HTTPPolicy: d.http,
			AllowedHosts: cfg.AllowedHosts, CORSOrigins: cfg.CORSOrigins, Open: cfg.AuthNone,
			Limits: cfg.Limits, Secrets: keys(cfg.Secrets), JWT: d.jwt})
		if err != nil {
			return nil, err
		}
		handler = srv.Handler()
	} else {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		handler = mux
	}
	// The profiler has no authentication: with keys required it is served
	// only on --metrics-addr.
	if cfg.Pprof && (cfg.AuthNone || !cfg.Roles[RoleAPI]) {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		handler = mux
	}
	return handler, nil
}

// maintenancePass is the cluster-wide maintenance services (package
// maintenance) in one pass under the cluster's maintenance lock: the
// daily partitions of the next 7 days, expired idempotency keys, the
// audit trail's days, and retention, archiving each day before it is
// dropped when cfg.ArchiveDir is set. With wait false, a node that finds
// another one running a pass skips its own. Metrics go to reg (nil: none).
func maintenancePass(st *store.Store, log *slog.Logger, cfg Config, reg prometheus.Registerer, wait bool) (*maintenance.Pass, error) {
	parts, err := maintenance.NewPartitionsAhead(maintenance.PartitionsAheadConfig{Store: st, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	keys, err := maintenance.NewIdempotencyPruner(maintenance.IdempotencyPrunerConfig{Store: st, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	audit, err := maintenance.NewAuditPruner(maintenance.AuditPrunerConfig{Store: st, Retention: cfg.AuditRetention,
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	var arch *maintenance.Archiver
	if cfg.ArchiveDir != "" {
		if arch, err = maintenance.NewArchiver(maintenance.ArchiverConfig{DB: st.Pool(), Dir: cfg.ArchiveDir,
			Logger: log, Registerer: reg}); err != nil {
			return nil, err
		}
	}
	ret, err := maintenance.NewRetention(maintenance.RetentionConfig{Store: st, Default: cfg.Retention,
		CompletedJobs: cfg.CompletedJobRetention, Archiver: arch, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	return maintenance.NewPass(maintenance.PassConfig{Lock: st, Services: []maintenance.Service{parts, keys, audit, ret},
		Wait: wait, Logger: log})
}

// maintain runs a maintenance pass (maintenancePass) now and every 5
// minutes until ctx ends (tockd maintain).
func maintain(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config) error {
	p, err := maintenancePass(st, log, cfg, nil, false)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// maintainOnce runs one maintenance pass (tockd maintain --once); with
// wait, it waits for another node's pass to end rather than skip.
func maintainOnce(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config, wait bool) error {
	p, err := maintenancePass(st, log, cfg, nil, wait)
	if err != nil {
		return err
	}
	return p.RunOnce(ctx)
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

// checkAuth refuses to start an api node that requires keys while none
// exists (nobody could call it, and the fix would be to turn keys off),
// and warns at every start of one that does not require them.
func checkAuth(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger) error {
	if !cfg.Roles[RoleAPI] {
		return nil
	}
	if cfg.AuthNone {
		log.Warn("the API is open: no authentication (tockd dev, or --auth none); anyone who reaches " + cfg.HTTPAddr + " may create, run and delete any job")
		return nil
	}
	if cfg.Pprof && cfg.MetricsAddr == "" {
		return errors.New("--pprof: the profiler has no authentication; with API keys required it is served only on --metrics-addr")
	}
	if cfg.JWT.URL != "" {
		return nil // tokens of the identity provider can call it
	}
	n, err := st.UsableAPIKeys(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return errNoKeys
	}
	return nil
}

// JWTSettings are where JWT bearer tokens' keys come from and what the
// tokens must say (tockd --jwks-url, --jwt-issuer, --jwt-audience,
// --jwt-roles-claim).
type JWTSettings struct {
	URL, Issuer, Audience, RolesClaim string
}

// jwtConfig fetches the JWK Set (and keeps it fresh, until ctx ends):
// the API's JWT verification, or nil when no URL is set. A JWK Set that
// cannot be fetched at start is an error: the node would refuse every
// token.
func jwtConfig(ctx context.Context, s JWTSettings) (*api.JWTConfig, error) {
	if s.URL == "" {
		return nil, nil
	}
	no := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{s.URL}, keyfunc.Override{NoErrorReturnFirstHTTPReq: &no, HTTPTimeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("--jwks-url %s: %w", s.URL, err)
	}
	return &api.JWTConfig{Keyfunc: kf.Keyfunc, Issuer: s.Issuer, Audience: s.Audience, RolesClaim: s.RolesClaim}, nil
}

// metricsServer serves /metrics, and the profiler when cfg asks for it,
// on cfg.MetricsAddr without authentication; its end is sent to done.
func metricsServer(cfg Config, done chan<- error) (*http.Server, error) {
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr %s: %w", cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			done <- fmt.Errorf("--metrics-addr: %w", err)
		}
	}()
	return srv, nil
}
