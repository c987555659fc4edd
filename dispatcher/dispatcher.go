// Package dispatcher publishes executions to NATS JetStream, exactly once
// per dispatch, and marks them dispatched in Postgres on the publish ack.
//
// The executions table is the outbox: a fired execution is committed first
// and published after; so is a retry, a deferred delivery or a re-drive,
// which Postgres puts back in the outbox as the execution's next dispatch
// (see store.RecordAttemptEvents). Each message carries Nats-Msg-Id =
// wire.ExecMsgID(execution id, dispatch), so a re-publish of the same
// dispatch inside the stream's duplicate window (2 minutes) is dropped by
// JetStream; one whose ack was lost stays undispatched and the scanner
// hands it here again. Executions are held until they are due (fired a
// little ahead, or a retry read ahead of its backoff's end) without
// holding up those that are due now. Dispatch never blocks the caller on
// NATS.
package dispatcher

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// Store is what the dispatcher needs from Postgres.
type Store interface {
	MarkExecutionsDispatched(ctx context.Context, ds []model.Dispatched, at time.Time) error
	AdvancePublishPositions(ctx context.Context, positions map[int]time.Time) error
}

// Failer records executions that can never be published: their message
// is larger than NATS takes (its max_payload, 1 MiB by default) or cannot
// be encoded. *store.Store is one.
type Failer interface {
	RecordAttemptEvents(ctx context.Context, evs []model.AttemptEvent) ([]error, error)
}

// FailedBy is the executor an unpublishable execution's failed attempt is
// recorded under.
const FailedBy = "dispatcher"

// Clock is the cluster clock; *clock.DB is one. Passed is a time the
// database's clock has surely reached.
type Clock interface {
	Passed() time.Time
}

// localClock is the local clock, for a dispatcher given none.
type localClock struct{}

func (localClock) Passed() time.Time { return time.Now() }

// Config configures a Dispatcher. JS and Store are required.
type Config struct {
	JS    jetstream.JetStream
	Store Store
	// BatchSize caps the executions published before one MarkExecutionsDispatched;
	// default 1000.
	BatchSize int
	// Workers publish batches in parallel; default 2.
	Workers int
	// AckTimeout bounds the wait for a batch's publish acks; default 5s.
	AckTimeout time.Duration
	// Clock is the cluster clock, the scanner's (the database's): nothing
	// is published before its Passed reaches the execution's due time
	// (model.Execution.DueAt), and the fire-lag metric and dispatch marks
	// use Passed too. Default: the local clock.
	Clock  Clock
	Logger *slog.Logger
	// Failer, if set, makes an execution that can never be published dead
	// at once, with a failed attempt (executor FailedBy) that says why,
	// rather than publishing it again for ever while it holds its
	// bucket's publish position back. Without one it is only logged.
	Failer Failer
	// Registerer is where the dispatcher's Prometheus metrics
	// (tock_fire_lag_seconds, tock_dispatched_total and the others of
	// metrics.go) are registered; nil registers them nowhere. tockd
	// passes the node's registry.
	Registerer prometheus.Registerer
	// Changes, if not nil, is told of each execution published (queued,
	// for an executor), after JetStream has it: the change feed.
	Changes *changes.Publisher
	// Tracer, if set, makes a telemetry.SpanPublish span for each publish
	// (sampled by the execution's id), from the publish to JetStream's ack,
	// a child of the firing's span when the execution carries one, and
	// puts its context in the message's traceparent header (a batch
	// member's in its own traceparent field).
	Tracer trace.Tracer
	// Forms says which execution subjects take batch messages; the
	// dispatcher's BacklogWatch is one. A batch (model.Execution.Batch)
	// is published in one message per subject whose consumer takes them,
	// else one message per execution. While Forms cannot tell yet (tockd
	// just started) a batch waits, rather than risk a form its earlier
	// publish did not have. Nil: one execution per message everywhere.
	Forms Forms
}

// Forms tells which execution subjects take batch messages
// (wire.MetaBatch); *BacklogWatch is one. known is false while it cannot
// tell yet.
type Forms interface {
	BatchForm(subject string) (batch, known bool)
}

