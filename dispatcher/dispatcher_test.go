package dispatcher

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/executor/wire"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
)

type marks struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (m *marks) MarkDispatched(_ context.Context, ids []uuid.UUID, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = append(m.ids, ids...)
	return nil
}

func (m *marks) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids)
}

// runDispatcher runs a dispatcher with cfg on a fresh embedded NATS until
// the test ends, marking into the returned marks.
func runDispatcher(t *testing.T, cfg Config) (*Dispatcher, jetstream.JetStream, *marks) {
	t.Helper()
	nc, err := nats.Connect(testenv.NATS(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	m := &marks{}
	cfg.JS, cfg.Store = js, m
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, js, m
}

func TestPublishesOncePerExecutionAndMarksAcked(t *testing.T) {
	ctx := context.Background()
	d, js, m := runDispatcher(t, Config{BatchSize: 7})

	job := uuid.New()
	base := time.Now().Truncate(time.Second).UTC().Add(-time.Minute)
	var execs []*store.Execution
	for i := range 50 {
		at := base.Add(time.Duration(i) * time.Second)
		execs = append(execs, &store.Execution{
			ID: store.ExecutionID(job, at), JobID: job, ScheduledFor: at, JobName: "j", Namespace: "default",
			Handler: wire.Handler{Type: wire.HandlerCustom, Name: "disp"}, Payload: json.RawMessage(`{"i":1}`),
		})
	}
	d.Dispatch(ctx, execs)
	testenv.WaitFor(t, 10*time.Second, "50 executions marked dispatched", func() bool { return m.count() == 50 })
	// The outbox hands them again (a crash before marking, say): JetStream
	// drops the duplicates by Nats-Msg-Id, and they are marked again.
	d.Dispatch(ctx, execs[:10])
	testenv.WaitFor(t, 10*time.Second, "re-dispatched executions marked", func() bool { return m.count() == 60 })

	stream, err := js.Stream(ctx, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(ctx)
	if info.State.Msgs != 50 {
		t.Fatalf("stream holds %d messages, want 50 (one per execution)", info.State.Msgs)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var body wire.Execution
	if err := json.Unmarshal(msg.Data, &body); err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "tock.exec.disp" || msg.Header.Get(jetstream.MsgIDHeader) != body.ExecutionID ||
		msg.Header.Get(wire.HeaderExecutionID) != body.ExecutionID || body.JobID != job.String() {
		t.Fatalf("message %s %v %+v", msg.Subject, msg.Header, body)
	}
}

// An execution fired ahead of its time is published at its time, not
// before.
func TestPublishesNothingBeforeItsTime(t *testing.T) {
	ctx := context.Background()
	d, js, m := runDispatcher(t, Config{})

	due := time.Now().Add(700 * time.Millisecond)
	job := uuid.New()
	d.Dispatch(ctx, []*store.Execution{{ID: store.ExecutionID(job, due), JobID: job, ScheduledFor: due,
		Handler: wire.Handler{Type: wire.HandlerCustom, Name: "later"}}})
	testenv.WaitFor(t, 5*time.Second, "the execution to be marked dispatched", func() bool { return m.count() == 1 })
	stream, _ := js.Stream(ctx, wire.ExecStream)
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Time.Before(due) {
		t.Fatalf("published at %s, %s before its time", msg.Time.Format(time.StampMilli), due.Sub(msg.Time))
	}
	if late := msg.Time.Sub(due); late > 500*time.Millisecond {
		t.Fatalf("published %s after its time", late)
	}
}
