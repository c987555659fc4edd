// Package executor runs tock executions: it pulls them from a handler's
// JetStream queue, runs a Go function for each attempt and reports the
// attempt's events to the recorder. tockd's executor role uses it for the
// built-in http and nats handlers; a custom executor is any Go program that
// calls Handle and Run (see examples/custom-executor).
//
// Delivery is at-least-once. Each attempt publishes its events (started,
// then succeeded or failed) and only then acks its message, so an executor
// that dies between the two, or whose heartbeats stop, has the execution
// redelivered to another executor as the next attempt. A handler must
// therefore be idempotent; the execution id, the same on every attempt, is
// the key to make it so.
package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mathrand "math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor/wire"
)

// Defaults for Config.
const (
	DefaultConcurrency     = 16
	DefaultShutdownTimeout = 10 * time.Second
)

// Config configures a Worker. Only NATS is required.
type Config struct {
	// NATS is the connection to the NATS cluster with JetStream. The
	// caller owns it: Run neither drains nor closes it.
	NATS *nats.Conn
	// ExecutorID names this process in events and logs. Default:
	// hostname-pid-random.
	ExecutorID string
	// Concurrency is the most attempts in flight per queue in this
	// process. Default DefaultConcurrency.
	Concurrency int
	// ShutdownTimeout is how long Run lets running attempts finish after
	// its context ends before it cancels their contexts. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// StartReportDelay: an attempt still running after this long is
	// reported by a started event; a quicker one is reported by its
	// finished event alone, which carries its start time. That halves the
	// events (and the recorder's writes) of short attempts, at the price of
	// an execution showing queued, not running, for that long. Default
	// DefaultStartReportDelay; negative reports every start at once.
	StartReportDelay time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultStartReportDelay is Config.StartReportDelay's default.
const DefaultStartReportDelay = 200 * time.Millisecond

func (c *Config) setDefaults() {
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	if c.NATS == nil {
		return errors.New("executor: Config.NATS is nil")
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("executor: Config.Concurrency %d is negative", c.Concurrency)
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("executor: Config.ShutdownTimeout %s is negative", c.ShutdownTimeout)
	}
	return nil
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
	// Attempt is the 1-based attempt number: JetStream's delivery count
	// of the message. A delivery that never reached a handler (the
	// executor died holding it) counts too.
	Attempt int
}

// Func handles one attempt of an execution. It returns the output to
// record (cut to wire.MaxOutputBytes), or an error: a retryable failure,
// or a Permanent one that ends the execution. ctx ends at the job's
// timeout and when the Worker gives up waiting for it at shutdown; Func
// should return promptly then. An output returned with an error is
// recorded too. A panic is recovered and counts as a retryable failure.
type Func func(ctx context.Context, e *Execution) (output string, err error)

// Worker pulls executions for its handlers' queues and runs them. It is
// one of: tockd's built-in executor (queues "http" and "nats") or a custom
// executor serving named handlers.
type Worker struct {
	cfg Config
	js  jetstream.JetStream
	log *slog.Logger

	mu       sync.Mutex
	handlers map[string]Func
	started  bool

	// Seams for tests.
	now          func() time.Time
	rand         func() float64 // in [0, 1), for backoff jitter
	consumerOpts wire.ConsumerOptions
	fetchWait    time.Duration

	// Set by Run before any attempt starts.
	attemptCtx context.Context // handlers' parent; cancelled at the end of the shutdown grace
	abandonCtx context.Context // heartbeats and event publishing; cancelled when Run returns
	inFlight   atomic.Int64
}

// New returns a Worker for cfg with defaults filled in. Register handlers
// with Handle, then call Run.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	js, err := jetstream.New(cfg.NATS)
	if err != nil {
		return nil, fmt.Errorf("executor: jetstream: %w", err)
	}
	return &Worker{
		cfg:       cfg,
		js:        js,
		log:       cfg.Logger.With("executor", cfg.ExecutorID),
		handlers:  make(map[string]Func),
		now:       time.Now,
		rand:      mathrand.Float64,
		fetchWait: 30 * time.Second,
	}, nil
}

// ID is the executor id this Worker reports in events.
func (w *Worker) ID() string { return w.cfg.ExecutorID }

var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Handle registers fn for queue: a custom handler's name, or
// wire.HandlerHTTP / wire.HandlerNATS for the built-ins. Like
// http.ServeMux, it panics on an invalid or duplicate queue, a nil fn, or
// a call after Run started: those are programming errors.
func (w *Worker) Handle(queue string, fn Func) {
	if !queueName.MatchString(queue) {
		panic(fmt.Sprintf("executor: invalid queue name %q (letters, digits, '-' and '_')", queue))
	}
	if fn == nil {
		panic("executor: nil Func for queue " + queue)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("executor: Handle(" + queue + ") after Run")
	}
	if _, dup := w.handlers[queue]; dup {
		panic("executor: queue " + queue + " registered twice")
	}
	w.handlers[queue] = fn
}

