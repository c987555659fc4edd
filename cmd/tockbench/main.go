// Command tockbench measures a running tock cluster: it creates many jobs
// in one namespace of its own, runs no-op custom executors for them in
// this process, and reports from Postgres how many fired per second, how
// late they were dispatched and started, and whether every scheduled time
// fired exactly once. docs/bench.md says how to run it and what the
// numbers mean.
//
//	make dev                      # in one terminal
//	source .dev/env
//	go run ./cmd/tockbench --jobs 100000 --mix spread-minute --duration 2m
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
	// Schedules are computed here as the scheduler computes them.
	_ "time/tzdata"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/internal/otlpsink"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/telemetry/tracing"
)

// Mixes of jobs.
const (
	mixSpreadMinute = "spread-minute"
	mixSpreadHour   = "spread-hour"
	mixEverySecond  = "every-second"
	mixSameSecond   = "same-second"
	// mixSpreadOnce: one-shot jobs spread over the window's seconds,
	// each due once: a load that lasts the window and then stops.
	mixSpreadOnce = "spread-once"
	// mixCreate measures creating jobs through the REST API; nothing
	// fires.
	mixCreate = "create"
)

// createBatch is how many jobs one CopyJobs call stores.
const createBatch = 10_000

// burstDelay is how long after the jobs are created a same-second burst
// is due: time for every scanner to load them.
const burstDelay = 20 * time.Second

// cli is tockbench's command line.
type cli struct {
	PostgresURL string        `name:"postgres-url" env:"TOCK_POSTGRES_URL" default:"postgres://postgres@127.0.0.1:5432/tock?sslmode=disable" help:"PostgreSQL URL of the cluster under test."`
	NATSURL     string        `name:"nats-url" env:"TOCK_NATS_URL" default:"nats://127.0.0.1:4222" help:"NATS URL of the cluster under test (JetStream enabled)."`
	Jobs        int           `default:"10000" help:"Number of jobs to create."`
	Mix         string        `default:"spread-minute" enum:"spread-minute,spread-hour,every-second,same-second,spread-once,create,history,log-flood,read" help:"read: time the API's reads (--server): each --read-query alone (first page, a deep page by cursor, its count), or with --read-load all of them at once from --clients clients for --duration, counting refusals; nothing is created (docs/bench.md, issue 44); log-flood: one execution writes its log (4 KiB lines) as fast as it can, or at --log-rate, for --duration, and the report says how fast it was stored and what it cost per MiB (tockd needs --log-max-cap 2147483648); spread-minute: each job fires once a minute, second offsets spread evenly (jobs/60 fires per second); spread-once: one-shot jobs spread evenly over the window's whole seconds, each due once (jobs/duration fires per second during the window, none after: an overload that ends, and how long its backlog takes to drain); spread-hour: each job fires once an hour, offsets spread evenly over its 3,600 seconds (jobs/3600 fires per second); every-second: each job fires every second; same-second: one-shot jobs all due at one instant ${burst_delay} after creation; create: create the jobs through the REST API (--server, --clients, --batch) and report the rate, nothing fires; history: load days of execution history (--history-*), time the search and statistics API over it, and drop its oldest day while --history-fire-jobs every-second jobs fire (docs/bench.md)."`
	Duration    time.Duration `default:"60s" help:"Length of the measured window (not for same-second)."`
	Warmup      time.Duration `default:"10s" help:"Time between the end of job creation and the start of the measured window (not for same-second)."`
	Settle      time.Duration `default:"2m" help:"After the window (or the burst's instant), how long to wait at most for its executions to fire and be recorded."`
	Handler     string        `help:"Custom handler name the jobs use (default tockbench-<random>)."`
	Executors   int           `default:"2" help:"In-process no-op executors (Concurrency 256 each); 0 to use executors of your own."`
	NotifyJobs  int           `name:"notify-jobs" help:"Label this many of the jobs and put them under a notification rule asking for every job and execution event (late and slow with thresholds of an hour), to a webhook channel, so that the run measures what rules cost the hot path (docs/bench.md). Deleted with the jobs."`
	LogRate     float64       `name:"log-rate" help:"--mix log-flood: MiB/s the handler writes (0: as fast as it can)."`
	Dependents  int           `help:"--mix spread-minute: also create this many dependent jobs (namespace <namespace>-deps), dependent i waiting for job i's run at the same time; the report adds their exactly-once check and release lag (docs/bench.md, issue 39)."`
	LogBytes    int           `name:"log-bytes" help:"The in-process executors' handler writes this many bytes to each attempt's log (lines of 100 bytes), to measure what execution logs cost (docs/bench.md)."`
	Keep        bool          `help:"Keep the jobs (still firing), their executions and the handler's consumer when done."`
	StoredJobs  int           `name:"stored-jobs" help:"Jobs stored beside the measured ones, created first: active, each a one-shot due a year ahead, so that the run fires and scans in tables of that size (the issue-20 ceiling is measured with 1,000,000 stored jobs in all). Deleted with the rest unless --keep."`
	NoAnalyze   bool          `name:"no-analyze" help:"Do not ANALYZE the jobs tables after creating the jobs, nor (when the server's autovacuum is off) the executions tables every ${analyze_every} during the run, nor VACUUM the jobs tables after --mix create."`
	Server      string        `env:"TOCK_SERVER" default:"http://127.0.0.1:8080" help:"URL of the cluster's REST API (--mix create, --mix read)."`
	Clients     int           `default:"16" help:"Concurrent API clients (--mix create, --mix read --read-load)."`
	Batch       int           `default:"1" help:"Jobs per request (--mix create): 1 sends each with POST /v1/jobs, more (up to ${max_batch}) use POST /v1/jobs:batch."`
	Output      string        `short:"o" default:"text" enum:"text,json" help:"Report format: ${enum}."`
	LogLevel    string        `name:"log-level" default:"warn" enum:"debug,info,warn,error" help:"Log level of the in-process executors."`
	CPUProfile  string        `name:"cpuprofile" type:"path" help:"Write a Go CPU profile of tockbench itself (its in-process executors) to this file."`
	TraceRatio  float64       `name:"trace-sample-ratio" default:"1" help:"With the OTEL_* variables set (as for tockd: OTEL_EXPORTER_OTLP_ENDPOINT...), the in-process executors trace their attempts, as a custom executor on the Go SDK does, sampling this share of executions (by trace id, as tockd decides)."`
	OTLPSink    string        `name:"otlp-sink" placeholder:"HOST:PORT" help:"Run nothing but an OTLP trace receiver (gRPC) on this address until interrupted, counting the spans it gets: the collector of a traced run, in a process of its own so that its CPU is not counted as tock's (docs/bench.md)."`

	ceilingFlags `embed:""`
	historyFlags `embed:""`
	readFlags    `embed:""`
}