// key names one dispatch of an execution.
type key struct {
	id       uuid.UUID
	dispatch int
}

func keyOf(e *model.Execution) key { return key{e.ID, e.Dispatches} }

// Dispatcher publishes executions. Create it with New and run it with Run.
type Dispatcher struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	// maxPending bounds the executions waiting here (back-pressure).
	maxPending int

	mu      sync.Mutex
	pending execHeap // waiting to be published, by due time
	// perMsg is, by subject, a moving average of the executions per
	// message published (ExecutionsPerMessage).
	perMsg   map[string]float64
	pendingN int              // executions in pending (a batch is one item)
	inflight map[key]struct{} // pending or being published
	wake     chan struct{}    // cap 1: pending changed, a worker looks
	room     chan struct{}    // cap 1: pending shrank, Dispatch looks
	// idle is closed while inflight is empty; Dispatch replaces it when
	// the first execution comes in (see Drain).
	idle chan struct{}

	// Publish positions (see store.AdvancePublishPositions). unacked counts, per bucket
	// and creation time, the first dispatches of fired executions taken
	// by Dispatch and not yet acknowledged; acked is the newest creation
	// time acknowledged per bucket; holds are the floors of firing
	// transactions in flight (Hold); stored is the last position written.
	unacked map[int]map[time.Time]int
	acked   map[int]time.Time
	holds   map[int]time.Time
	holdSeq int
	stored  map[int]time.Time
	// moved are positions not yet written; one writer goroutine writes
	// them (posWake), so that position writes never queue up behind, nor
	// deadlock with, each other.
	moved   map[int]time.Time
	posWake chan struct{}
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults: batches of 1000, 2 workers, a 5s ack timeout, the
// local clock and the default logger.
func (c Config) WithDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = localClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate rejects a configuration that cannot work.
func (c *Config) validate() error {
	if c.JS == nil || c.Store == nil {
		return errors.New("dispatcher: Config.JS and Config.Store are required")
	}
	return nil
}

// New checks cfg (with its defaults) and returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: register metrics: %w", err)
	}
	idle := make(chan struct{})
	close(idle)
	return &Dispatcher{
		cfg: cfg,
		log: cfg.Logger,
		m:   m,
		// Room for a few seconds of firing at full speed, executions the
		// scanner fired ahead of their time and retries read ahead of
		// their due time included.
		maxPending: 64 * cfg.BatchSize,
		inflight:   map[key]struct{}{},
		perMsg:     map[string]float64{},
		unacked:    map[int]map[time.Time]int{},
		acked:      map[int]time.Time{},
		holds:      map[int]time.Time{},
		stored:     map[int]time.Time{},
		moved:      map[int]time.Time{},
		posWake:    make(chan struct{}, 1),
		wake:       make(chan struct{}, 1),
		room:       make(chan struct{}, 1),
		idle:       idle,
	}, nil
}

// Dispatch queues executions for publishing, each when it is due
// (model.Execution.DueAt) and as its dispatch number Dispatches. A
// dispatch already waiting or being published is skipped, so the outbox
// may hand the same execution again safely. The members of a batch
// (model.Execution.Batched) wait and are published together: hand a
// batch's members in one call (the firing and the outbox read do). It
// blocks only while too many executions wait (back-pressure), or until
// ctx ends; executions it did not take stay in the outbox.
func (d *Dispatcher) Dispatch(ctx context.Context, execs []*model.Execution) {
	for _, g := range groups(execs) {
		for {
			d.mu.Lock()
			g = slices.DeleteFunc(g, func(e *model.Execution) bool {
				_, busy := d.inflight[keyOf(e)]
				return busy
			})
			if len(g) == 0 {
				d.mu.Unlock()
				break
			}
			if d.pendingN < d.maxPending {
				if len(d.inflight) == 0 {
					d.idle = make(chan struct{})
				}
				d.push(g, g[0].DueAt())
				for _, e := range g {
					d.inflight[keyOf(e)] = struct{}{}
					if e.Positional() {
						d.count(e, 1)
					}
				}
				d.mu.Unlock()
				signal(d.wake)
				break
			}
			d.mu.Unlock()
			select {
			case <-d.room:
			case <-ctx.Done():
				return
			}
		}
	}
}

