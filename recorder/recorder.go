// Package recorder is tock's server-side role that reads execution events
// from JetStream (what executors report about their attempts) and writes
// them to Postgres, which holds the truth about executions.
//
// Events are consumed at least once and, within one execution, in the
// order executors published them, except that an event whose write failed
// is retried after later ones: the Store must accept duplicates and a
// finished attempt reported before its start.
package recorder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// Store is what the recorder writes to; *store.Store is one. RecordAttemptEvents
// records a batch in order and must be idempotent per event: an event can
// be delivered twice. Its per-event result store.ErrNotFound (no such
// execution) has the event's message delivered again later, until it is
// Config.UnknownGrace old, then dropped; a batch error has the whole
// batch retried.
type Store interface {
	RecordAttemptEvents(ctx context.Context, evs []model.AttemptEvent) ([]error, error)
}

// DeadLetters keeps events the recorder cannot place; *store.Store is one.
type DeadLetters interface {
	RecordDeadEvents(ctx context.Context, evs []model.DeadEvent) error
}

// Tuning. The consumer's AckWait must outlast a slow Store write.
const (
	// RetryDelay is how long an event whose write failed waits before it
	// is delivered again; it doubles with each failed delivery, up to
	// MaxRetryDelay.
	RetryDelay    = 2 * time.Second
	MaxRetryDelay = time.Minute
	// pullBatch bounds the events buffered in this process; each must be
	// written within ackWait of its delivery.
	pullBatch = 2000
	// maxBatch events are written in one transaction; a batch closes when
	// it is full or when no event came for batchLinger.
	maxBatch    = 1000
	batchLinger = 5 * time.Millisecond
	// Writers is how many batches are written at once.
	Writers = 3
	// pullHeartbeat is how often JetStream tells a waiting pull it is
	// still there; two missed mean the consumer is gone.
	pullHeartbeat = 2 * time.Second
	// UnknownGrace is how long an event for an execution the store does
	// not hold is kept, delivered again with RetryDelay's backoff, before
	// it is dropped. A failover to a standby that had not yet received
	// the execution's firing loses its row; the scheduler fires it again
	// under the same id (its publish is then a JetStream duplicate, so no
	// executor runs it again), and its executor's events, kept, then
	// finish it. Dropped at once, they left it queued for good (docs/postgres.md).
	// An execution that retention dropped waits this long for nothing.
	UnknownGrace = 5 * time.Minute
)