func main() {
	var c cli
	kong.Parse(&c,
		kong.Name("tockbench"),
		kong.Description("Benchmark a running tock cluster: fires per second, fire and start lag, exactly-once checks."),
		kong.Vars{"burst_delay": burstDelay.String(), "analyze_every": analyzeEvery.String(),
			"max_batch": strconv.Itoa(api.MaxBatchJobs)},
		kong.UsageOnError(),
	)
	os.Exit(c.main())
}

// main runs the command and returns its exit code.
func (c *cli) main() int {
	if c.CPUProfile != "" {
		stopProfile, err := startCPUProfile(c.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tockbench:", err)
			return 1
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.OTLPSink != "" {
		return runSink(ctx, c.OTLPSink)
	}
	t, err := tracing.FromEnv(ctx, tracing.Config{Ratio: c.TraceRatio, ServiceName: "tockbench-executor"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	if t != nil {
		// The executors' default, as in any custom executor.
		otel.SetTracerProvider(t.Provider())
		defer func() { _ = t.Shutdown(context.Background()) }()
	}
	if c.FindCeiling {
		return c.mainCeiling()
	}
	if c.Mix == mixHistory {
		return c.mainHistory(ctx)
	}
	if c.Mix == mixLogFlood {
		return c.mainLogFlood(ctx)
	}
	if c.Mix == mixRead {
		return c.mainRead(ctx)
	}
	if c.Mix == mixCreate {
		rep, err := c.runCreate(ctx)
		if err == nil {
			err = rep.write(os.Stdout, c.Output)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "tockbench:", err)
			return 1
		}
		if !rep.ok() {
			return 1
		}
		return 0
	}
	rep, err := c.run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	if err := rep.write(os.Stdout, c.Output); err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	if rep.ZeroFired > 0 || rep.MultiFired > 0 {
		return 1
	}
	return 0
}

func (c *cli) validate() error {
	switch {
	case c.Jobs <= 0:
		return fmt.Errorf("--jobs %d: want at least 1", c.Jobs)
	case c.Duration <= 0 && c.Mix != mixSameSecond:
		return fmt.Errorf("--duration %s: want a positive duration", c.Duration)
	case c.Mix == mixSpreadOnce && (c.Duration < time.Second || c.Duration%time.Second != 0):
		return fmt.Errorf("--duration %s: --mix %s wants whole seconds", c.Duration, mixSpreadOnce)
	case c.Warmup < 0:
		return fmt.Errorf("--warmup %s: want 0 or more", c.Warmup)
	case c.Settle <= 0:
		return fmt.Errorf("--settle %s: want a positive duration", c.Settle)
	case c.Executors < 0:
		return fmt.Errorf("--executors %d: want 0 or more", c.Executors)
	case c.Clients < 1:
		return fmt.Errorf("--clients %d: want at least 1", c.Clients)
	case c.Batch < 1 || c.Batch > api.MaxBatchJobs:
		return fmt.Errorf("--batch %d: want 1 to %d", c.Batch, api.MaxBatchJobs)
	case c.Batch > 1 && c.Mix != mixCreate:
		return fmt.Errorf("--batch is for --mix %s", mixCreate)
	case c.Dependents < 0 || c.Dependents > c.Jobs:
		return fmt.Errorf("--dependents %d: want 0 to --jobs (%d)", c.Dependents, c.Jobs)
	case c.Dependents > 0 && c.Mix != mixSpreadMinute:
		return fmt.Errorf("--dependents is for --mix %s", mixSpreadMinute)
	}
	return nil
}

// newBench is a run's state before it connects: its own namespace and
// handler, and a logger.
func (c *cli) newBench() *bench {
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	b := &bench{cli: *c, suffix: hex.EncodeToString(rb[:])}
	b.ns = "bench-" + b.suffix
	if b.Handler == "" {
		b.Handler = "tockbench-" + b.suffix
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	b.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return b
}

// runCreate is a --mix create run: it needs the API and Postgres only.
func (c *cli) runCreate(ctx context.Context) (*CreateReport, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	b := c.newBench()
	if err := b.openStore(ctx); err != nil {
		return nil, err
	}
	defer b.st.Close()
	return b.runCreate(ctx)
}

// bench is one run's state.
type bench struct {
	cli
	log     *slog.Logger
	st      *store.Store
	nc      *nats.Conn
	js      jetstream.JetStream
	buckets int
	ns      string
	suffix  string
	// offset is the database clock minus this process's clock: times are
	// judged by the database's clock, as the scheduler does.
	offset time.Duration
	tr     *tracker
	rep    *Report
	// noAutovacuum: the server's autovacuum is off, so nothing keeps the
	// planner's statistics current unless the bench does.
	noAutovacuum bool
	// duringWindow, if set, runs while a recurring mix's window is
	// measured; the window's report waits for it.
	duringWindow func(ctx context.Context, from, to time.Time) error
}

// dbNow is the database's clock, from the local one.
func (b *bench) dbNow() time.Time { return time.Now().Add(b.offset).UTC() }

// sleepUntil waits until the database clock reaches t or ctx ends.
func (b *bench) sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t.Add(-b.offset)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tockbench: "+format+"\n", args...)
}

func (c *cli) run(ctx context.Context) (*Report, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	b := c.newBench()
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.close()
	return b.runRecurring(ctx)
}

// runRecurring runs a connected bench: its executors, its jobs, the
// window or the burst, and the report.
func (b *bench) runRecurring(ctx context.Context) (*Report, error) {
	b.rep = &Report{Mix: b.Mix, Jobs: b.Jobs, StoredJobs: b.StoredJobs, Buckets: b.buckets, Namespace: b.ns, Handler: b.Handler, Executors: b.Executors}
	b.say("%s, %d jobs, namespace %s, handler %s, cluster of %d buckets", b.Mix, b.Jobs, b.ns, b.Handler, b.buckets)

	// Executors start first, so nothing fired while the jobs are being
	// created waits in JetStream for them.
	b.tr = newTracker(b.offset, b.LogBytes)
	execCtx, stopExecutors := context.WithCancel(context.WithoutCancel(ctx))
	executorsDone, err := startExecutors(execCtx, b.NATSURL, b.Handler, b.suffix, b.Executors, b.tr, b.log)
	if err != nil {
		stopExecutors()
		return nil, err
	}
	defer func() {
		// Whatever happened, clean up, with a context of its own: ctx may
		// have ended with an interrupt.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.cleanup(cctx, stopExecutors, executorsDone)
	}()

	if err := b.createStored(ctx); err != nil {
		return nil, err
	}
	if err := b.createJobs(ctx); err != nil {
		return nil, err
	}
	if err := b.createDependents(ctx); err != nil {
		return nil, err
	}
	if err := b.createRule(ctx); err != nil {
		return nil, err
	}
	actx, stopAnalyze := context.WithCancel(ctx)
	analyzed := make(chan struct{})
	go func() { defer close(analyzed); b.analyzeLoop(actx) }()
	defer func() { stopAnalyze(); <-analyzed }()
	if b.Mix == mixSameSecond {
		err = b.runBurst(ctx)
	} else {
		err = b.runWindow(ctx)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, errors.New("interrupted")
		}
		return nil, err
	}
	b.rep.Redeliveries, b.rep.RepeatDeliveries = b.tr.redeliveries()
	return b.rep, nil
}

// close closes the store and NATS.
func (b *bench) close() {
	b.nc.Close()
	b.st.Close()
}

// connect opens the store and NATS and measures the clock offset; on
// failure it closes what it opened.
func (b *bench) connect(ctx context.Context) error {
	err := b.open(ctx)
	if err != nil && b.st != nil {
		b.st.Close()
		b.st = nil
	}
	return err
}

// open is connect's work.
func (b *bench) open(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := store.Open(cctx, b.PostgresURL)
	if err != nil {
		return err
	}
	var n int
	if err := st.Pool().QueryRow(cctx, "SELECT buckets FROM cluster").Scan(&n); err != nil {
		st.Close()
		return fmt.Errorf("no tock cluster in the database at --postgres-url (is tockd running against it?): %w", err)
	}
	if b.buckets, err = st.Init(cctx, n); err != nil {
		st.Close()
		return err
	}
	b.st = st
	var autovacuum string
	if err := st.Pool().QueryRow(cctx, "SHOW autovacuum").Scan(&autovacuum); err == nil && autovacuum != "on" {
		b.noAutovacuum = true
		b.say("warning: autovacuum is off on this server: dead rows pile up from one run to the next" +
			" (run VACUUM ANALYZE between runs)")
	}

	// Measured once, as the scheduler measures it (best of five round
	// trips); a bench run is short.
	clk := clock.New(st.Now, clock.Options{})
	if err := clk.Sync(cctx); err != nil {
		return err
	}
	b.offset = clk.Offset()

	nc, err := nats.Connect(b.NATSURL, nats.Name("tockbench "+b.suffix))
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", b.NATSURL, err)
	}
	if b.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return fmt.Errorf("jetstream: %w", err)
	}
	if _, err := b.js.AccountInfo(cctx); err != nil {
		nc.Close()
		return fmt.Errorf("JetStream at %s: %w", b.NATSURL, err)
	}
	b.nc = nc
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned func is
// called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runSink receives OTLP traces on addr until ctx ends, printing how many
// spans a second arrive every 10 seconds.
func runSink(ctx context.Context, addr string) int {
	sink, err := otlpsink.StartOn(addr, "127.0.0.1:0", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	defer sink.Close()
	fmt.Printf("OTLP receiver on %s (gRPC), %s (HTTP)\n", sink.GRPCAddr, sink.HTTPAddr)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			fmt.Printf("%d spans received\n", sink.Count())
			return 0
		case <-tick.C:
			n := sink.Count()
			fmt.Printf("%s %d spans/s (%d in all)\n", time.Now().Format(time.TimeOnly), (n-last)/10, n)
			last = n
		}
	}
}