// groups splits execs into what waits as one: the members of a batch
// together, every other execution alone, in the order of their first
// member.
func groups(execs []*model.Execution) [][]*model.Execution {
	out := make([][]*model.Execution, 0, len(execs))
	var at map[uuid.UUID]int // batch → index in out
	for _, e := range execs {
		if !e.Batched() {
			out = append(out, []*model.Execution{e})
			continue
		}
		if at == nil {
			at = map[uuid.UUID]int{}
		}
		i, ok := at[e.Batch]
		if !ok {
			i = len(out)
			at[e.Batch] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], e)
	}
	return out
}

// push adds a group to pending, to be published at at. Called with mu
// held.
func (d *Dispatcher) push(g []*model.Execution, at time.Time) {
	heap.Push(&d.pending, item{g, at})
	d.pendingN += len(g)
}

// Hold keeps every bucket's publish position at or before floor until
// the returned release is called. The scanner holds the position across
// a firing transaction in flight: its executions are created (by the
// database's clock) no earlier than floor, and reach Dispatch only after
// it commits, so a position advanced meanwhile by other acks must not
// pass them. Release after handing the transaction's executions to
// Dispatch.
func (d *Dispatcher) Hold(floor time.Time) (release func()) {
	d.mu.Lock()
	d.holdSeq++
	id := d.holdSeq
	d.holds[id] = floor
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.holds, id)
		d.mu.Unlock()
	}
}

// count adds n to the unacknowledged first dispatches of e's bucket
// created at e.CreatedAt. Called with mu held.
func (d *Dispatcher) count(e *model.Execution, n int) {
	m := d.unacked[e.Bucket]
	if m == nil {
		m = map[time.Time]int{}
		d.unacked[e.Bucket] = m
	}
	if m[e.CreatedAt] += n; m[e.CreatedAt] <= 0 {
		delete(m, e.CreatedAt)
	}
}

// positions are the publish positions of buckets that moved: for each,
// just before its oldest unacknowledged first dispatch, or its newest
// acknowledged one when none waits, and never past a Hold. Called with mu
// held.
func (d *Dispatcher) positions(buckets map[int]bool) map[int]time.Time {
	var floor time.Time
	for _, f := range d.holds {
		if floor.IsZero() || f.Before(floor) {
			floor = f
		}
	}
	out := map[int]time.Time{}
	for b := range buckets {
		p := d.acked[b]
		for t := range d.unacked[b] {
			if t.Add(-time.Millisecond).Before(p) {
				p = t.Add(-time.Millisecond)
			}
		}
		if !floor.IsZero() && floor.Before(p) {
			p = floor
		}
		if p.IsZero() || !p.After(d.stored[b]) {
			continue
		}
		out[b] = p
	}
	return out
}

// Unpublished is how many executions wait here due, or are being
// published, not yet acknowledged: the part of the backlog that has not
// reached JetStream (see BacklogWatch). Executions fired ahead of their
// time (the scanner's fire lead) and retries read ahead of their backoff's
// end are not counted until they are due. It costs a walk of the due
// executions only.
func (d *Dispatcher) Unpublished() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inflight) - d.pendingN + d.pending.dueBy(0, d.cfg.Clock.Passed())
}

// busy is how many executions wait or are being published.
func (d *Dispatcher) busy() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inflight)
}

// Drain waits until no execution waits here or is being published, or
// until ctx ends, and then returns ctx's error. It neither stops Dispatch
// nor reads the outbox: call it once whatever dispatches has stopped, and
// bound it, since executions not yet due (fired ahead of their time,
// retries read ahead of their backoff's end) and publishes NATS does not
// acknowledge keep the dispatcher busy. Whatever it does not publish stays
// in the outbox.
func (d *Dispatcher) Drain(ctx context.Context) error {
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signal wakes whoever waits on c, if anyone.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run publishes due executions until ctx ends. Executions still waiting
// then stay in the outbox, for whoever owns their bucket next.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := 0; i < d.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(ctx)
		}()
	}
	posDone := make(chan struct{})
	go func() {
		defer close(posDone)
		d.writePositions(ctx)
	}()
	wg.Wait()
	<-posDone
	return nil
}

