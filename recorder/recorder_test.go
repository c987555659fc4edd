package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitFor = 15 * time.Second

// The Postgres store is what tockd records into.
var _ Store = (*store.Store)(nil)

// call is one event as the fake store saw it.
type call struct {
	Kind     string // the event's type, or the attempt outcome of an end event
	ID       uuid.UUID
	Attempt  int
	Executor string
	At       time.Time
	Outcome  domain.Outcome
	Final    bool
	Err      string
	Output   string
	RetryIn  time.Duration
	Dispatch int
	Started  bool // StartedAt is set
}

func (c call) String() string {
	switch c.Kind {
	case "started", "heartbeat":
		return fmt.Sprintf("%s %d by %s", c.Kind, c.Attempt, c.Executor)
	case "deferred":
		return fmt.Sprintf("deferred %d by %s retry=%s dispatch=%d", c.Attempt, c.Executor, c.RetryIn, c.Dispatch)
	}
	s := fmt.Sprintf("%s %d by %s final=%v err=%q out=%q", c.Outcome, c.Attempt, c.Executor, c.Final, c.Err, c.Output)
	if c.RetryIn != 0 || c.Dispatch != 0 || c.Started {
		s += fmt.Sprintf(" retry=%s dispatch=%d started=%v", c.RetryIn, c.Dispatch, c.Started)
	}
	return s
}

// fakeStore records calls; fail makes the next n calls fail.
type fakeStore struct {
	mu    sync.Mutex
	calls []call
	fails int
	seen  chan call
}

func newFakeStore() *fakeStore { return &fakeStore{seen: make(chan call, 100)} }

func (s *fakeStore) add(c call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errors.New("postgres is down")
	}
	s.calls = append(s.calls, c)
	s.seen <- c
	return nil
}

// RecordAttemptEvents records the batch as calls, in order; a failure fails the
// whole batch, like a rolled-back transaction.
func (s *fakeStore) RecordAttemptEvents(_ context.Context, evs []model.AttemptEvent) ([]error, error) {
	s.mu.Lock()
	if s.fails > 0 {
		s.fails--
		s.mu.Unlock()
		return nil, errors.New("postgres is down")
	}
	s.mu.Unlock()
	for _, ev := range evs {
		c := call{Kind: string(ev.Type), ID: ev.ID, Attempt: ev.Attempt, Executor: ev.Executor, At: ev.At,
			Outcome: ev.Outcome(), Final: ev.Final, Err: ev.Error, Output: ev.Output, RetryIn: ev.RetryIn,
			Dispatch: ev.Dispatch, Started: ev.StartedAt != nil}
		if c.Outcome != "" {
			c.Kind = string(c.Outcome)
		}
		_ = s.add(c)
	}
	return make([]error, len(evs)), nil
}

func (s *fakeStore) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-s.seen:
		return c
	case <-time.After(waitFor):
		t.Fatal("timed out waiting for a store call")
		return call{}
	}
}

func (s *fakeStore) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case c := <-s.seen:
		t.Fatalf("unexpected store call %v", c)
	case <-time.After(d):
	}
}

type env struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	n := testenv.NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, js: js}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// run runs r until the test ends.
func (e *env) run(r *Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				e.t.Errorf("Run: %v", err)
			}
		case <-time.After(waitFor):
			e.t.Error("Run did not return after cancel")
		}
	})
}

func (e *env) publish(ev wire.Event) {
	e.t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	e.publishRaw(ev.Subject(), data, ev.MsgID())
}

func (e *env) publishRaw(subject string, data []byte, id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := e.js.Publish(ctx, subject, data, jetstream.WithMsgID(id)); err != nil {
		e.t.Fatal(err)
	}
}

