// Package executor runs tock executions: it pulls them from the
// JetStream consumers of a handler's queue, runs a Go function for each
// attempt and reports the attempt's events to tock. tockd's executor role
// uses it for the built-in http and nats handlers; a custom executor is any
// Go program that calls Handle and Run (see examples/custom-executor).
//
// Delivery is at-least-once. Each attempt publishes its events (started,
// heartbeats, then succeeded, failed or cancelled) and only then acks its
// message, so an executor that dies between the two, or whose heartbeats
// stop, has the execution redelivered to another executor as the next
// attempt. A handler must therefore be idempotent; the execution id, the
// same on every attempt, is the key to make it so.
//
// A failed attempt does not wait for its retry here: its failed event says
// how long to wait (the retry policy's backoff, or what the handler asked
// for with RetryAfter) and tock publishes the execution again when that
// time has passed. Likewise a delivery refused by its handler's circuit
// breaker or concurrency limit is deferred: handed back to tock unrun.
//
// The handler's context is how timeouts, cancellation and shutdown reach
// user code. It ends at the job's timeout (context.DeadlineExceeded), when
// the execution is cancelled through tock (context.Cause(ctx) is
// ErrCancelled), and when the Worker stops waiting for running attempts at
// shutdown. A handler should watch ctx and return promptly when it ends.
package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// Defaults for Config.
const (
	DefaultConcurrency       = 16
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultStartReportDelay  = 200 * time.Millisecond
	DefaultHeartbeatInterval = wire.DefaultAckWait / 3
)

