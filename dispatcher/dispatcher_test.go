package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

type marks struct {
	mu  sync.Mutex
	ds  []model.Dispatched
	ats []time.Time
	pos map[int]time.Time
}

func (m *marks) AdvancePublishPositions(_ context.Context, pos map[int]time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pos == nil {
		m.pos = map[int]time.Time{}
	}
	for b, t := range pos {
		if t.After(m.pos[b]) {
			m.pos[b] = t
		}
	}
	return nil
}

// reached reports whether bucket's publish position is at or after t.
func (m *marks) reached(bucket int, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.pos[bucket].Before(t)
}

func (m *marks) MarkExecutionsDispatched(_ context.Context, ds []model.Dispatched, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ds = append(m.ds, ds...)
	for range ds {
		m.ats = append(m.ats, at)
	}
	return nil
}

func (m *marks) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ds)
}

// find is the mark of execution id's dispatch and when it was made.
func (m *marks) find(id uuid.UUID, dispatch int) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range m.ds {
		if d.ID == id && d.Dispatch == dispatch {
			return m.ats[i], true
		}
	}
	return time.Time{}, false
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
	var execs []*model.Execution
	for i := range 50 {
		at := base.Add(time.Duration(i) * time.Second)
		execs = append(execs, &model.Execution{
			ID: domain.ExecutionID(job, at), JobID: job, ScheduledFor: at, JobName: "j", Namespace: "default",
			Handler: domain.Handler{Type: domain.HandlerCustom, Name: "disp"}, Payload: json.RawMessage(`{"i":1}`),
			Bucket: i % 3, CreatedAt: at,
		})
	}
	d.Dispatch(ctx, execs)
	// First dispatches of fired executions are not marked one by one:
	// each bucket's publish position moves past them.
	testenv.WaitFor(t, 10*time.Second, "publish positions past every execution", func() bool {
		return m.reached(0, execs[48].CreatedAt) && m.reached(1, execs[49].CreatedAt) && m.reached(2, execs[47].CreatedAt)
	})
	if m.count() != 0 {
		t.Fatalf("%d first dispatches marked one by one", m.count())
	}
	// The outbox hands them again (a crash before the position moved,
	// say): JetStream drops the duplicates by Nats-Msg-Id.
	d.Dispatch(ctx, execs[:10])
	testenv.WaitFor(t, 10*time.Second, "re-dispatched executions published", func() bool { return d.busy() == 0 })

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
	if msg.Subject != "tock.exec.disp.normal" || msg.Header.Get(jetstream.MsgIDHeader) != body.ExecutionID ||
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
	created := time.Now()
	d.Dispatch(ctx, []*model.Execution{{ID: domain.ExecutionID(job, due), JobID: job, ScheduledFor: due,
		CreatedAt: created, Handler: domain.Handler{Type: domain.HandlerCustom, Name: "later"}}})
	testenv.WaitFor(t, 5*time.Second, "the publish position past the execution", func() bool { return m.reached(0, created) })
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

// lastMsg is the newest message on subject in the execution stream.
func lastMsg(t *testing.T, js jetstream.JetStream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	stream, err := js.Stream(ctx, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("last message on %s: %v", subject, err)
	}
	return msg
}

// An execution goes to its priority class's subject, with the message id
// of its dispatch.
func TestPublishesOnItsPrioritySubject(t *testing.T) {
	ctx := context.Background()
	d, js, m := runDispatcher(t, Config{})

	job := uuid.New()
	at := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	e := &model.Execution{ID: domain.ExecutionID(job, at), JobID: job, ScheduledFor: at, Priority: domain.PriorityHigh,
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "urgent"}, Attempts: 2, SeriesBase: 1, Dispatches: 3}
	d.Dispatch(ctx, []*model.Execution{e})
	testenv.WaitFor(t, 5*time.Second, "the execution marked dispatched", func() bool { return m.count() == 1 })
	if _, ok := m.find(e.ID, 3); !ok {
		t.Fatalf("dispatch 3 of %s not marked", e.ID)
	}
	msg := lastMsg(t, js, "tock.exec.urgent.high")
	var body wire.Execution
	if err := json.Unmarshal(msg.Data, &body); err != nil {
		t.Fatal(err)
	}
	if id := msg.Header.Get(jetstream.MsgIDHeader); id != e.ID.String()+":3" {
		t.Fatalf("Nats-Msg-Id %q, want %s:3", id, e.ID)
	}
	if body.Priority != domain.PriorityHigh || body.AttemptBase != 2 || body.SeriesBase != 1 || body.Dispatch != 3 {
		t.Fatalf("message body %+v", body)
	}
}