// settled waits until the recorder's consumer has nothing pending.
func (e *env) settled() {
	e.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		var info *jetstream.ConsumerInfo
		c, err := e.js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
		if err == nil {
			info, err = c.Info(ctx)
		}
		cancel()
		if err == nil && info.NumAckPending == 0 && info.NumPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("recorder consumer not settled: %v %+v", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRecordsEventsInOrder(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet()}))

	id := uuid.New()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(typ domain.EventType, attempt int, final bool, errMsg, out string) wire.Event {
		return wire.Event{Type: typ, ExecutionID: id.String(), Attempt: attempt, ExecutorID: "x1",
			At: at.Add(time.Duration(attempt) * time.Second), ScheduledFor: at, Final: final, Error: errMsg, Output: out}
	}
	failed := ev(domain.EventFailed, 1, false, "boom", "partial")
	failed.RetryInMS = 1500
	started2 := ev(domain.EventStarted, 2, false, "", "")
	started2.Dispatch = 1
	timedOut := ev(domain.EventFailed, 2, true, "boom again", "")
	timedOut.TimedOut, timedOut.Dispatch = true, 1
	deferred := ev(domain.EventDeferred, 3, false, "", "")
	deferred.RetryInMS, deferred.Dispatch, deferred.Handler = 250, 2, "custom-x"
	beat := ev(domain.EventHeartbeat, 3, false, "", "")
	beat.Seq, beat.Dispatch = 1, 3
	succeeded := ev(domain.EventSucceeded, 3, false, "", "done")
	succeeded.Dispatch = 3
	cancelled := ev(domain.EventCancelled, 4, false, "cancelled by the API", "")
	cancelled.StartedAt = &at
	events := []wire.Event{
		ev(domain.EventStarted, 1, false, "", ""), failed, started2, timedOut, deferred, beat, succeeded, cancelled,
	}
	for _, x := range events {
		e.publish(x)
	}
	want := []string{
		`started 1 by x1`,
		`failed 1 by x1 final=false err="boom" out="partial" retry=1.5s dispatch=0 started=false`,
		`started 2 by x1`,
		`timed_out 2 by x1 final=true err="boom again" out="" retry=0s dispatch=1 started=false`,
		`deferred 3 by x1 retry=250ms dispatch=2`,
		`heartbeat 3 by x1`,
		`succeeded 3 by x1 final=true err="" out="done" retry=0s dispatch=3 started=false`,
		`cancelled 4 by x1 final=false err="cancelled by the API" out="" retry=0s dispatch=0 started=true`,
	}
	for i, w := range want {
		c := st.next(t)
		if c.String() != w || c.ID != id {
			t.Errorf("call %d = %v for %s, want %s for %s", i, c, c.ID, w, id)
		}
		if wantAt := at.Add(time.Duration(c.Attempt) * time.Second); !c.At.Equal(wantAt) {
			t.Errorf("call %d at %v, want %v", i, c.At, wantAt)
		}
		if i == 2 && c.Dispatch != 1 {
			t.Errorf("call %d dispatch %d, want 1", i, c.Dispatch)
		}
	}
	e.settled()
	st.none(t, 200*time.Millisecond)
}

func TestRetriesFailedWrites(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	st.fails = 2
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet(), RetryDelay: 50 * time.Millisecond}))

	id := uuid.New()
	e.publish(wire.Event{Type: domain.EventStarted, ExecutionID: id.String(), Attempt: 1, ExecutorID: "x1", At: time.Now()})
	if c := st.next(t); c.Kind != "started" || c.ID != id {
		t.Errorf("call = %v", c)
	}
	e.settled()
}

func TestDropsEventsOfUnknownExecutions(t *testing.T) {
	e := newEnv(t)
	st := &notFoundStore{fakeStore: newFakeStore()}
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet(), UnknownGrace: -1}))
	gone := wire.Event{Type: domain.EventStarted, ExecutionID: uuid.NewString(), Attempt: 1, ExecutorID: "x1", At: time.Now()}
	e.publish(gone)
	e.settled()
	if n := st.calls.Load(); n != 1 {
		t.Errorf("store called %d times for an unknown execution, want 1", n)
	}
}