// writePositions writes publish positions as they move, coalesced, until
// ctx ends; then it writes the last ones.
func (d *Dispatcher) writePositions(ctx context.Context) {
	for {
		select {
		case <-d.posWake:
		case <-ctx.Done():
			d.flushPositions(ctx)
			return
		}
		d.flushPositions(ctx)
	}
}

func (d *Dispatcher) flushPositions(ctx context.Context) {
	d.mu.Lock()
	pos := d.moved
	d.moved = map[int]time.Time{}
	d.mu.Unlock()
	if len(pos) > 0 {
		d.store(ctx, pos)
	}
}

func (d *Dispatcher) work(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, wait := d.take()
		if len(batch) > 0 {
			acked := d.publish(ctx, batch)
			if pos := d.done(batch, acked); len(pos) > 0 {
				d.mu.Lock()
				for b, t := range pos {
					d.moved[b] = t
				}
				d.mu.Unlock()
				signal(d.posWake)
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// take removes up to about BatchSize due executions from pending,
// earliest first, a batch's members all or none. With none due it returns
// how long until the next one is (an hour when nothing waits).
func (d *Dispatcher) take() ([]*model.Execution, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Clock.Passed()
	var batch []*model.Execution
	for len(d.pending) > 0 && len(batch) < d.cfg.BatchSize && !d.pending[0].at.After(now) {
		it := heap.Pop(&d.pending).(item)
		d.pendingN -= len(it.es)
		batch = append(batch, it.es...)
	}
	if len(batch) > 0 {
		signal(d.room)
		if len(d.pending) > 0 && !d.pending[0].at.After(now) {
			signal(d.wake) // more for another worker
		}
		return batch, 0
	}
	if len(d.pending) == 0 {
		return nil, time.Hour
	}
	return nil, d.pending[0].at.Sub(now)
}

// done forgets a published batch: acked says which were acknowledged.
// A first dispatch that was not stays counted against its bucket's
// position, and is handed back to pending to be tried again after a
// pause (a batch's members that were not, together); the rest are left
// to the outbox (they are marked one by one). It returns the positions
// that moved.
func (d *Dispatcher) done(batch []*model.Execution, acked []bool) map[int]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	touched := map[int]bool{}
	var again []*model.Execution
	for i, e := range batch {
		if !e.Positional() {
			delete(d.inflight, keyOf(e))
			continue
		}
		if !acked[i] {
			// Not acknowledged: keep it (and the position behind it) and
			// publish it again shortly.
			again = append(again, e)
			continue
		}
		delete(d.inflight, keyOf(e))
		d.count(e, -1)
		if e.CreatedAt.After(d.acked[e.Bucket]) {
			d.acked[e.Bucket] = e.CreatedAt
		}
		touched[e.Bucket] = true
	}
	if len(again) > 0 {
		at := d.cfg.Clock.Passed().Add(retryPause)
		for _, g := range groups(again) {
			d.push(g, at)
		}
		signal(d.wake)
	}
	if len(d.inflight) == 0 {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
	return d.positions(touched)
}

// retryPause is how long a first dispatch whose publish failed waits
// before it is published again.
const retryPause = time.Second

// publish sends a batch of due executions asynchronously and waits for
// the acks. It marks the acknowledged re-dispatches and manual runs in
// one call (first dispatches of fired executions are covered by their
// bucket's publish position instead, see done) and reports which
// publishes were acknowledged, or are done with for good (see fail).
func (d *Dispatcher) publish(ctx context.Context, batch []*model.Execution) []bool {
	sent := time.Now().UTC() // before any executor can have it: the feed orders by it
	ok := make([]bool, len(batch))
	var spans []trace.Span // batch's, when tracing
	if d.cfg.Tracer != nil {
		spans = make([]trace.Span, len(batch))
		defer func() {
			for i, sp := range spans {
				if sp != nil && !ok[i] {
					sp.SetStatus(codes.Error, "not acknowledged")
				}
				if sp != nil {
					sp.End()
				}
			}
		}()
	}
	msgs, unpublishable := d.messages(ctx, batch, spans)
	d.countPerMessage(msgs)
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for j, m := range msgs {
		f, err := d.cfg.JS.PublishMsgAsync(m.msg, jetstream.WithMsgID(m.id))
		if err != nil {
			d.log.Warn("publish execution", "msg_id", m.id, "executions", len(m.members), "err", err)
			d.m.dispatchErrors.Inc()
			if tooLarge(err) && len(m.members) == 1 && m.msg.Header.Get(wire.HeaderBatch) == "" {
				unpublishable[m.members[0]] = tooLargeError(len(m.msg.Data))
			}
			continue
		}
		futures[j] = f
	}
	timeout := time.NewTimer(d.cfg.AckTimeout)
	defer timeout.Stop()
	var (
		marks []model.Dispatched
		lags  []float64
		n     int
	)
wait:
	for j, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			for _, i := range msgs[j].members {
				e := batch[i]
				ok[i] = true
				n++
				if spans != nil {
					spans[i].End()
					spans[i] = nil
				}
				if e.Positional() {
					lags = append(lags, d.cfg.Clock.Passed().Sub(e.ScheduledFor).Seconds())
				} else {
					marks = append(marks, model.Dispatched{ID: e.ID, Dispatch: e.Dispatches})
				}
			}
		case err := <-f.Err():
			d.log.Warn("publish execution not acknowledged", "msg_id", msgs[j].id, "executions", len(msgs[j].members), "err", err)
			d.m.dispatchErrors.Inc()
			if tooLarge(err) && len(msgs[j].members) == 1 && f.Msg().Header.Get(wire.HeaderBatch) == "" {
				unpublishable[msgs[j].members[0]] = tooLargeError(len(f.Msg().Data))
			}
		case <-timeout.C:
			d.m.dispatchErrors.Add(float64(len(futures) - j))
			d.log.Warn("publish acks timed out", "waiting", len(futures)-j)
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	d.fail(ctx, batch, unpublishable, ok)
	d.queued(batch, ok, sent)
	for _, lag := range lags {
		d.m.fireLag.Observe(max(lag, 0))
	}
	d.m.dispatched.Add(float64(n))
	if len(marks) == 0 {
		return ok
	}
	// Marking must survive our own shutdown: the messages are out already.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Store.MarkExecutionsDispatched(mctx, marks, d.cfg.Clock.Passed()); err != nil {
		// Not lost: the outbox re-publishes, and JetStream drops the
		// duplicate inside its window.
		d.log.Warn("mark dispatched", "count", len(marks), "err", err)
		return ok
	}
	for _, m := range marks {
		if m.Dispatch > 0 {
			d.m.republished.Inc()
		}
	}
	return ok
}

// countPerMessage moves each subject's average of executions per
// message by the messages about to be published.
func (d *Dispatcher) countPerMessage(msgs []outMsg) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		n := float64(len(m.members))
		if v, ok := d.perMsg[m.msg.Subject]; ok {
			d.perMsg[m.msg.Subject] = v + (n-v)/64
		} else {
			d.perMsg[m.msg.Subject] = n
		}
	}
}

