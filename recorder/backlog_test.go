package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// Backlog counts the events waiting for the recorders, and falls to 0
// once a recorder has written them.
func TestBacklogCountsEventsWaiting(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := Backlog(ctx, e.js); err == nil {
		t.Fatal("Backlog before the consumer exists: no error")
	}
	if err := wire.EnsureStreams(ctx, e.js); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateOrUpdateConsumer(ctx, wire.EventStream, wire.RecorderConsumerConfig()); err != nil {
		t.Fatal(err)
	}
	const events = 3
	for range events {
		at := time.Now().UTC()
		e.publish(wire.Event{Type: domain.EventStarted, ExecutionID: uuid.NewString(), Attempt: 1, ExecutorID: "x1",
			At: at, ScheduledFor: at})
	}
	if n, err := Backlog(ctx, e.js); err != nil || n != events {
		t.Fatalf("Backlog = %d, %v; want %d", n, err, events)
	}

	st := newFakeStore()
	e.run(mustNew(t, Config{JS: e.js, Store: st, Logger: quiet()}))
	for range events {
		st.next(t)
	}
	e.settled()
	if n, err := Backlog(ctx, e.js); err != nil || n != 0 {
		t.Fatalf("Backlog once recorded = %d, %v; want 0", n, err)
	}
}