// An event for an execution the store does not hold yet (its firing was
// lost with a failover and fired again under the same id) is delivered
// again until the row is there; one still unknown after UnknownGrace is
// dropped.
func TestKeepsEventsOfUnknownExecutionsAWhile(t *testing.T) {
	e := newEnv(t)
	st := &notFoundStore{fakeStore: newFakeStore()}
	st.known.Store(3) // known from the third call on
	dl := &deadLetters{}
	r := mustNew(t, Config{JS: e.js, Store: st, Logger: quiet(), RetryDelay: 50 * time.Millisecond, UnknownGrace: 2 * time.Second,
		DeadLetters: dl})
	e.run(r)
	late := uuid.New()
	e.publish(wire.Event{Type: domain.EventSucceeded, ExecutionID: late.String(), Attempt: 1, ExecutorID: "x1", At: time.Now()})
	if c := st.next(t); c.Kind != "succeeded" || c.ID != late {
		t.Errorf("recorded %v, want the succeeded event of %s", c, late)
	}
	e.settled()
	if n := st.calls.Load(); n != 3 {
		t.Errorf("store called %d times, want 3 (twice unknown, then recorded)", n)
	}

	st.calls.Store(0)
	st.known.Store(1000) // never
	start := time.Now()
	e.publish(wire.Event{Type: domain.EventStarted, ExecutionID: uuid.NewString(), Attempt: 1, ExecutorID: "x1", At: time.Now()})
	time.Sleep(500 * time.Millisecond)
	e.settled()
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("an unknown execution's event was dropped after %v, before the grace of 2 s", took)
	}
	if n := st.calls.Load(); n < 2 {
		t.Errorf("store called %d times for an event kept 2 s, want it delivered again", n)
	}
	// Kept for an operator, not dropped: a dead event naming the
	// execution, counted.
	got := dl.all()
	if len(got) != 1 || got[0].Reason != ReasonUnknown || got[0].ExecutionID == nil || got[0].Type != "started" ||
		got[0].Attempt == nil || *got[0].Attempt != 1 || len(got[0].Event) == 0 {
		t.Errorf("dead events %+v, want the started event of the unknown execution", got)
	}
	if n := testutil.ToFloat64(r.m.deadEvents.WithLabelValues("unknown_execution")); n != 1 {
		t.Errorf("tock_dead_events_total{reason=unknown_execution} = %v, want 1", n)
	}
}

// An event that is not valid (here, attempt 0) is kept as a dead event
// too, with what it said and why, and the valid events of its batch are
// recorded.
func TestKeepsInvalidEventsAsDead(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	dl := &deadLetters{}
	r := mustNew(t, Config{JS: e.js, Store: st, Logger: quiet(), DeadLetters: dl})
	e.run(r)
	good, bad := uuid.New(), uuid.New()
	data, err := json.Marshal([]wire.Event{
		{Type: domain.EventStarted, ExecutionID: bad.String(), Attempt: 0, ExecutorID: "x1", At: time.Now(), Namespace: "ns1"},
		{Type: domain.EventSucceeded, ExecutionID: good.String(), Attempt: 1, ExecutorID: "x1", At: time.Now()},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.publishRaw(wire.EventBatchSubject, data, "batch-with-an-invalid-event")
	if c := st.next(t); c.ID != good {
		t.Errorf("recorded %v, want the valid event of %s", c, good)
	}
	e.settled()
	got := dl.all()
	if len(got) != 1 || got[0].ExecutionID == nil || *got[0].ExecutionID != bad || got[0].Namespace != "ns1" ||
		!strings.HasPrefix(got[0].Reason, "invalid: ") {
		t.Errorf("dead events %+v, want the invalid event of %s", got, bad)
	}
	if n := testutil.ToFloat64(r.m.deadEvents.WithLabelValues("invalid")); n != 1 {
		t.Errorf("tock_dead_events_total{reason=invalid} = %v, want 1", n)
	}
}

// deadLetters keeps what it is given.
type deadLetters struct {
	mu   sync.Mutex
	kept []model.DeadEvent
}

func (d *deadLetters) RecordDeadEvents(_ context.Context, evs []model.DeadEvent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kept = append(d.kept, evs...)
	return nil
}

func (d *deadLetters) all() []model.DeadEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.kept)
}

