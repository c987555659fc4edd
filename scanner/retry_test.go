package scanner

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

// countingStore counts outbox reads.
type countingStore struct {
	*store.Store
	reads atomic.Int64
}

func (c *countingStore) ListUndispatchedExecutions(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error) {
	defer c.reads.Add(1)
	return c.Store.ListUndispatchedExecutions(ctx, buckets, limit, until)
}

func (c *countingStore) ListRedispatches(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error) {
	defer c.reads.Add(1)
	return c.Store.ListRedispatches(ctx, buckets, limit, until)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// With real Postgres and NATS: a failed execution waits out its backoff in
// Postgres, and the scanner and dispatcher publish it again, as its next
// dispatch, when its next attempt is due, and not before.
func TestRetryIsPublishedFromPostgresWhenDue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := storetest.New(t, 4)
	nc, err := nats.Connect(testenv.NATS(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	clk := clock.New(st.Now, clock.Options{})
	disp, err := dispatcher.New(dispatcher.Config{JS: js, Store: st, Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingStore{Store: st}
	scan, err := New(Config{Store: counted, Dispatcher: disp, Clock: clk, NodeID: "n1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = disp.Run(ctx); done <- struct{}{} }()
	go func() { _ = scan.Run(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()
	for b := range 4 {
		scan.Acquire(b, 1)
	}

	// Paused: it runs only by hand (the store creates no active job
	// without a next run).
	j := &model.Job{Name: "flaky", Schedule: schedule.Spec{In: "1h"}, Priority: domain.PriorityLow,
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "flaky"}, State: domain.JobPaused}
	if err := st.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateManualExecution(ctx, j.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	subject := wire.ExecSubject("flaky", domain.PriorityLow)
	stream, err := js.Stream(ctx, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	last := func() *jetstream.RawStreamMsg {
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return nil
		}
		return msg
	}
	testenv.WaitFor(t, 10*time.Second, "the first dispatch published", func() bool { return last() != nil })
	if id := last().Header.Get(jetstream.MsgIDHeader); id != e.ID.String() {
		t.Fatalf("first dispatch's message id %q, want %s", id, e.ID)
	}

	// Attempt 1 fails; the retry is due in 1.5 s.
	at := time.Now()
	res, err := st.RecordAttemptEvents(ctx, []model.AttemptEvent{
		{ID: e.ID, Attempt: 1, Executor: "x", At: at, Type: domain.EventFailed, StartedAt: &at, RetryIn: 1500 * time.Millisecond},
	})
	if err != nil || res[0] != nil {
		t.Fatalf("record failure: %v %v", err, res)
	}
	failed, err := st.GetExecution(ctx, e.ID)
	if err != nil || failed.NextAttemptAt == nil {
		t.Fatalf("failed execution %+v, %v", failed, err)
	}
	testenv.WaitFor(t, 10*time.Second, "the retry published", func() bool {
		msg := last()
		return msg != nil && msg.Header.Get(jetstream.MsgIDHeader) == e.ID.String()+":1"
	})
	msg := last()
	if msg.Time.Before(*failed.NextAttemptAt) {
		t.Fatalf("retry published at %s, %s before it was due", msg.Time.Format(time.StampMilli),
			failed.NextAttemptAt.Sub(msg.Time))
	}
	if late := msg.Time.Sub(*failed.NextAttemptAt); late > time.Second {
		t.Fatalf("retry published %s after it was due", late)
	}
	testenv.WaitFor(t, 10*time.Second, "the retry marked dispatched", func() bool {
		x, err := st.GetExecution(ctx, e.ID)
		return err == nil && x.DispatchedAt != nil
	})

	// Attempt 2 fails with a long backoff: nothing is published meanwhile.
	at = time.Now()
	if _, err := st.RecordAttemptEvents(ctx, []model.AttemptEvent{
		{ID: e.ID, Attempt: 2, Executor: "x", At: at, Type: domain.EventFailed, StartedAt: &at, RetryIn: time.Hour,
			Dispatch: 1},
	}); err != nil {
		t.Fatal(err)
	}
	reads := counted.reads.Load()
	testenv.WaitFor(t, 10*time.Second, "two more outbox passes", func() bool { return counted.reads.Load() >= reads+2 })
	if id := last().Header.Get(jetstream.MsgIDHeader); id != e.ID.String()+":1" {
		t.Fatalf("published %s while the retry waits an hour", id)
	}
	if x, _ := st.GetExecution(ctx, e.ID); x.DispatchedAt != nil || x.Dispatches != 2 {
		t.Fatalf("waiting retry %+v", x)
	}
}