// A re-queued execution is held until its next attempt's time, while
// executions due now go out at once.
func TestHoldsRetryUntilItsNextAttempt(t *testing.T) {
	ctx := context.Background()
	d, js, m := runDispatcher(t, Config{Workers: 1})

	job := uuid.New()
	sched := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	next := time.Now().Add(time.Second)
	retry := &model.Execution{ID: domain.ExecutionID(job, sched), JobID: job, ScheduledFor: sched, NextAttemptAt: &next,
		Attempts: 1, Dispatches: 1, Handler: domain.Handler{Type: domain.HandlerCustom, Name: "retry"}}
	now := sched.Add(time.Second)
	fresh := &model.Execution{ID: domain.ExecutionID(job, now), JobID: job, ScheduledFor: now, CreatedAt: now,
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "fresh"}}
	d.Dispatch(ctx, []*model.Execution{retry, fresh})
	// The outbox hands the retry again meanwhile: still one publish.
	d.Dispatch(ctx, []*model.Execution{retry})

	testenv.WaitFor(t, 5*time.Second, "the due execution published", func() bool { return m.reached(0, fresh.CreatedAt) })
	if _, ok := m.find(retry.ID, 1); ok || time.Now().After(next) {
		t.Fatal("the retry went out before its time, or the due execution waited for it")
	}
	testenv.WaitFor(t, 5*time.Second, "the retry marked dispatched", func() bool {
		_, ok := m.find(retry.ID, 1)
		return ok
	})
	msg := lastMsg(t, js, "tock.exec.retry.normal")
	if msg.Time.Before(next) {
		t.Fatalf("retry published at %s, %s before its next attempt", msg.Time.Format(time.StampMilli), next.Sub(msg.Time))
	}
	if late := msg.Time.Sub(next); late > 500*time.Millisecond {
		t.Fatalf("retry published %s after its next attempt", late)
	}
	if id := msg.Header.Get(jetstream.MsgIDHeader); id != retry.ID.String()+":1" {
		t.Fatalf("retry's Nats-Msg-Id %q", id)
	}
	if m.count() != 1 {
		t.Fatalf("%d marks, want 1 (the retry handed twice is published once; the fresh one is positional)", m.count())
	}
}

// A bucket's publish position stays just before its oldest first
// dispatch not yet acknowledged (one fired ahead of its time, say) and
// never passes a firing transaction in flight.
func TestPositionStaysBehindWhatIsNotPublished(t *testing.T) {
	d := &Dispatcher{unacked: map[int]map[time.Time]int{}, acked: map[int]time.Time{}, moved: map[int]time.Time{},
		holds: map[int]time.Time{}, stored: map[int]time.Time{}}
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ahead := &model.Execution{Bucket: 1, CreatedAt: at(1)}
	d.count(ahead, 1)
	d.acked[1] = at(5) // a later one, due sooner, went out first
	if got := d.positions(map[int]bool{1: true})[1]; !got.Equal(at(1).Add(-time.Millisecond)) {
		t.Fatalf("position %v, want just before the unacknowledged %v", got, at(1))
	}
	d.count(ahead, -1)
	release := d.Hold(at(3))
	if got := d.positions(map[int]bool{1: true})[1]; !got.Equal(at(3)) {
		t.Fatalf("position %v, want held at %v", got, at(3))
	}
	release()
	if got := d.positions(map[int]bool{1: true})[1]; !got.Equal(at(5)) {
		t.Fatalf("position %v, want the newest acknowledged %v", got, at(5))
	}
	d.stored[1] = at(5)
	if pos := d.positions(map[int]bool{1: true}); len(pos) != 0 {
		t.Fatalf("positions %v, want none (nothing moved)", pos)
	}
}

// Drain returns once everything handed to Dispatch is published, and
// when its context ends if something is not yet due.
func TestDrainWaitsUntilNothingWaits(t *testing.T) {
	ctx := context.Background()
	d, js, _ := runDispatcher(t, Config{})
	if err := d.Drain(ctx); err != nil {
		t.Fatalf("Drain of an idle dispatcher: %v", err)
	}

	job := uuid.New()
	due := time.Now().Add(300 * time.Millisecond)
	d.Dispatch(ctx, []*model.Execution{{ID: domain.ExecutionID(job, due), JobID: job, ScheduledFor: due,
		CreatedAt: time.Now(), Handler: domain.Handler{Type: domain.HandlerCustom, Name: "soon"}}})
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Drain(dctx); err != nil {
		t.Fatalf("Drain with an execution due in 300ms: %v", err)
	}
	if n := d.busy(); n != 0 {
		t.Fatalf("Drain returned with %d executions waiting", n)
	}
	if msg := lastMsg(t, js, "tock.exec.soon.normal"); msg.Time.Before(due) {
		t.Fatalf("published %s before its time", due.Sub(msg.Time))
	}

	later := due.Add(time.Hour)
	d.Dispatch(ctx, []*model.Execution{{ID: domain.ExecutionID(job, later), JobID: job, ScheduledFor: later,
		CreatedAt: time.Now(), Handler: domain.Handler{Type: domain.HandlerCustom, Name: "later"}}})
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := d.Drain(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with an execution due in an hour: %v, want the context's deadline", err)
	}
}