// notFoundStore answers ErrNotFound for every event, or, with known set,
// until its known-th call, then records them.
type notFoundStore struct {
	*fakeStore
	calls atomic.Int32
	known atomic.Int32
}

func (s *notFoundStore) RecordAttemptEvents(ctx context.Context, evs []model.AttemptEvent) ([]error, error) {
	res := make([]error, len(evs))
	for i, ev := range evs {
		if n, k := s.calls.Add(1), s.known.Load(); k > 0 && n >= k {
			return s.fakeStore.RecordAttemptEvents(ctx, evs)
		}
		res[i] = fmt.Errorf("store: execution %s: %w", ev.ID, store.ErrNotFound)
	}
	return res, nil
}

func TestDropsBadEvents(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet()}))

	e.publishRaw(wire.EventSubjectPrefix+"started", []byte("{oops"), "bad-1")
	e.publishRaw(wire.EventSubjectPrefix+"started", []byte(`{"type":"started","execution_id":"not-a-uuid","attempt":1}`), "bad-2")
	e.publishRaw(wire.EventSubjectPrefix+"started", []byte(`{"type":"started","execution_id":"`+uuid.NewString()+`","attempt":0}`), "bad-3")
	e.publishRaw(wire.EventSubjectPrefix+"exploded", []byte(`{"type":"exploded","execution_id":"`+uuid.NewString()+`","attempt":1}`), "bad-4")
	good := wire.Event{Type: domain.EventStarted, ExecutionID: uuid.NewString(), Attempt: 1, ExecutorID: "x1", At: time.Now()}
	e.publish(good)
	if c := st.next(t); c.ID.String() != good.ExecutionID {
		t.Errorf("call = %v for %s, want the good event", c, c.ID)
	}
	e.settled()
	st.none(t, 200*time.Millisecond)
}

// End to end: an executor's events for a retried execution reach the
// Store in order.
func TestRecordsExecutorEvents(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet()}))

	w, err := executor.New(executor.Config{NATS: e.nc, ExecutorID: "exec-1", StartReportDelay: -1, ShutdownTimeout: time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("flaky", func(ctx context.Context, x *executor.Execution) (string, error) {
		if x.Attempt == 1 {
			return "", errors.New("first try fails")
		}
		return "ok", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("executor Run: %v", err)
		}
	}()

	id := uuid.New()
	ex := wire.Execution{
		ExecutionID: id.String(), JobID: uuid.NewString(), ScheduledFor: time.Now().UTC().Truncate(time.Millisecond),
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "flaky"},
		Retry:   domain.RetryPolicy{MaxAttempts: 3, InitialBackoff: "10ms"},
	}
	data, _ := json.Marshal(ex)
	pctx, pcancel := context.WithTimeout(context.Background(), waitFor)
	defer pcancel()
	// The recorder created the streams; wait for them before publishing.
	for {
		if _, err := e.js.Stream(pctx, wire.ExecStream); err == nil {
			break
		} else if pctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.js.Publish(pctx, wire.ExecSubject(ex.Handler.Queue(), ex.Priority), data, jetstream.WithMsgID(ex.ExecutionID)); err != nil {
		t.Fatal(err)
	}
	if c := st.next(t); c.String() != "started 1 by exec-1" || c.ID != id {
		t.Fatalf("first call %v, want the start of attempt 1", c)
	}
	c := st.next(t)
	if c.Kind != string(domain.OutcomeFailed) || c.Attempt != 1 || c.Final || c.Err != "first try fails" || c.Dispatch != 0 || c.RetryIn < 0 {
		t.Fatalf("second call %v, want attempt 1's failure with a retry", c)
	}
	// tock re-publishes the execution from Postgres after the backoff: the
	// next dispatch, attempts going on from 1.
	ex.AttemptBase, ex.Dispatch = 1, 1
	data, _ = json.Marshal(ex)
	if _, err := e.js.Publish(pctx, wire.ExecSubject(ex.Handler.Queue(), ex.Priority), data,
		jetstream.WithMsgID(wire.ExecMsgID(ex.ExecutionID, 1))); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`started 2 by exec-1`,
		`succeeded 2 by exec-1 final=true err="" out="ok" retry=0s dispatch=1 started=false`,
	}
	for i, w := range want {
		if c := st.next(t); c.String() != w || c.ID != id || c.Dispatch != 1 {
			t.Errorf("call %d = %v (dispatch %d), want %s of dispatch 1", i, c, c.Dispatch, w)
		}
	}
}