// ExecutionsPerMessage is how many executions a message on subject has
// carried on average lately (1 before any): several in batch messages.
// The backlog watch counts a consumer's messages in executions with it.
func (d *Dispatcher) ExecutionsPerMessage(subject string) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(1, d.perMsg[subject])
}

// outMsg is one message to publish: its members (indexes into the
// batch being published) and its Nats-Msg-Id.
type outMsg struct {
	members []int
	msg     *nats.Msg
	id      string
	subject string // of a batch message, made once its members are known
}

// batchKey is one batch message: a batch's members on one subject.
type batchKey struct {
	batch   uuid.UUID
	subject string
}

// messages encodes batch into the messages to publish: a batch's members
// on a subject that takes batch messages in one (members whose own body
// is larger than wire.MaxBatchMemberBytes alone), everything else one
// execution per message. Members whose subject's form is not known yet
// are left out (not acknowledged: tried again shortly). It starts the
// publish spans, and returns the executions that cannot be encoded, with
// why.
func (d *Dispatcher) messages(ctx context.Context, batch []*model.Execution, spans []trace.Span) ([]outMsg, map[int]string) {
	var (
		msgs          = make([]outMsg, 0, len(batch))
		unpublishable = map[int]string{} // batch index → why
		open          map[batchKey]int   // → index in msgs
		bodies        map[int][][]byte   // msgs index → members' bodies
	)
	for i, e := range batch {
		w := Wire(e)
		body, err := w.Body()
		if err != nil {
			d.log.Error("encode execution", "execution_id", e.ID, "err", err)
			d.m.dispatchErrors.Inc()
			unpublishable[i] = "tock could not encode the execution's message: " + err.Error()
			continue
		}
		subject := w.Subject()
		if e.Batched() && len(body) <= wire.MaxBatchMemberBytes && d.cfg.Forms != nil {
			form, known := d.cfg.Forms.BatchForm(subject)
			if !known {
				continue
			}
			if form {
				if spans != nil {
					carrier := nats.NewMsg(subject)
					if spans[i] = d.startSpan(ctx, e, carrier); spans[i].IsRecording() {
						w.Traceparent = carrier.Header.Get("traceparent")
						body, _ = w.Body() // encoded once already
					}
				}
				if open == nil {
					open, bodies = map[batchKey]int{}, map[int][][]byte{}
				}
				k := batchKey{e.Batch, subject}
				j, ok := open[k]
				if !ok {
					j = len(msgs)
					open[k] = j
					msgs = append(msgs, outMsg{id: wire.BatchMsgID(e.Batch.String(), subject), subject: subject})
				}
				msgs[j].members = append(msgs[j].members, i)
				bodies[j] = append(bodies[j], body)
				continue
			}
		}
		msg := w.MsgWithBody(body)
		if spans != nil {
			spans[i] = d.startSpan(ctx, e, msg)
		}
		msgs = append(msgs, outMsg{members: []int{i}, msg: msg, id: w.MsgID()})
	}
	for j, b := range bodies {
		msgs[j].msg = wire.BatchMsg(msgs[j].subject, b)
	}
	return msgs, unpublishable
}