// An execution's message continues its attempts: the next delivery of an
// execution with 5 attempts made, its series started after 3, is attempt
// 6, the last of a series of three; a re-driven one (series and attempts
// at 3) starts a fresh series at attempt 4.
func TestWireContinuesAttempts(t *testing.T) {
	t.Parallel()
	sched := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &model.Execution{ID: uuid.New(), JobID: uuid.New(), ScheduledFor: sched, Priority: domain.PriorityHigh,
		Handler:  domain.Handler{Type: domain.HandlerCustom, Name: "w"},
		Attempts: 5, SeriesBase: 3, Dispatches: 4, Retry: domain.RetryPolicy{MaxAttempts: 3}}
	w := Wire(e)
	if w.Priority != domain.PriorityHigh || w.AttemptBase != 5 || w.SeriesBase != 3 || w.Dispatch != 4 ||
		w.ExecutionID != e.ID.String() || !w.ScheduledFor.Equal(sched) {
		t.Fatalf("wire execution %+v", w)
	}
	if a := w.Attempt(1); a != 6 || !w.LastAttempt(a) {
		t.Fatalf("next attempt %d (last %v), want 6, the last", a, w.LastAttempt(a))
	}
	msg, err := w.Msg()
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "tock.exec.w.high" || msg.Header.Get(wire.HeaderExecutionID) != e.ID.String() ||
		msg.Header.Get(wire.HeaderScheduledFor) != "2031-01-02T03:04:05.000Z" || w.MsgID() != e.ID.String()+":4" {
		t.Fatalf("message %s %v, id %s", msg.Subject, msg.Header, w.MsgID())
	}

	e.Attempts, e.SeriesBase, e.Dispatches = 3, 3, 3
	w = Wire(e)
	if a := w.Attempt(1); a != 4 || w.LastAttempt(a) || !w.LastAttempt(6) {
		t.Fatalf("re-driven message %+v: attempt %d", w, a)
	}
}

// failures records what the dispatcher reports as unpublishable.
type failures struct {
	mu  sync.Mutex
	evs []model.AttemptEvent
}

func (f *failures) RecordAttemptEvents(_ context.Context, evs []model.AttemptEvent) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evs = append(f.evs, evs...)
	return make([]error, len(evs)), nil
}

func (f *failures) all() []model.AttemptEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]model.AttemptEvent(nil), f.evs...)
}

// An execution whose message is larger than NATS takes is recorded as a
// final failure once, with an error that says so, and does not hold its
// bucket's publish position back: the execution after it is published
// and the position moves past both.
func TestUnpublishableExecutionFailsAndDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	f := &failures{}
	d, _, m := runDispatcher(t, Config{Failer: f})
	job := uuid.New()
	base := time.Now().Truncate(time.Second).UTC().Add(-time.Minute)
	huge := json.RawMessage(`"` + strings.Repeat("<", 400<<10) + `"`) // 2.4 MB escaped
	mk := func(i int, payload json.RawMessage) *model.Execution {
		at := base.Add(time.Duration(i) * time.Second)
		return &model.Execution{ID: domain.ExecutionID(job, at), JobID: job, ScheduledFor: at, JobName: "j",
			Namespace: "default", Handler: domain.Handler{Type: domain.HandlerCustom, Name: "big"}, Payload: payload,
			Bucket: 4, CreatedAt: at, Attempts: 2}
	}
	big, small := mk(0, huge), mk(1, json.RawMessage(`1`))
	d.Dispatch(ctx, []*model.Execution{big, small})
	testenv.WaitFor(t, 10*time.Second, "the position past both executions", func() bool {
		return m.reached(4, small.CreatedAt)
	})
	evs := f.all()
	if len(evs) != 1 {
		t.Fatalf("%d failures recorded, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.ID != big.ID || ev.Type != domain.EventFailed || !ev.Final || ev.Attempt != 3 || ev.Executor != FailedBy ||
		!strings.Contains(ev.Error, "max_payload") {
		t.Errorf("failure %+v", ev)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.Drain(dctx); err != nil {
		t.Fatalf("something still waits: %v", err)
	}
}