// counters reads tock_retries_total, tock_dead_letters_total and
// tock_deferred_total from reg.
func counters(t *testing.T, reg prometheus.Gatherer) []float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"tock_retries_total", "tock_dead_letters_total", "tock_deferred_total"}
	out := make([]float64, len(names))
	for _, f := range families {
		for i, n := range names {
			if f.GetName() == n {
				out[i] = f.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestCountsRetriesDeadLettersAndDeferrals(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	before := counters(t, reg)
	for _, ev := range []model.AttemptEvent{
		{Type: domain.EventFailed},
		{Type: domain.EventFailed, TimedOut: true},
		{Type: domain.EventFailed, Final: true},
		{Type: domain.EventDeferred},
		{Type: domain.EventSucceeded, Final: true},
		{Type: domain.EventHeartbeat},
		{Type: domain.EventCancelled},
	} {
		m.count(ev)
	}
	after := counters(t, reg)
	if d := []float64{after[0] - before[0], after[1] - before[1], after[2] - before[2]}; d[0] != 2 || d[1] != 1 || d[2] != 1 {
		t.Fatalf("retries, dead letters, deferrals counted %v, want [2 1 1]", d)
	}
}

func TestStartsOnceNATSIsBack(t *testing.T) {
	n := testenv.NATS(t)
	n.Stop() // NATS is down when the recorder starts
	nc, err := nats.Connect(n.URL(), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nc: nc, js: js}
	st := newFakeStore()
	e.run(mustNew(t, Config{JS: js, Store: st, Logger: quiet()})) // Run must keep trying, not fail

	time.Sleep(300 * time.Millisecond) // a few failed set-ups
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, waitFor, "the recorder's consumer created", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
		return err == nil
	})
	id := uuid.New()
	e.publish(wire.Event{Type: domain.EventStarted, ExecutionID: id.String(), Attempt: 1, ExecutorID: "x1",
		At: time.Now(), ScheduledFor: time.Now()})
	if c := st.next(t); c.ID != id || c.Kind != "started" {
		t.Errorf("recorded %v", c)
	}
}

// Events sent together on tock.events.batch are recorded in their order,
// an invalid one among them is dropped alone, and the message is acked.
func TestRecordsEventBatches(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet()}))
	id := uuid.NewString()
	now := time.Now().UTC()
	evs := []wire.Event{
		{Type: domain.EventStarted, ExecutionID: id, Attempt: 1, ExecutorID: "x1", At: now},
		{Type: domain.EventStarted, ExecutionID: "not-a-uuid", Attempt: 1, ExecutorID: "x1", At: now},
		{Type: domain.EventSucceeded, ExecutionID: id, Attempt: 1, ExecutorID: "x1", At: now, Output: "ok"},
	}
	data, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	e.publishRaw(wire.EventBatchSubject, data, "batch-1")
	if c := st.next(t); c.ID.String() != id || c.Kind != "started" {
		t.Fatalf("first call %v, want the start", c)
	}
	if c := st.next(t); c.ID.String() != id || c.Outcome != domain.OutcomeSucceeded || c.Output != "ok" {
		t.Fatalf("second call %v, want the success", c)
	}
	e.settled()
	st.none(t, 200*time.Millisecond)
}