// startSpan starts e's publish span, a child of its firing's span if it
// has one (else a root in the execution's trace), and writes the span's
// context into msg's headers when it is sampled.
func (d *Dispatcher) startSpan(ctx context.Context, e *model.Execution, msg *nats.Msg) trace.Span {
	if e.Fired.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, e.Fired)
	} else {
		ctx = telemetry.ForExecution(ctx, e.ID)
	}
	ctx, span := d.cfg.Tracer.Start(ctx, telemetry.SpanPublish, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(telemetry.AttrExecutionID, e.ID.String()),
			attribute.String(telemetry.AttrJobID, e.JobID.String()),
			attribute.Int(telemetry.AttrDispatch, e.Dispatches),
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", msg.Subject))
		telemetry.Inject(ctx, msg.Header)
	}
	return span
}

// queued tells the change feed of the executions of batch that JetStream
// took: they wait for an executor. The change is published after the
// acks, so an executor's report of the start can reach the feed first;
// its time, sent, is from before the publish, so that ordering an
// execution's changes by time puts it first.
func (d *Dispatcher) queued(batch []*model.Execution, ok []bool, now time.Time) {
	if d.cfg.Changes == nil {
		return
	}
	feed := make([]changes.Change, 0, len(batch))
	for i, e := range batch {
		if ok[i] {
			feed = append(feed, changes.Change{Kind: changes.KindExecution, Namespace: e.Namespace, JobID: e.JobID.String(),
				ExecutionID: e.ID.String(), State: string(domain.ExecQueued), Attempt: e.Attempts, At: now})
		}
	}
	d.cfg.Changes.Publish(feed...)
}

// tooLarge reports whether a publish failed for good because its message
// is larger than the NATS server or the stream takes.
func tooLarge(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum)
}