// Config configures a Worker. Only NATS is required.
type Config struct {
	// NATS is the connection to the NATS cluster with JetStream. The
	// caller owns it: Run neither drains nor closes it.
	NATS *nats.Conn
	// ExecutorID names this process in events, logs and handler states.
	// Default: hostname-pid-random.
	ExecutorID string
	// Version names this executor's software and version in its handler
	// states (the dashboard's Handlers page). Default: "tock-go " and the
	// tock module's version it was built with.
	Version string
	// Concurrency is the most attempts in flight per queue in this
	// process (a custom handler's queue is its own; the built-in http
	// handler serves all its hosts from one). HandleWith overrides it for
	// one queue. Default DefaultConcurrency.
	Concurrency int
	// MaxPerKey is the most attempts in flight per handler key
	// (domain.Handler.Key: one HTTP host, one NATS subject) in this
	// process; 0 means no limit beyond Concurrency. A delivery whose key
	// is at its limit does not wait for a slot: it is deferred, handed
	// back to tock to be published again a second later.
	MaxPerKey int
	// ShutdownTimeout is the shutdown grace: how long Run lets running
	// attempts finish after its context ends (it pulls nothing new
	// meanwhile) before it cancels their contexts. An attempt whose
	// handler then returns is interrupted, not failed: its failed event
	// says "interrupted by executor shutdown", its message is acked, and
	// tock publishes the execution again at once, for another executor,
	// whatever its attempts so far. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// StartReportDelay: an attempt still running after this long is
	// reported by a started event; a quicker one is reported by its
	// finished event alone, which carries its start time. That halves the
	// events (and the recorder's writes) of short attempts, at the price of
	// an execution showing queued, not running, for that long. Default
	// DefaultStartReportDelay; negative reports every start at once. The
	// Worker's one watcher goroutine does this timed work (and heartbeats
	// and in-progress acks) for every running attempt, on a tick of 25 ms
	// or a quarter of the shortest interval, so it happens up to a tick
	// late: no timer per attempt.
	StartReportDelay time.Duration
	// HeartbeatInterval is how often a running attempt whose start was
	// reported publishes a heartbeat event, so that tock can show it is
	// alive. (JetStream's in-progress acks, which keep the message from
	// being redelivered, go at a third of the consumer's ack wait
	// regardless.) Default DefaultHeartbeatInterval; negative sends none,
	// which is only safe for attempts shorter than the scheduler's
	// maintenance.DefaultLostAfter (5 minutes): a running execution
	// silent for that long is re-queued.
	HeartbeatInterval time.Duration
	// AckWait is the ack wait of the queues' consumers: how long an
	// attempt whose executor went silent (no in-progress ack) is kept
	// before JetStream hands it to another executor as the next attempt.
	// Consumers are shared, so every executor of a queue should use the
	// same value. Default wire.DefaultAckWait.
	AckWait time.Duration
	// Breaker configures the circuit breaker kept per handler key.
	Breaker BreakerConfig
	// OneExecutionPerMessage asks tock for one execution per JetStream
	// message on this Worker's queues, instead of batch messages (several
	// executions fired for the same instant in one message, each run as
	// if it came alone; see docs/wire-protocol.md). Batch messages cost
	// JetStream, tock and the executor a fraction per execution. The
	// queue's consumers say which form its executors take, so every
	// executor of a queue should choose the same.
	OneExecutionPerMessage bool
	// TracerProvider makes each delivery's telemetry.SpanAttempt span, a
	// child of the span in the message's traceparent header (tock's
	// publish), and the built-in handlers' telemetry.SpanHandler spans; a
	// custom handler's ctx holds the attempt's span, so its own spans are
	// its children. Default: otel.GetTracerProvider() (a no-op until the
	// program sets one).
	TracerProvider trace.TracerProvider
	// Logger defaults to slog.Default().
	// Registerer is where the Worker's Prometheus metrics
	// (tock_executor_*, tock_queue_depth, tock_breaker_state) are
	// registered; nil registers them nowhere. Importing the package
	// registers nothing. tockd passes prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// WithDefaults is c with the fields it leaves zero set to their
// defaults: a generated executor id, the Default constants, the
// breaker's defaults and the default logger. A zero AckWait stays zero
// (wire.EnsureConsumer applies wire.DefaultAckWait), and a zero
// MaxPerKey means no per-handler limit.
func (c Config) WithDefaults() Config {
	if c.Version == "" {
		c.Version = defaultVersion()
	}
	if c.ExecutorID == "" {
		c.ExecutorID = defaultExecutorID()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.StartReportDelay == 0 {
		c.StartReportDelay = DefaultStartReportDelay
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	c.Breaker = c.Breaker.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	return c
}

// validate rejects a configuration (with its defaults) that cannot work.
func (c *Config) validate() error {
	if c.NATS == nil {
		return errors.New("executor: Config.NATS is nil")
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("executor: Config.Concurrency %d is negative", c.Concurrency)
	}
	if c.MaxPerKey < 0 {
		return fmt.Errorf("executor: Config.MaxPerKey %d is negative", c.MaxPerKey)
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("executor: Config.ShutdownTimeout %s is negative", c.ShutdownTimeout)
	}
	if c.AckWait < 0 {
		return fmt.Errorf("executor: Config.AckWait %s is negative", c.AckWait)
	}
	return c.Breaker.validate()
}

func defaultExecutorID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Execution is one delivery of an execution to a handler.
type Execution struct {
	wire.Execution
	// Attempt is the 1-based attempt number, counted over the execution's
	// whole life: the attempts made before this message was published
	// (AttemptBase) plus JetStream's delivery count of it. A delivery that
	// never reached a handler (the executor died holding it) counts too.
	Attempt int
	// PublishedAt is when JetStream stored the message this delivery
	// came from: the moment tock's publish of it was acknowledged.
	PublishedAt time.Time
}

// Func handles one attempt of an execution. It returns the output to
// record (cut to domain.MaxOutputBytes), or an error: a retryable failure,
// one that asks for its retry at a given time (RetryAfter), or a Permanent
// one that ends the execution. ctx ends at the job's timeout, when the
// execution is cancelled (context.Cause(ctx) is ErrCancelled) and when the
// Worker gives up waiting for it at shutdown; Func should return promptly
// then. An output returned with an error is recorded too. A panic is
// recovered and counts as a retryable failure.
type Func func(ctx context.Context, e *Execution) (output string, err error)

// QueueOptions tunes how a Worker serves one queue (see Worker.HandleWith).
type QueueOptions struct {
	// Concurrency is the most attempts of the queue in flight in this
	// process; 0 means Config.Concurrency.
	Concurrency int
}

// HandlerOptions is the old name of QueueOptions.
//
// Deprecated: use QueueOptions; "handler" names a job's target, not a
// queue (see the glossary in docs/architecture.md).
type HandlerOptions = QueueOptions

// Worker pulls executions for its handlers' queues and runs them. It is
// one of: tockd's built-in executor (queues "http" and "nats") or a custom
// executor serving named handlers.
//
// Its parts, each in its own file: the handlers it serves (registry.go), a
// puller per queue (puller.go), the delivery of one message through its
// attempt (delivery.go, attempt.go, heartbeat.go), the handler keys'
// breakers and their states (breaker.go, breakers.go), the cancellation
// watch (cancel.go, cancelwatch.go), the event batcher (events.go) and the
// journal of recent attempts (journal.go, wipe.go).
type Worker struct {
	cfg    Config
	js     jetstream.JetStream
	log    *slog.Logger
	m      *metrics
	tracer trace.Tracer // nil: tracing off

	handlers    *registry
	breakers    *breakers
	cancels     *cancels
	cancelWatch *cancelWatcher
	events      *eventBatcher
	logs        *logBatcher
	watch       *watcher // heartbeats and delayed start reports
	journal     *journal // recent attempts' events, for a wipe of JetStream

	// Seams for tests.
	now          func() time.Time
	rand         func() float64 // in [0, 1), for backoff jitter
	consumerOpts wire.ConsumerOptions
	pollEvery    time.Duration // an idle queue's pull without a doorbell
	stateEvery   time.Duration // handler state writes
	depthEvery   time.Duration // queue depth polls

	// Set by Run before any attempt starts.
	attemptCtx context.Context // handlers' parent; cancelled at the end of the shutdown grace
	abandonCtx context.Context // heartbeats and event publishing; cancelled when Run returns
	inFlight   atomic.Int64
	// stopping: Run's context ended; what cannot be reported from now on
	// is handed back to JetStream at once (see unreported).
	stopping atomic.Bool
}

// New returns a Worker for cfg with defaults filled in. Register handlers
// with Handle, then call Run.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.NATS)
	if err != nil {
		return nil, fmt.Errorf("executor: jetstream: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("executor: register metrics: %w", err)
	}
	w := &Worker{
		cfg:          cfg,
		js:           js,
		m:            m,
		log:          newLazyLogger(cfg.Logger).With("executor", cfg.ExecutorID),
		handlers:     newRegistry(),
		now:          time.Now,
		rand:         mathrand.Float64,
		pollEvery:    idlePoll,
		stateEvery:   wire.BreakerStateEvery,
		depthEvery:   depthPoll,
		cancels:      newCancels(),
		events:       newEventBatcher(js),
		logs:         newLogBatcher(js),
		watch:        newWatcher(),
		journal:      newJournal(time.Now),
		consumerOpts: wire.ConsumerOptions{AckWait: cfg.AckWait, Batch: !cfg.OneExecutionPerMessage},
	}
	// A no-op provider (tockd's with tracing off) makes no span: the
	// delivery then skips the trace context altogether.
	if _, off := cfg.TracerProvider.(noop.TracerProvider); !off {
		w.tracer = cfg.TracerProvider.Tracer(telemetry.ScopeName)
	}
	// Both read w.cfg when they need it: tests change it before Run.
	w.breakers = newBreakers(&w.cfg, w.now, w.log, m.breakerState)
	w.cancelWatch = newCancelWatcher(js, w.cancels, w.now, w.log)
	return w, nil
}

// How often an idle queue is pulled without its doorbell ringing (for
// redeliveries, which ring none), and how often queue depths are read.
const (
	idlePoll  = 500 * time.Millisecond
	depthPoll = 5 * time.Second
)

// ID is the executor id this Worker reports in events.
func (w *Worker) ID() string { return w.cfg.ExecutorID }

// Handle registers fn for queue: a custom handler's name, or
// domain.HandlerHTTP / domain.HandlerNATS for the built-ins. Like
// http.ServeMux, it panics on an invalid or duplicate queue, a nil fn, or
// a call after Run started: those are programming errors.
func (w *Worker) Handle(queue string, fn Func) { w.HandleWith(queue, fn, QueueOptions{}) }

// HandleWith is Handle with options for the queue. It also panics on a
// negative opts.Concurrency.
func (w *Worker) HandleWith(queue string, fn Func, opts QueueOptions) {
	w.handlers.add(queue, fn, opts)
}

// BreakerStates returns this Worker's view of each handler key it served
// within wire.BreakerStateTTL: its breaker state and load, as it also
// writes them to wire.BreakerBucket.
func (w *Worker) BreakerStates() []wire.BreakerState { return w.breakers.states() }

// Run creates the streams, buckets and the consumers of the registered
// queues if needed, then runs executions until ctx ends. It then stops
// pulling, lets running attempts finish for up to Config.ShutdownTimeout,
// cancels the contexts of those still running (they are interrupted and
// handed back: see Config.ShutdownTimeout) and waits for them briefly.
// While NATS is unreachable at start it keeps trying. It returns nil
// after such a shutdown, or an error if no handler is registered or some
// attempts never returned (their messages are handed back to JetStream,
// unreported, for another executor at once). Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	queues, err := w.handlers.start(w.cfg.Concurrency)
	if err != nil {
		return err
	}
	var attempts sync.WaitGroup
	pullers := make([]*puller, 0, len(queues))
	for _, q := range queues {
		pullers = append(pullers, w.newPuller(q, &attempts))
	}
	if !w.setUp(ctx, pullers) {
		return nil // ctx ended first
	}

	attemptCtx, cancelAttempts := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAttempts()
	abandonCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	w.attemptCtx, w.abandonCtx = attemptCtx, abandonCtx

	cancelsReady, stopBackground := w.startBackground(ctx, pullers)
	defer stopBackground()
	w.awaitCancels(ctx, cancelsReady)

	w.log.Info("executor running", "queues", len(queues), "concurrency", w.cfg.Concurrency)
	var loops, pool sync.WaitGroup
	for _, q := range queues {
		w.runPool(q, &attempts, &pool)
	}
	for _, p := range pullers {
		loops.Go(func() { p.run(ctx) })
	}
	loops.Wait()
	w.stopping.Store(true)
	err = w.drain(&attempts, cancelAttempts)
	for _, q := range queues {
		close(q.work)
	}
	if err == nil {
		pool.Wait()
	}
	return err
}

// runPool starts q's attempt goroutines, one per slot, which handle the
// messages its puller sends on q.work until the channel is closed. A
// fixed pool, rather than a goroutine per attempt, saves creating one per
// execution and, above all, growing its stack again each time (decoding
// an execution needs more than a new goroutine's stack).
func (w *Worker) runPool(q *queue, attempts, pool *sync.WaitGroup) {
	for range q.slots.size() {
		pool.Go(func() {
			for job := range q.work {
				w.deliver(q, job.msg, job.ackWait)
				q.slots.release()
				attempts.Done()
			}
		})
	}
}

// setUp creates the streams, buckets and the queues' consumers if needed,
// trying again while NATS is unreachable or slow to answer. It reports
// false if ctx ended first.
func (w *Worker) setUp(ctx context.Context, pullers []*puller) bool {
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := w.setUpOnce(ctx, pullers)
		if err == nil {
			return true
		}
		if ctx.Err() != nil || !backoff.Wait(ctx, w.log, "set up streams and consumers", "err", err) {
			return false
		}
	}
}

func (w *Worker) setUpOnce(ctx context.Context, pullers []*puller) error {
	if err := wire.EnsureStreams(ctx, w.js); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	for _, p := range pullers {
		if err := p.ensureConsumers(ctx); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
	}
	return nil
}

// startBackground starts the work that lives until the last attempt is
// done (a running attempt can still be cancelled during the shutdown
// grace): the event batcher, the watcher of running attempts, the
// cancellation watch, which closes
// cancelsReady once it has read the current cancellations, the handler
// state writes, the queue depth polls and the wipe watch. stop ends them
// and waits for them.
func (w *Worker) startBackground(ctx context.Context, pullers []*puller) (cancelsReady <-chan struct{}, stop func()) {
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	ready := make(chan struct{})
	wg.Go(func() { w.events.run(bgCtx) })
	wg.Go(func() { w.logs.run(bgCtx) })
	wg.Go(func() { w.watch.run(bgCtx, watchTickFor(&w.cfg)) })
	wg.Go(func() { w.cancelWatch.run(bgCtx, ready) })
	wg.Go(func() { w.breakers.writeStates(bgCtx, w.js, w.stateEvery) })
	wg.Go(func() { pollDepths(bgCtx, pullers, w.depthEvery) })
	wg.Go(func() { w.watchWipes(bgCtx) })
	return ready, func() { cancel(); wg.Wait() }
}

// cancelWatchWait bounds how long Run waits at start for the current
// cancellations before it pulls executions anyway.
const cancelWatchWait = 10 * time.Second

// awaitCancels waits until ready is closed, so that nothing a
// cancellation already stops is run, for up to cancelWatchWait or until
// ctx ends.
func (w *Worker) awaitCancels(ctx context.Context, ready <-chan struct{}) {
	wait := time.NewTimer(cancelWatchWait)
	defer wait.Stop()
	select {
	case <-ready:
	case <-wait.C:
		w.log.Warn("cancelled executions not read yet; running executions anyway", "waited", cancelWatchWait)
	case <-ctx.Done():
	}
}

// drain waits for the running attempts for up to Config.ShutdownTimeout,
// then cancels their contexts and waits up to abandonAfter more.
func (w *Worker) drain(attempts *sync.WaitGroup, cancelAttempts context.CancelFunc) error {
	done := make(chan struct{})
	go func() { attempts.Wait(); close(done) }()
	grace := time.NewTimer(w.cfg.ShutdownTimeout)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	}
	w.log.Warn("shutdown timeout: cancelling running attempts", "running", w.inFlight.Load())
	cancelAttempts()
	abandonWait := time.NewTimer(abandonAfter)
	defer abandonWait.Stop()
	select {
	case <-done:
		return nil
	case <-abandonWait.C:
		n := w.watch.handBack()
		return fmt.Errorf("executor: %d attempts ignored cancellation at shutdown; %d handed back unreported", w.inFlight.Load(), n)
	}
}

// abandonAfter is how long Run waits for attempts whose context it
// cancelled at shutdown.
const abandonAfter = 5 * time.Second

// defaultVersion is "tock-go " and the version of the tock module this
// program was built with: its own when it is tock, else its dependency's
// ("(devel)" for a build from a checkout).
func defaultVersion() string {
	v := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, d := range bi.Deps {
			if d.Path == "github.com/tock-sched/tock" {
				v = d.Version
			}
		}
	}
	return "tock-go " + v
}