// mustNew is New that fails t on an error.
func mustNew(t *testing.T, cfg Config) *Recorder {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPublishesChanges: once it has recorded them, the recorder tells the
// change feed each execution's new state, filed under the namespace the
// executor reported (a heartbeat changes nothing; an event without a
// namespace is recorded but not in the feed).
func TestPublishesChanges(t *testing.T) {
	e := newEnv(t)
	st := newFakeStore()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := wire.EnsureChangeStream(ctx, e.js, 1); err != nil {
		t.Fatal(err)
	}
	feed := changes.NewFeed(e.js, quiet())
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet(), Changes: feed.Publisher()}))

	id, job := uuid.NewString(), uuid.NewString()
	now := time.Now().UTC()
	evs := []wire.Event{
		{Type: domain.EventStarted, ExecutionID: id, Attempt: 1, ExecutorID: "x1", At: now, Namespace: "pay.ments", JobID: job},
		{Type: domain.EventHeartbeat, ExecutionID: id, Attempt: 1, ExecutorID: "x1", At: now, Seq: 1, Namespace: "pay.ments", JobID: job},
		{Type: domain.EventFailed, ExecutionID: id, Attempt: 1, ExecutorID: "x1", At: now, Final: true, Error: "boom", Namespace: "pay.ments", JobID: job},
		{Type: domain.EventSucceeded, ExecutionID: uuid.NewString(), Attempt: 1, ExecutorID: "x1", At: now}, // no namespace
	}
	data, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	e.publishRaw(wire.EventBatchSubject, data, "batch-changes")
	for range 4 {
		st.next(t) // recorded
	}
	// The feed's stream holds one batch, of pay.ments.
	var got []changes.Change
	testenv.WaitFor(t, waitFor, "the batch in the change feed", func() bool {
		s, err := e.js.Stream(ctx, wire.ChangeStream)
		if err != nil {
			return false
		}
		msg, err := s.GetLastMsgForSubject(ctx, changes.Subject("pay.ments", changes.KindExecution))
		if err != nil {
			return false
		}
		return json.Unmarshal(msg.Data, &got) == nil
	})
	var states []string
	for _, c := range got {
		if c.ExecutionID != id || c.JobID != job || c.Kind != changes.KindExecution || c.Namespace != "pay.ments" {
			t.Errorf("change %+v, want execution %s of job %s in pay.ments", c, id, job)
		}
		states = append(states, fmt.Sprintf("%s/%d", c.State, c.Attempt))
	}
	if want := []string{"running/1", "dead/1"}; !slices.Equal(states, want) {
		t.Errorf("changes %v, want %v", states, want)
	}
	s, err := e.js.Stream(ctx, wire.ChangeStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("the feed holds %d messages, want 1 (the event without a namespace is not in it)", n)
	}
}

// The start lag is observed once per execution, at its first attempt's
// start: the started event, or the end that carries the start.
func TestStartLagFromTheFirstAttempt(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	id := domain.ExecutionID(uuid.New(), at)
	started := at.Add(2 * time.Second)
	for _, ev := range []model.AttemptEvent{
		{ID: id, Type: domain.EventStarted, Attempt: 1, At: started},                                     // 2 s
		{ID: id, Type: domain.EventSucceeded, Attempt: 1, At: started.Add(time.Second), Final: true},     // its end: no start
		{ID: id, Type: domain.EventSucceeded, Attempt: 1, At: started, StartedAt: &started, Final: true}, // 2 s
		{ID: id, Type: domain.EventStarted, Attempt: 2, At: started.Add(time.Minute)},                    // a retry
		{ID: id, Type: domain.EventStarted, Attempt: 1, Dispatch: 1, At: started.Add(time.Minute)},       // a deferral's
		{ID: id, Type: domain.EventCancelled, Attempt: 1, At: started, StartedAt: &started},
		{ID: id, Type: domain.EventHeartbeat, Attempt: 1, At: started},
	} {
		m.count(ev)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "tock_start_lag_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 3 || h.GetSampleSum() != 66 {
				t.Fatalf("start lag: %d samples summing to %v s, want 2, 2 and 62 s", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("no tock_start_lag_seconds")
}