// Config configures a Recorder.
type Config struct {
	// JS is where the events come from; Store where they are recorded.
	JS    jetstream.JetStream
	Store Store
	// Writers is how many batches are written at once; default Writers.
	Writers int
	// RetryDelay is how long an event whose write failed first waits;
	// default RetryDelay. It doubles with each failed delivery, up to
	// MaxRetryDelay.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Registerer is where the recorder's Prometheus metrics
	// (tock_retries_total, tock_dead_letters_total, tock_deferred_total)
	// are registered; nil registers them nowhere. tockd passes the node's
	// registry.
	Registerer prometheus.Registerer
	// Changes, if not nil, is where the recorder reports the state of
	// each execution it recorded an event of (the change feed), after
	// the write.
	Changes *changes.Publisher
	// UnknownGrace is how long an event for an unknown execution is kept
	// before it is dropped; default UnknownGrace, negative to drop it at
	// once.
	UnknownGrace time.Duration
	// DeadLetters, if set, is where events that cannot be placed are
	// kept for an operator (an event for an unknown execution after
	// UnknownGrace, an undecodable or invalid one) instead of dropped;
	// tockd passes its store. Every such event counts in
	// tock_dead_events_total and is logged either way.
	DeadLetters DeadLetters
	// Tracer, if set, makes a telemetry.SpanRecord span for each event
	// recorded that carries a sampled traceparent (the attempt's span):
	// from the batch's write to its commit, a child of the attempt.
	Tracer trace.Tracer
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults.
func (c Config) WithDefaults() Config {
	if c.Writers <= 0 {
		c.Writers = Writers
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = RetryDelay
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.UnknownGrace == 0 {
		c.UnknownGrace = UnknownGrace
	}
	return c
}

// validate rejects a configuration that cannot work.
func (c *Config) validate() error {
	if c.JS == nil || c.Store == nil {
		return errors.New("recorder: Config.JS and Config.Store are required")
	}
	return nil
}

// Recorder consumes EventStream into a Store.
type Recorder struct {
	js         jetstream.JetStream
	st         Store
	log        *slog.Logger
	writers    int
	retryDelay time.Duration
	m          *metrics
	changes    *changes.Publisher
	grace      time.Duration
	tracer     trace.Tracer
	dead       DeadLetters
}

// New checks cfg (with its defaults) and returns a Recorder.
func New(cfg Config) (*Recorder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("recorder: register metrics: %w", err)
	}
	for _, reason := range []string{"unknown_execution", "invalid", "undecodable"} {
		m.deadEvents.WithLabelValues(reason)
	}
	return &Recorder{js: cfg.JS, st: cfg.Store, log: cfg.Logger.With("role", "recorder"),
		writers: cfg.Writers, retryDelay: cfg.RetryDelay, m: m, changes: cfg.Changes, grace: cfg.UnknownGrace,
		tracer: cfg.Tracer, dead: cfg.DeadLetters}, nil
}

// Run creates the streams and the recorder's durable consumer if needed
// and records events, in batches, until ctx ends. It then stops pulling,
// records the events it was delivered already (for up to shutdownWrite)
// and returns nil. If
// NATS is unreachable at start, fails later or is wiped, it keeps trying
// (re-creating the streams and consumer) and carries on.
func (r *Recorder) Run(ctx context.Context) error {
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	cons, err := r.ensure(ctx)
	for err != nil {
		if ctx.Err() != nil {
			return nil
		}
		backoff.Wait(ctx, r.log, "set up the event consumer", "err", err)
		cons, err = r.ensure(ctx)
	}
	backoff.Reset()
	for {
		err := r.consume(ctx, cons)
		if ctx.Err() != nil {
			return nil
		}
		backoff.Wait(ctx, r.log, "consume events", "err", err)
		if c, err := r.ensure(ctx); err != nil {
			r.log.Warn("re-create event consumer", "err", err)
		} else {
			cons = c
		}
	}
}

// WaitDelivered waits until the recorders' consumer has delivered every
// event in the stream (none waits undelivered), or ctx ends. A node that
// stops calls it before it stops its recorder, which then records what
// it was delivered (see Run): the events its own executor published last
// are recorded before it exits, not half a minute later by the next
// recorder.
func (r *Recorder) WaitDelivered(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := r.js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
		if err == nil && c.CachedInfo().NumPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("recorder: read consumer %s: %w", wire.RecorderConsumer, err)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (r *Recorder) ensure(ctx context.Context) (jetstream.Consumer, error) {
	if err := wire.EnsureStreams(ctx, r.js); err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	c, err := r.js.CreateOrUpdateConsumer(ctx, wire.EventStream, wire.RecorderConsumerConfig())
	if err != nil {
		return nil, fmt.Errorf("recorder: ensure consumer %s on %s: %w", wire.RecorderConsumer, wire.EventStream, err)
	}
	return c, nil
}

// consume records events until ctx ends or the iterator fails. Batches
// are written by up to writers goroutines at once: a batch's cost is
// mostly its commit (a WAL flush) and round trips, which overlap.
// Events of one execution in two batches in flight may be applied out of
// order, which the store's rules allow (see the package doc).
func (r *Recorder) consume(ctx context.Context, cons jetstream.Consumer) error {
	// A missed heartbeat ends the iterator (and Run sets the consumer up
	// again): after NATS restarts on an empty store, the iterator would
	// otherwise wait half a minute on a consumer that no longer exists.
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch), jetstream.PullHeartbeat(pullHeartbeat))
	if err != nil {
		return err
	}
	defer it.Stop()
	// At shutdown the iterator stops pulling but hands out what it holds
	// already: those events are recorded before Run returns. Stopped
	// outright, it dropped them, and JetStream gave them to the next
	// recorder only when their ack wait (30s) ran out: an execution
	// whose last event a stopping node had pulled stayed running that
	// long, and with overlap skip its job fired nothing meanwhile.
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	// The writes of those last events outlive ctx, by up to
	// shutdownWrite.
	wctx, cancelWrites := shutdownContext(ctx)
	defer cancelWrites()

	work := make(chan []jetstream.Msg)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(work)
	for range r.writers {
		wg.Go(func() {
			for batch := range work {
				r.handle(wctx, batch)
			}
		})
	}
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		// Under load, many events wait: write them together, one
		// transaction and a few statements for the lot.
		batch := make([]jetstream.Msg, 1, maxBatch)
		batch[0] = msg
		for len(batch) < maxBatch {
			m, err := it.Next(jetstream.NextMaxWait(batchLinger))
			if err != nil {
				if errors.Is(err, nats.ErrTimeout) {
					break
				}
				work <- batch
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
			batch = append(batch, m)
		}
		work <- batch
	}
}