// Run creates the streams and the consumers of the registered queues if
// needed, then runs executions until ctx ends. It then stops pulling, lets
// running attempts finish for up to Config.ShutdownTimeout, cancels the
// contexts of those still running and waits for them briefly. It returns
// nil after such a shutdown, or an error if it cannot start or some
// attempts never returned (their executions are redelivered once their
// heartbeats lapse). Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("executor: Run called twice")
	}
	w.started = true
	handlers := maps.Clone(w.handlers)
	w.mu.Unlock()
	if len(handlers) == 0 {
		return errors.New("executor: no handlers registered")
	}

	if err := wire.EnsureStreams(ctx, w.js); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	queues := make([]*queue, 0, len(handlers))
	for name, fn := range handlers {
		q := &queue{name: name, fn: fn}
		if err := w.ensureConsumer(ctx, q); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
		queues = append(queues, q)
	}

	attemptCtx, cancelAttempts := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAttempts()
	abandonCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	w.attemptCtx, w.abandonCtx = attemptCtx, abandonCtx

	w.log.Info("executor running", "queues", len(queues), "concurrency", w.cfg.Concurrency)
	var attempts, loops sync.WaitGroup
	for _, q := range queues {
		loops.Go(func() { w.consume(ctx, q, &attempts) })
	}
	loops.Wait()

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
	wait := time.NewTimer(abandonAfter)
	defer wait.Stop()
	select {
	case <-done:
		return nil
	case <-wait.C:
		return fmt.Errorf("executor: %d attempts ignored cancellation at shutdown and were abandoned", w.inFlight.Load())
	}
}

// abandonAfter is how long Run waits for attempts whose context it
// cancelled at shutdown.
const abandonAfter = 5 * time.Second

// queue is one handler's queue; only its consume loop touches it.
type queue struct {
	name     string
	fn       Func
	consumer jetstream.Consumer
	ackWait  time.Duration
}

func (w *Worker) ensureConsumer(ctx context.Context, q *queue) error {
	c, err := wire.EnsureConsumer(ctx, w.js, q.name, wire.PriorityNormal, w.consumerOpts)
	if err != nil {
		return err
	}
	q.consumer = c
	q.ackWait = wire.DefaultAckWait
	if info := c.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		q.ackWait = info.Config.AckWait
	}
	return nil
}

// consume pulls q's executions until ctx ends. It only asks JetStream for
// as many messages as it has free slots, so a message never waits in a
// local buffer with its ack timer running, and a message Nak'ed with a
// backoff delay holds no slot.
func (w *Worker) consume(ctx context.Context, q *queue, attempts *sync.WaitGroup) {
	log := w.log.With("queue", q.name)
	slots := make(chan struct{}, w.cfg.Concurrency)
	const minPause, maxPause = 100 * time.Millisecond, 5 * time.Second
	pause := minPause
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	fill:
		for n < cap(slots) {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		got, err := w.fetch(ctx, q, n, slots, attempts)
		for range n - got {
			<-slots
		}
		if err == nil || ctx.Err() != nil {
			pause = minPause
			continue
		}
		// NATS may be down, or wiped: pause, then make sure the stream and
		// consumer exist again before the next pull.
		log.Warn("pull executions", "err", err, "retry_in", pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause = min(2*pause, maxPause)
		if err := wire.EnsureStreams(ctx, w.js); err != nil {
			log.Warn("re-create streams", "err", err)
			continue
		}
		if err := w.ensureConsumer(ctx, q); err != nil {
			log.Warn("re-create consumer", "err", err)
		}
	}
}

// fetch pulls up to n messages and starts an attempt for each; every
// started attempt releases one slot when it ends. It returns how many it
// started.
func (w *Worker) fetch(ctx context.Context, q *queue, n int, slots chan struct{}, attempts *sync.WaitGroup) (int, error) {
	fctx, cancel := context.WithTimeout(ctx, w.fetchWait)
	defer cancel()
	batch, err := q.consumer.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, err
	}
	got, ackWait := 0, q.ackWait
	// Messages that arrive as ctx ends are still run: they are ours
	// already, and handing them back would cost them an attempt.
	for msg := range batch.Messages() {
		got++
		w.inFlight.Add(1)
		attempts.Go(func() {
			defer func() { <-slots }()
			defer w.inFlight.Add(-1)
			w.process(q.name, q.fn, msg, ackWait)
		})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return got, err
	}
	return got, nil
}
