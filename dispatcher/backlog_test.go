package dispatcher

import (
	"context"
	"io"
	"log/slog"
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

// noJS stands in for JetStream in a dispatcher that is never run.
type noJS struct{ jetstream.JetStream }

// Only what is due counts: an execution fired ahead of its time waits
// for its time, not for an executor.
func TestUnpublishedCountsWhatIsDue(t *testing.T) {
	d, err := New(Config{JS: noJS{}, Store: &marks{}})
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Unpublished(); n != 0 {
		t.Fatalf("empty dispatcher: Unpublished %d", n)
	}
	now := time.Now()
	var execs []*model.Execution
	for i := range 40 {
		// Half due (up to 20s ago), half ahead (up to 20s on).
		at := now.Add(time.Duration(i-20) * time.Second).Add(-time.Millisecond)
		job := uuid.New()
		execs = append(execs, &model.Execution{ID: domain.ExecutionID(job, at), JobID: job, ScheduledFor: at,
			CreatedAt: now, Handler: domain.Handler{Type: domain.HandlerCustom, Name: "q"}})
	}
	d.Dispatch(context.Background(), execs)
	if n := d.Unpublished(); n != 21 {
		t.Fatalf("Unpublished %d, want the 21 due", n)
	}
}

func TestBacklogFoldMeasuresDeliveryRates(t *testing.T) {
	w, err := NewBacklogWatch(BacklogConfig{JS: noJS{}, Interval: time.Second, RateWindow: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	info := func(name string, pending uint64, ackPending int, delivered uint64) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Name: name, NumPending: pending, NumAckPending: ackPending,
			Delivered: jetstream.SequenceInfo{Consumer: delivered}}
	}
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	byName := func(b Backlog) map[string]QueueBacklog {
		m := map[string]QueueBacklog{}
		for _, q := range b.Queues {
			m[q.Consumer] = q
		}
		return m
	}

	b := w.fold(at(0), []*jetstream.ConsumerInfo{info("busy", 5000, 16, 100), info("stalled", 900, 0, 7)})
	if q := byName(b); q["busy"].Waiting != 5016 || q["busy"].Rate != 0 || q["stalled"].Waiting != 900 {
		t.Fatalf("first reading %+v: want waiting = pending + ack pending, no rate yet", b.Queues)
	}
	// busy delivers 1000/s; stalled nothing.
	for s := 1; s <= 6; s++ {
		b = w.fold(at(s), []*jetstream.ConsumerInfo{info("busy", 5000, 16, 100+uint64(s)*1000), info("stalled", 900, 0, 7)})
	}
	q := byName(b)
	if q["busy"].Rate != 1000 || q["stalled"].Rate != 0 {
		t.Fatalf("rates %+v, want busy 1000/s and stalled 0", b.Queues)
	}
	if n := len(w.samples["busy"]); n != 5 {
		t.Fatalf("%d samples kept, want the 4s window's 5", n)
	}
	// busy stops: its rate falls to 0 within the window.
	for s := 7; s <= 11; s++ {
		b = w.fold(at(s), []*jetstream.ConsumerInfo{info("busy", 5000, 16, 6100)})
	}
	if q := byName(b)["busy"]; q.Rate != 0 {
		t.Fatalf("busy stopped 5s ago, rate %.0f/s", q.Rate)
	}
	if _, ok := w.samples["stalled"]; ok || len(b.Queues) != 1 {
		t.Fatalf("a deleted consumer is kept: %+v", b.Queues)
	}
	// Created again: its sequence starts over, and so does its rate.
	b = w.fold(at(12), []*jetstream.ConsumerInfo{info("busy", 10, 0, 3)})
	b = w.fold(at(13), []*jetstream.ConsumerInfo{info("busy", 10, 0, 503)})
	if q := byName(b)["busy"]; q.Rate != 500 {
		t.Fatalf("after the consumer was created again, rate %.0f/s, want 500", q.Rate)
	}
}

// The watch reads every consumer of the exec stream, and a reading ages
// out when NATS cannot be read.
func TestBacklogWatchReadsTheExecQueues(t *testing.T) {
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	work, err := wire.EnsureConsumer(ctx, js, "work", domain.PriorityNormal, wire.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.EnsureConsumer(ctx, js, "idle", domain.PriorityNormal, wire.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		for _, q := range []string{"work", "idle"} {
			if _, err := js.Publish(ctx, wire.ExecSubject(q, domain.PriorityNormal), []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	w, err := NewBacklogWatch(BacklogConfig{JS: js, Interval: 50 * time.Millisecond, RateWindow: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Backlog(); ok {
		t.Fatal("a reading before the first read")
	}
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	testenv.WaitFor(t, 5*time.Second, "a first reading", func() bool { _, ok := w.Backlog(); return ok })
	// An executor takes 30 from work, acks 20 of them.
	batch, err := work.Fetch(30, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if n < 20 {
			_ = m.Ack()
		}
		n++
	}
	if n != 30 {
		t.Fatalf("fetched %d, want 30", n)
	}
	want := map[string]int{wire.ConsumerName("work", domain.PriorityNormal): 80, wire.ConsumerName("idle", domain.PriorityNormal): 100}
	var last Backlog
	testenv.WaitFor(t, 10*time.Second, "a reading of both queues", func() bool {
		b, ok := w.Backlog()
		if !ok {
			return false
		}
		last = b
		got := map[string]int{}
		for _, q := range b.Queues {
			got[q.Consumer] = q.Waiting
			if q.Consumer == wire.ConsumerName("work", domain.PriorityNormal) && q.Rate <= 0 {
				return false
			}
			if q.Consumer == wire.ConsumerName("idle", domain.PriorityNormal) && q.Rate != 0 {
				t.Fatalf("the idle queue delivered nothing, rate %.1f/s", q.Rate)
			}
		}
		return len(got) == 2 && got[wire.ConsumerName("work", domain.PriorityNormal)] == want[wire.ConsumerName("work", domain.PriorityNormal)] &&
			got[wire.ConsumerName("idle", domain.PriorityNormal)] == want[wire.ConsumerName("idle", domain.PriorityNormal)]
	})
	t.Logf("reading: %+v", last)

	// NATS down: no reading is given out (the scanner fires freely).
	ns.Stop()
	testenv.WaitFor(t, 5*time.Second, "the reading to age out", func() bool { _, ok := w.Backlog(); return !ok })
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "a reading after NATS is back", func() bool { _, ok := w.Backlog(); return ok })
}

// A consumer counts messages; a batch message carries several
// executions, and the scanner counts executions: each consumer's waiting
// messages and delivery rate are multiplied by the executions its
// subject's messages carried lately.
func TestBacklogCountsExecutionsNotMessages(t *testing.T) {
	per := PerMessageFunc(func(subject string) float64 {
		if subject == "tock.exec.batched.normal" {
			return 12
		}
		return 0 // none seen yet: one a message
	})
	w, err := NewBacklogWatch(BacklogConfig{JS: noJS{}, Interval: time.Second, RateWindow: 4 * time.Second, PerMessage: per})
	if err != nil {
		t.Fatal(err)
	}
	info := func(name, subject string, pending uint64, ackPending int, delivered uint64) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Name: name, NumPending: pending, NumAckPending: ackPending,
			Delivered: jetstream.SequenceInfo{Consumer: delivered}, Config: jetstream.ConsumerConfig{FilterSubject: subject}}
	}
	t0 := time.Now()
	w.fold(t0, []*jetstream.ConsumerInfo{info("b", "tock.exec.batched.normal", 100, 10, 0), info("s", "tock.exec.single.normal", 100, 10, 0)})
	b := w.fold(t0.Add(2*time.Second), []*jetstream.ConsumerInfo{info("b", "tock.exec.batched.normal", 100, 10, 500),
		info("s", "tock.exec.single.normal", 100, 10, 500)})
	got := map[string]QueueBacklog{}
	for _, q := range b.Queues {
		got[q.Consumer] = q
	}
	if q := got["b"]; q.Waiting != 1320 || q.Rate != 3000 {
		t.Errorf("batched queue: %+v, want 1,320 executions waiting and 3,000 a second", q)
	}
	if q := got["s"]; q.Waiting != 110 || q.Rate != 250 {
		t.Errorf("single queue: %+v, want 110 waiting and 250 a second", q)
	}
}