// shutdownWrite bounds the writes of the events a recorder still holds
// when it stops.
const shutdownWrite = 5 * time.Second

// shutdownContext returns a context for event writes: it ends
// shutdownWrite after ctx ends (or when cancel is called).
func shutdownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(shutdownWrite, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	return wctx, func() { stop(); cancel() }
}

// handle records a batch of events and settles their messages. A
// message holds one event, or several (wire.EventBatchSubject); it is
// acknowledged once all of its events are written.
func (r *Recorder) handle(ctx context.Context, msgs []jetstream.Msg) {
	evs := make([]model.AttemptEvent, 0, len(msgs))
	origins := make([]origin, 0, len(msgs))
	held := make([]jetstream.Msg, 0, len(msgs))
	ends := make([]int, 0, len(msgs)) // held[i]'s events end before evs[ends[i]]
	var dead []model.DeadEvent
	defer func() { r.deadLetter(ctx, dead) }()
	for _, msg := range msgs {
		got, of, ok := r.decodeMsg(msg, &dead)
		if !ok {
			continue
		}
		evs = append(evs, got...)
		origins = append(origins, of...)
		held = append(held, msg)
		ends = append(ends, len(evs))
	}
	if len(evs) == 0 {
		return
	}
	began := time.Now()
	results, err := r.st.RecordAttemptEvents(ctx, evs)
	if r.tracer != nil {
		r.trace(ctx, began, evs, origins, results, err)
	}
	if err != nil {
		for _, msg := range held {
			if ctx.Err() != nil {
				_ = msg.Nak() // shutting down: redelivered to whoever runs next
				continue
			}
			_ = msg.NakWithDelay(r.delay(msg))
		}
		if ctx.Err() == nil {
			r.log.Warn("record events; retrying", "events", len(evs), "err", err, "retry_in", r.retryDelay)
		}
		return
	}
	var feed []changes.Change
	from := 0
	defer func() { r.changes.Publish(feed...) }()
	for m, msg := range held {
		batch := msg.Subject() == wire.EventBatchSubject
		// A message with an event for an unknown execution is delivered
		// again, whole, while it is young (UnknownGrace): its other events
		// are recorded again then, which changes nothing, and counted and
		// announced then, once.
		keep := false
		for i := from; i < ends[m] && !keep; i++ {
			keep = errors.Is(results[i], store.ErrNotFound) && r.young(msg)
		}
		for i := from; i < ends[m]; i++ {
			switch {
			case results[i] == nil && keep:
			case results[i] == nil:
				r.m.count(evs[i])
				if c, ok := changeOf(&evs[i], origins[i]); ok && r.changes != nil {
					feed = append(feed, c)
				}
				if !batch {
					if err := msg.Ack(); err != nil {
						r.log.Warn("ack event", "execution_id", evs[i].ID, "err", err)
					}
				}
			case errors.Is(results[i], store.ErrNotFound) && keep:
				r.log.Warn("event for an unknown execution; keeping it a while", "execution_id", evs[i].ID,
					"attempt", evs[i].Attempt, "retry_in", r.delay(msg))
			case errors.Is(results[i], store.ErrNotFound):
				r.log.Error("event for an unknown execution; keeping it as a dead event", "execution_id", evs[i].ID,
					"attempt", evs[i].Attempt, "kept_for", r.grace)
				dead = append(dead, deadOf(&evs[i], origins[i], ReasonUnknown))
				if !batch {
					_ = msg.TermWithReason("tock: unknown execution")
				}
			default:
				r.log.Error("invalid event; keeping it as a dead event", "execution_id", evs[i].ID, "err", results[i])
				dead = append(dead, deadOf(&evs[i], origins[i], "invalid: "+results[i].Error()))
				if !batch {
					_ = msg.TermWithReason("tock: invalid event")
				}
			}
		}
		switch {
		case keep:
			_ = msg.NakWithDelay(r.delay(msg))
		case batch:
			if err := msg.Ack(); err != nil {
				r.log.Warn("ack event batch", "events", ends[m]-from, "err", err)
			}
		}
		from = ends[m]
	}
}

