package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/executor/wire"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/recorder"
	"github.com/tock-sched/tock/scanner"
	"github.com/tock-sched/tock/store"
)

// Roles.
const (
	RoleAPI       = "api"
	RoleScheduler = "scheduler"
	RoleExecutor  = "executor"
	RoleRecorder  = "recorder"
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
	Retry wire.RetryPolicy
	// Executor role: attempts in flight per queue and per handler, the
	// ack wait of the queues' consumers, and the per-handler breakers.
	ExecutorConcurrency   int
	ExecutorMaxPerHandler int
	ExecutorAckWait       time.Duration
	Breaker               executor.BreakerConfig
	// Listener, if set, is used instead of listening on HTTPAddr.
	Listener net.Listener
	// Ready, if set, is closed once every role has started.
	Ready chan<- struct{}
}

// Serve runs the configured roles until ctx ends, then shuts down in
// order: the scheduler hands its buckets back first (its scanner stops
// firing before each owner key is deleted), then the dispatcher gets a
// moment to publish what was fired, then executors finish their attempts.
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

	var st *store.Store
	needDB := cfg.Roles[RoleAPI] || cfg.Roles[RoleScheduler] || cfg.Roles[RoleRecorder]
	if needDB {
		var err error
		if st, err = store.Open(startCtx, cfg.PostgresURL); err != nil {
			return err
		}
		defer st.Close()
		if cfg.Migrate {
			if err := st.Migrate(startCtx); err != nil {
				return err
			}
		}
		n, err := st.Init(startCtx, cfg.Buckets)
		if err != nil {
			return err
		}
		if n != cfg.Buckets {
			log.Info("cluster bucket count is fixed at creation; using the stored value", "buckets", n)
		}
		cfg.Buckets = n
	}

	// Every role uses NATS; the API tells executors of cancellations and
	// reads their handler states.
	nc, err := nats.Connect(cfg.NATSURL,
		nats.Name("tockd "+cfg.NodeID),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true),
	)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	// An API-only node leaves the streams to the other roles, so it starts
	// (and serves jobs) while NATS is down.
	if cfg.Roles[RoleScheduler] || cfg.Roles[RoleExecutor] || cfg.Roles[RoleRecorder] {
		if err := wire.EnsureStreams(startCtx, js); err != nil {
			return fmt.Errorf("create streams on %s: %w", cfg.NATSURL, err)
		}
	}

	// Each role runs under its own context so shutdown can go in order.
	type role struct {
		name     string
		cancel   context.CancelFunc
		finished chan struct{}
	}
	var roles []*role
	failed := make(chan error, 8)
	start := func(name string, run func(ctx context.Context) error) {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &role{name: name, cancel: cancel, finished: make(chan struct{})}
		roles = append(roles, r)
		go func() {
			defer close(r.finished)
			if err := run(rctx); err != nil && rctx.Err() == nil {
				select {
				case failed <- fmt.Errorf("%s: %w", name, err):
				default:
				}
			}
		}()
	}

	// The scheduler keeps its membership and buckets in etcd; the API
	// reads them there for /v1/nodes and /v1/partitions. The client dials
	// lazily, so an API node starts (and serves jobs) with etcd down.
	var etcd *clientv3.Client
	if cfg.Roles[RoleAPI] || cfg.Roles[RoleScheduler] {
		var err error
		etcd, err = clientv3.New(clientv3.Config{
			Endpoints:   cfg.EtcdEndpoints,
			DialTimeout: 5 * time.Second,
			Logger:      etcdLogger(),
		})
		if err != nil {
			return fmt.Errorf("etcd client: %w", err)
		}
		defer etcd.Close()
	}

	var node *partition.Node
	if cfg.Roles[RoleScheduler] {
		disp, err := dispatcher.New(dispatcher.Config{JS: js, Store: st, Logger: log})
		if err != nil {
			return err
		}
		node, err = partition.New(partition.Config{
			Client: etcd, Cluster: cfg.Cluster, NodeID: cfg.NodeID, Addr: cfg.HTTPAddr,
			Buckets: cfg.Buckets, TTL: cfg.LeaseTTL, Logger: log, Fencing: st,
		})
		if err != nil {
			return err
		}
		scan, err := scanner.New(scanner.Config{
			Store: st, Dispatcher: disp, NodeID: cfg.NodeID, Logger: log, LeaseValid: node.Valid,
		})
		if err != nil {
			return err
		}
		disp.SetClock(scan.Passed)
		wipe, err := dispatcher.NewWipeRecovery(dispatcher.WipeConfig{
			JS: js, Store: st, Buckets: func() []int { return slices.Sorted(maps.Keys(node.Owned())) },
			Now: scan.Now, Logger: log,
		})
		if err != nil {
			return err
		}
		start("dispatcher", disp.Run)
		start("wipe-recovery", wipe.Run)
		start("scanner", scan.Run)
		start("partition", func(ctx context.Context) error { return node.Run(ctx, scan) })
		start("maintenance", func(ctx context.Context) error { return maintain(ctx, st, log) })
	}
	if cfg.Roles[RoleRecorder] {
		rec := recorder.New(js, st, log)
		start("recorder", rec.Run)
	}
	if cfg.Roles[RoleExecutor] {
		w, err := executor.New(executor.Config{
			NATS: nc, ExecutorID: cfg.NodeID, Logger: log,
			Concurrency: cfg.ExecutorConcurrency, MaxPerHandler: cfg.ExecutorMaxPerHandler,
			AckWait: cfg.ExecutorAckWait, Breaker: cfg.Breaker,
		})
		if err != nil {
			return err
		}
		w.Handle(wire.HandlerHTTP, executor.HTTPHandler(&http.Client{}))
		w.Handle(wire.HandlerNATS, executor.NATSHandler(nc))
		start("executor", w.Run)
	}

	var handler http.Handler
	if cfg.Roles[RoleAPI] {
		srv, err := api.New(api.Config{Store: st, Logger: log, Cluster: partition.NewObserver(etcd, cfg.Cluster),
			Executors: api.JetStreamExecutors{JS: js}, DefaultRetry: cfg.Retry})
		if err != nil {
			return err
		}
		handler = srv.Handler()
	} else {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		handler = mux
	}
	if cfg.Pprof {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		handler = mux
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	httpSrv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- httpSrv.Serve(ln) }()
	log.Info("tockd started", "http", ln.Addr().String(), "roles", cfg.Roles, "buckets", cfg.Buckets)
	if cfg.Ready != nil {
		close(cfg.Ready)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-failed:
		log.Error("role failed; shutting down", "err", runErr)
	case err := <-httpDone:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("http server: %w", err)
		}
	}

	// Shutdown, in order. The partition node releases each bucket only
	// after the scanner has stopped firing in it.
	log.Info("tockd shutting down")
	stopRole := func(names ...string) {
		var wg sync.WaitGroup
		for _, r := range roles {
			for _, n := range names {
				if r.name == n {
					wg.Add(1)
					go func(r *role) {
						defer wg.Done()
						r.cancel()
						select {
						case <-r.finished:
						case <-time.After(15 * time.Second):
							log.Warn("role did not stop in time", "role", r.name)
						}
					}(r)
				}
			}
		}
		wg.Wait()
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = httpSrv.Shutdown(sctx)
	scancel()
	stopRole("partition", "maintenance", "wipe-recovery")
	stopRole("scanner")
	if node != nil {
		// Let the dispatcher publish what the scanner fired last; anything
		// left is in the outbox and the bucket's next owner publishes it.
		time.Sleep(300 * time.Millisecond)
	}
	stopRole("dispatcher")
	stopRole("executor")
	stopRole("recorder")
	log.Info("tockd stopped")
	return runErr
}

// maintain creates the executions table's daily partitions ahead of time.
func maintain(ctx context.Context, st *store.Store, log *slog.Logger) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		now, err := st.Now(ctx)
		if err == nil {
			err = st.MaintainPartitions(ctx, now, 7)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("partition maintenance", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
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