func tooLargeError(size int) string {
	return fmt.Sprintf("the execution's message is %d bytes, more than the NATS server accepts (its max_payload): "+
		"it cannot be published; make the job's payload smaller", size)
}

// fail records each execution of batch that can never be published (the
// index of unpublishable, with why) as a final failure of its next
// attempt, which makes it dead and takes it out of the outbox; ok is set
// for those recorded, so that done forgets them and their buckets'
// publish positions move past them. Without a Failer, or if recording
// fails, they stay as any failed publish: published again later.
func (d *Dispatcher) fail(ctx context.Context, batch []*model.Execution, unpublishable map[int]string, ok []bool) {
	if len(unpublishable) == 0 || d.cfg.Failer == nil {
		return
	}
	idx := make([]int, 0, len(unpublishable))
	evs := make([]model.AttemptEvent, 0, len(unpublishable))
	at := d.cfg.Clock.Passed()
	for i, why := range unpublishable {
		e := batch[i]
		idx = append(idx, i)
		evs = append(evs, model.AttemptEvent{ID: e.ID, Attempt: e.Attempts + 1, Executor: FailedBy, At: at,
			Type: domain.EventFailed, Final: true, Error: why, Dispatch: e.Dispatches})
	}
	// Like marking, this must survive our own shutdown.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	results, err := d.cfg.Failer.RecordAttemptEvents(fctx, evs)
	if err != nil {
		d.log.Warn("record unpublishable executions", "count", len(evs), "err", err)
		return
	}
	for k, i := range idx {
		if results[k] != nil && !errors.Is(results[k], store.ErrNotFound) {
			d.log.Warn("record unpublishable execution", "execution_id", batch[i].ID, "err", results[k])
			continue
		}
		d.log.Error("execution cannot be published: recorded as dead", "execution_id", batch[i].ID,
			"job_id", batch[i].JobID, "err", evs[k].Error)
		d.m.unpublishableTotal.Inc()
		ok[i] = true
	}
}

// store writes publish positions that moved. A failed write only leaves
// a position behind: a later batch writes a newer one.
func (d *Dispatcher) store(ctx context.Context, pos map[int]time.Time) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Store.AdvancePublishPositions(sctx, pos); err != nil {
		d.log.Warn("advance publish positions", "buckets", len(pos), "err", err)
		return
	}
	d.mu.Lock()
	for b, t := range pos {
		if t.After(d.stored[b]) {
			d.stored[b] = t
		}
	}
	d.mu.Unlock()
}

// Wire is the message body of e's dispatch e.Dispatches: attempts
// continue from e.Attempts.
func Wire(e *model.Execution) *wire.Execution {
	return &wire.Execution{
		ExecutionID:  e.ID.String(),
		JobID:        e.JobID.String(),
		Namespace:    e.Namespace,
		JobName:      e.JobName,
		ScheduledFor: e.ScheduledFor,
		Handler:      e.Handler,
		Payload:      e.Payload,
		TimeoutMS:    e.Timeout.Milliseconds(),
		Retry:        e.Retry,
		Priority:     e.Priority,
		AttemptBase:  e.Attempts,
		SeriesBase:   e.SeriesBase,
		Dispatch:     e.Dispatches,
	}
}

// item is an execution waiting in pending, or a batch's members, to be
// published at at: their due time, or later after a failed publish.
type item struct {
	es []*model.Execution
	at time.Time
}

// execHeap orders waiting executions by publish time.
type execHeap []item

func (h execHeap) Len() int           { return len(h) }
func (h execHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h execHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *execHeap) Push(x any)        { *h = append(*h, x.(item)) }

// dueBy counts the executions of the items at or before t in the
// subtree at i: a node later than t has no earlier child, so only the due
// items (and their children) are visited.
func (h execHeap) dueBy(i int, t time.Time) int {
	if i >= len(h) || h[i].at.After(t) {
		return 0
	}
	return len(h[i].es) + h.dueBy(2*i+1, t) + h.dueBy(2*i+2, t)
}

func (h *execHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = item{}
	*h = old[:len(old)-1]
	return e
}