// trace makes the telemetry.SpanRecord span of each event of a batch
// that carries a sampled traceparent, timed as the batch's write.
func (r *Recorder) trace(ctx context.Context, began time.Time, evs []model.AttemptEvent, of []origin, results []error, err error) {
	end := trace.WithTimestamp(time.Now())
	for i := range evs {
		parent, ok := telemetry.ParseTraceparent(of[i].traceparent)
		if !ok {
			continue
		}
		_, span := r.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), telemetry.SpanRecord,
			trace.WithTimestamp(began))
		if span.IsRecording() {
			span.SetAttributes(attribute.String(telemetry.AttrExecutionID, evs[i].ID.String()),
				attribute.String(telemetry.AttrEvent, string(evs[i].Type)),
				attribute.Int(telemetry.AttrAttempt, evs[i].Attempt),
				attribute.Int(telemetry.AttrBatchSize, len(evs)))
			e := err
			if e == nil && results != nil {
				e = results[i]
			}
			if e != nil {
				span.SetStatus(codes.Error, e.Error())
			}
		}
		span.End(end)
	}
}

// young says whether msg was stored in the stream less than the grace
// for unknown executions ago.
func (r *Recorder) young(msg jetstream.Msg) bool {
	if r.grace < 0 {
		return false
	}
	md, err := msg.Metadata()
	return err == nil && time.Since(md.Timestamp) < r.grace
}

// decodeMsg turns msg into the events to record: one, or a batch's. A
// message that holds none is settled here (terminated) and ok is false;
// an invalid event inside a batch is dropped with a log line.
func (r *Recorder) decodeMsg(msg jetstream.Msg, dead *[]model.DeadEvent) (evs []model.AttemptEvent, of []origin, ok bool) {
	if msg.Subject() != wire.EventBatchSubject {
		ev, o, ok := r.decode(msg, dead)
		if !ok {
			return nil, nil, false
		}
		return []model.AttemptEvent{ev}, []origin{o}, true
	}
	var wes []wire.Event
	if err := json.Unmarshal(msg.Data(), &wes); err != nil {
		r.log.Error("undecodable event batch; keeping it as a dead event", "subject", msg.Subject(), "err", err)
		*dead = append(*dead, model.DeadEvent{Reason: "undecodable: " + err.Error(), Event: msg.Data()})
		_ = msg.TermWithReason("tock: undecodable event batch")
		return nil, nil, false
	}
	for _, we := range wes {
		ev, err := toEvent(we)
		if err != nil {
			r.log.Error("invalid event in a batch; keeping it as a dead event", "execution_id", we.ExecutionID, "err", err)
			*dead = append(*dead, deadOfWire(we, err))
			continue
		}
		evs = append(evs, ev)
		of = append(of, origin{we.Namespace, we.JobID, we.Traceparent})
	}
	if len(evs) == 0 {
		_ = msg.TermWithReason("tock: no valid event in batch")
		return nil, nil, false
	}
	return evs, of, true
}

// origin is an event's execution's namespace and job, as the executor
// reported them (empty if it did not), for the change feed.
// The event's traceparent, if any, too: its recording's span is a child.
type origin struct{ namespace, jobID, traceparent string }

// changeOf is the change feed's view of a recorded event: the state the
// execution is in after it. Heartbeats change no state, and an event
// without a namespace cannot be filed in the feed: ok is false.
func changeOf(ev *model.AttemptEvent, o origin) (c changes.Change, ok bool) {
	var state domain.ExecState
	switch ev.Type {
	case domain.EventStarted:
		state = domain.ExecRunning
	case domain.EventSucceeded:
		state = domain.ExecSucceeded
	case domain.EventFailed:
		state = domain.ExecFailed
		if ev.Final {
			state = domain.ExecDead
		}
	case domain.EventCancelled:
		state = domain.ExecCancelled
	case domain.EventDeferred:
		state = domain.ExecQueued
	default:
		return c, false
	}
	if o.namespace == "" {
		return c, false
	}
	return changes.Change{Kind: changes.KindExecution, Namespace: o.namespace, JobID: o.jobID,
		ExecutionID: ev.ID.String(), State: string(state), Attempt: ev.Attempt, At: ev.At}, true
}

// delay is how long a message whose write failed waits: RetryDelay,
// doubling with each failed delivery, up to MaxRetryDelay.
func (r *Recorder) delay(msg jetstream.Msg) time.Duration {
	delay := r.retryDelay
	if md, err := msg.Metadata(); err == nil {
		for n := uint64(1); n < md.NumDelivered && delay < MaxRetryDelay; n++ {
			delay *= 2
		}
	}
	return min(delay, MaxRetryDelay)
}

