package node

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/ui"
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

// httpHandler serves the API on an api node, and only metrics and health
// checks on the others; with the profiler if cfg asks for it.
func httpHandler(cfg Config, d deps) (http.Handler, error) {
	var handler http.Handler
	if cfg.Roles.Has(RoleAPI) {
		notifier, err := newNotifier(cfg, d)
		if err != nil {
			return nil, err
		}
		srv, err := api.New(api.Config{Store: d.apiSt, Logger: d.log, Cluster: partition.NewObserver(d.etcd, cfg.Cluster),
			Executors: api.JetStreamExecutors{JS: d.js}, Changes: d.changes, DefaultRetry: cfg.Retry, MaxLogCap: cfg.LogMaxCap,
			DefaultMissed: cfg.Missed, DefaultOverlap: cfg.Overlap, Retention: cfg.Retention, HTTPPolicy: d.http,
			AllowedHosts: cfg.AllowedHosts, CORSOrigins: cfg.CORSOrigins, Open: cfg.AuthNone,
			Limits: cfg.Limits, Secrets: keys(cfg.Secrets), JWT: d.jwt, Notifier: notifier, Tracer: d.tracer})
		if err != nil {
			return nil, err
		}
		handler = srv.Handler()
		if !cfg.NoUI {
			handler = withUI(handler)
		}
	} else {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("/readyz", d.pg.readyz)
		handler = mux
	}
	// The profiler has no authentication: with keys required it is served
	// only on --metrics-addr.
	if cfg.Pprof && (cfg.AuthNone || !cfg.Roles.Has(RoleAPI)) {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mountPprof(mux)
		handler = mux
	}
	return handler, nil
}

// withUI serves the web dashboard at /ui/ beside the API, and sends a
// browser that asks for / to it.
func withUI(apiHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ui.Path, ui.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler(ui.Path, http.StatusFound))
	mux.Handle("/", apiHandler)
	return mux
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
		mountPprof(mux)
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

// mountPprof serves Go's profiler under /debug/pprof/ on mux: on the
// HTTP address, where nobody needs a key, and on --metrics-addr.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
}
