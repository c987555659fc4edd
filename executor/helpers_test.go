package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor is how long a test waits for something that should happen at
// once on an idle machine.
const waitFor = 15 * time.Second

type env struct {
	t   *testing.T
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	n := testenv.NATS(t)
	e := &env{t: t, url: n.URL()}
	e.nc = e.connect()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	e.js = js
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	// tockd makes the logs' stream; an executor publishes into it.
	if err := wire.EnsureLogStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) connect() *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// worker returns a Worker on nc with test settings: no jitter randomness
// (rand 0.5), a short shutdown timeout.
func (e *env) worker(nc *nats.Conn, id string) *Worker {
	e.t.Helper()
	w, err := New(Config{NATS: nc, ExecutorID: id, Concurrency: 4, ShutdownTimeout: 2 * time.Second, StartReportDelay: -1, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	w.rand = func() float64 { return 0.5 }
	return w
}

// run runs w until the test ends and checks that Run returns nil; the
// returned func stops it early and returns Run's error.
func (e *env) run(w *Worker) (stop func() error) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return 30s after cancel")
			}
		})
		return err
	}
	e.t.Cleanup(func() {
		if err := stop(); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	return stop
}

// execution returns a new execution for the custom handler queue.
func execution(queue string) wire.Execution {
	return wire.Execution{
		ExecutionID:  uuid.NewString(),
		JobID:        uuid.NewString(),
		Namespace:    "default",
		JobName:      "job-" + queue,
		ScheduledFor: time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC),
		Handler:      domain.Handler{Type: domain.HandlerCustom, Name: queue},
		Payload:      json.RawMessage(`{"to":"a@example.com"}`),
	}
}

func (e *env) publish(ex wire.Execution) {
	e.t.Helper()
	data, err := json.Marshal(ex)
	if err != nil {
		e.t.Fatal(err)
	}
	e.publishRaw(wire.ExecSubject(ex.Handler.Queue(), ex.Priority), data, wire.ExecMsgID(ex.ExecutionID, ex.Dispatch))
}

// republish does what tock does with a failed event that is not final,
// or a deferred event: it publishes the execution again (at once, not
// after ev.RetryInMS) as the next dispatch, and returns what it published.
// A deferral did not count as an attempt; a failure did.
func (e *env) republish(ex wire.Execution, ev wire.Event) wire.Execution {
	e.t.Helper()
	switch {
	case ev.Type == domain.EventDeferred:
		ex.AttemptBase = ev.Attempt - 1
	case ev.Type == domain.EventFailed && !ev.Final:
		ex.AttemptBase = ev.Attempt
	default:
		e.t.Fatalf("tock does not publish again after a %s event (final %v)", ev.Type, ev.Final)
	}
	ex.Dispatch = ev.Dispatch + 1
	e.publish(ex)
	return ex
}

func (e *env) publishRaw(subject string, data []byte, msgID string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := e.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		e.t.Fatal(err)
	}
}

// events reads the event stream from its start, in order.
type events struct {
	t      *testing.T
	it     jetstream.MessagesContext
	queued []wire.Event // the rest of a batch message
}

func (e *env) events() *events {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := e.js.OrderedConsumer(ctx, wire.EventStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	it, err := c.Messages()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(it.Stop)
	return &events{t: e.t, it: it}
}

// next returns the next event, checking its subject and Nats-Msg-Id.
func (r *events) next() wire.Event {
	r.t.Helper()
	if len(r.queued) > 0 {
		ev := r.queued[0]
		r.queued = r.queued[1:]
		return ev
	}
	m, err := r.it.Next(jetstream.NextMaxWait(waitFor))
	if err != nil {
		r.t.Fatalf("next event: %v", err)
	}
	if m.Subject() == wire.EventBatchSubject {
		// Several events in one message, in the order they were sent.
		if err := json.Unmarshal(m.Data(), &r.queued); err != nil || len(r.queued) == 0 {
			r.t.Fatalf("decode event batch %s: %v", m.Data(), err)
		}
		return r.next()
	}
	var ev wire.Event
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		r.t.Fatalf("decode event %s: %v", m.Data(), err)
	}
	if want := wire.EventSubjectPrefix + string(ev.Type); m.Subject() != want {
		r.t.Errorf("event subject %s, want %s", m.Subject(), want)
	}
	if got := m.Headers().Get(jetstream.MsgIDHeader); got != ev.MsgID() {
		r.t.Errorf("event Nats-Msg-Id %q, want %q", got, ev.MsgID())
	}
	return ev
}

// expect reads the next event and checks its type, attempt and finality.
func (r *events) expect(ex wire.Execution, typ domain.EventType, attempt int, final bool) wire.Event {
	r.t.Helper()
	ev := r.next()
	if ev.Type != typ || ev.Attempt != attempt || ev.Final != final || ev.ExecutionID != ex.ExecutionID {
		r.t.Fatalf("event = %s attempt %d final %v for %s (error %q), want %s attempt %d final %v for %s",
			ev.Type, ev.Attempt, ev.Final, ev.ExecutionID, ev.Error, typ, attempt, final, ex.ExecutionID)
	}
	if !ev.ScheduledFor.Equal(ex.ScheduledFor) {
		r.t.Errorf("event scheduled_for %v, want %v", ev.ScheduledFor, ex.ScheduledFor)
	}
	if ev.At.IsZero() {
		r.t.Error("event without at")
	}
	return ev
}

// none checks that no further event arrives within d.
func (r *events) none(d time.Duration) {
	r.t.Helper()
	if m, err := r.it.Next(jetstream.NextMaxWait(d)); err == nil {
		r.t.Fatalf("unexpected event %s", m.Data())
	}
}

// settled waits until queue's consumers hold no message, delivered or
// not, and the execution stream is empty: every execution was acked or
// terminated.
func (e *env) settled(queue string) {
	e.t.Helper()
	var last string
	ok := waitUntil(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		for _, p := range domain.Priorities {
			c, err := e.js.Consumer(ctx, wire.ExecStream, wire.ConsumerName(queue, p))
			if err != nil {
				last = err.Error()
				return false
			}
			info := c.CachedInfo()
			if info.NumAckPending != 0 || info.NumPending != 0 {
				last = fmt.Sprintf("consumer %s: %d ack pending, %d pending", info.Name, info.NumAckPending, info.NumPending)
				return false
			}
		}
		s, err := e.js.Stream(ctx, wire.ExecStream)
		if err != nil {
			last = err.Error()
			return false
		}
		if n := s.CachedInfo().State.Msgs; n != 0 {
			last = fmt.Sprintf("stream holds %d messages", n)
			return false
		}
		return true
	})
	if !ok {
		e.t.Fatalf("queue %s not settled: %s", queue, last)
	}
}

// waitUntil polls cond until it holds or waitFor passes, and reports
// whether it held.
func waitUntil(cond func() bool) bool {
	deadline := time.Now().Add(waitFor)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on c.
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitFor):
		t.Fatal("timed out waiting")
		panic("unreachable")
	}
}