// decode turns msg into an event to record. A message that is not one is
// settled here (terminated) and ok is false.
func (r *Recorder) decode(msg jetstream.Msg, dead *[]model.DeadEvent) (ev model.AttemptEvent, o origin, ok bool) {
	var we wire.Event
	if err := json.Unmarshal(msg.Data(), &we); err != nil {
		r.log.Error("undecodable event; keeping it as a dead event", "subject", msg.Subject(), "err", err)
		*dead = append(*dead, model.DeadEvent{Reason: "undecodable: " + err.Error(), Event: msg.Data()})
		_ = msg.TermWithReason("tock: undecodable event")
		return ev, o, false
	}
	ev, err := toEvent(we)
	if err != nil {
		r.log.Error("invalid event; keeping it as a dead event", "subject", msg.Subject(), "execution_id", we.ExecutionID,
			"attempt", we.Attempt, "dispatch", we.Dispatch, "type", we.Type, "err", err)
		*dead = append(*dead, deadOfWire(we, err))
		_ = msg.TermWithReason("tock: invalid event")
		return ev, o, false
	}
	return ev, origin{we.Namespace, we.JobID, we.Traceparent}, true
}

// toEvent is the store's view of a wire event.
func toEvent(we wire.Event) (model.AttemptEvent, error) {
	id, err := uuid.Parse(we.ExecutionID)
	if err != nil {
		return model.AttemptEvent{}, fmt.Errorf("execution_id: %w", err)
	}
	if we.Attempt < 1 || we.Dispatch < 0 {
		return model.AttemptEvent{}, fmt.Errorf("attempt %d, dispatch %d: attempts count from 1, dispatches from 0", we.Attempt, we.Dispatch)
	}
	if !slices.Contains(domain.EventTypes, we.Type) {
		return model.AttemptEvent{}, fmt.Errorf("unknown event type %q", we.Type)
	}
	ev := model.AttemptEvent{ID: id, Type: we.Type, Attempt: we.Attempt, Executor: we.ExecutorID, At: we.At,
		Dispatch: we.Dispatch, PublishedAt: we.PublishedAt}
	switch we.Type {
	case domain.EventSucceeded:
		ev.Final, ev.Output, ev.StartedAt = true, domain.Truncate(we.Output), we.StartedAt
	case domain.EventFailed:
		ev.Final, ev.TimedOut, ev.StartedAt = we.Final, we.TimedOut, we.StartedAt
		ev.Error, ev.Output = domain.Truncate(we.Error), domain.Truncate(we.Output)
		ev.RetryIn = time.Duration(we.RetryInMS) * time.Millisecond
	case domain.EventCancelled:
		ev.Error, ev.StartedAt = domain.Truncate(we.Error), we.StartedAt
	case domain.EventDeferred:
		ev.RetryIn = time.Duration(we.RetryInMS) * time.Millisecond
	}
	return ev, nil
}

// ReasonUnknown is a dead event's reason when no execution took it.
const ReasonUnknown = "unknown execution: Postgres held no such execution while the event was kept"

// deadOf is a dead event of an event that decoded.
func deadOf(ev *model.AttemptEvent, o origin, reason string) model.DeadEvent {
	id, sched, attempt := ev.ID, domain.ExecutionTime(ev.ID), ev.Attempt
	data, _ := json.Marshal(ev)
	return model.DeadEvent{Namespace: o.namespace, ExecutionID: &id, ScheduledFor: &sched, Attempt: &attempt,
		Type: string(ev.Type), Reason: reason, Event: data}
}

// deadOfWire is a dead event of a wire event that is not valid (err).
func deadOfWire(we wire.Event, err error) model.DeadEvent {
	d := model.DeadEvent{Namespace: we.Namespace, Type: string(we.Type), Reason: "invalid: " + err.Error()}
	if id, perr := uuid.Parse(we.ExecutionID); perr == nil {
		sched := domain.ExecutionTime(id)
		d.ExecutionID, d.ScheduledFor = &id, &sched
	}
	if we.Attempt > 0 {
		a := we.Attempt
		d.Attempt = &a
	}
	d.Event, _ = json.Marshal(we)
	return d
}

// deadLetter counts and keeps events that cannot be placed. A write that
// fails is logged: the events were logged one by one already.
func (r *Recorder) deadLetter(ctx context.Context, dead []model.DeadEvent) {
	if len(dead) == 0 {
		return
	}
	for _, d := range dead {
		reason := "invalid"
		switch {
		case d.Reason == ReasonUnknown:
			reason = "unknown_execution"
		case strings.HasPrefix(d.Reason, "undecodable"):
			reason = "undecodable"
		}
		r.m.deadEvents.WithLabelValues(reason).Inc()
	}
	if r.dead == nil {
		return
	}
	wctx, cancel := shutdownContext(ctx)
	defer cancel()
	if err := r.dead.RecordDeadEvents(wctx, dead); err != nil {
		r.log.Error("keep dead events", "events", len(dead), "err", err)
	}
}
