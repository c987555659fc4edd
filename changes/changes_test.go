package changes_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func feed(t *testing.T) (*changes.Feed, jetstream.JetStream) {
	t.Helper()
	js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wire.EnsureChangeStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	return changes.NewFeed(js, slog.New(slog.DiscardHandler)), js
}

func execChange(ns, id string) changes.Change {
	return changes.Change{Kind: changes.KindExecution, Namespace: ns, JobID: "job-" + id, ExecutionID: id, State: "running", Attempt: 1,
		At: time.Now().UTC()}
}

// next is the watch's next batch, failing the test after 10 s.
func next(t *testing.T, w *changes.Watch) changes.Batch {
	t.Helper()
	select {
	case b := <-w.Batches():
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch of changes within 10 s")
		return changes.Batch{}
	}
}

// TestWatchFiltersByNamespaceAndResumes: a watch sees its namespaces'
// changes only (a namespace with dots included), in order, batched as
// published; a watch resumed after a batch's position gets every later
// batch, none lost and none twice.
func TestWatchFiltersByNamespaceAndResumes(t *testing.T) {
	t.Parallel()
	f, _ := feed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := f.Watch(ctx, []string{"team.a"}, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	f.Publish(execChange("team.a", "1"), execChange("team-b", "x"), execChange("team.a", "2"))
	f.Publish(execChange("team-a", "y"), execChange("teamXa", "z")) // neither is team.a
	f.Publish(execChange("team.a", "3"))
	first := next(t, w)
	if len(first.Changes) != 2 || first.Changes[0].ExecutionID != "1" || first.Changes[1].ExecutionID != "2" {
		t.Fatalf("first batch %+v, want executions 1 and 2 of team.a", first.Changes)
	}
	second := next(t, w)
	if len(second.Changes) != 1 || second.Changes[0].ExecutionID != "3" || second.Seq <= first.Seq {
		t.Fatalf("second batch %+v (seq %d after %d), want execution 3 later", second.Changes, second.Seq, first.Seq)
	}
	select {
	case b := <-w.Batches():
		t.Fatalf("a batch of another namespace: %+v", b.Changes)
	case <-time.After(200 * time.Millisecond):
	}

	// Changes made while nobody watches; a watch resumed after the first
	// batch gets the second, then those.
	for i := range 5 {
		f.Publish(execChange("team.a", fmt.Sprint(10+i)))
	}
	r, err := f.Watch(ctx, []string{"team.a"}, first.Seq, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	want := []string{"3", "10", "11", "12", "13", "14"}
	for _, id := range want {
		b := next(t, r)
		if len(b.Changes) != 1 || b.Changes[0].ExecutionID != id {
			t.Fatalf("resumed watch: batch %+v, want execution %s (then %v)", b.Changes, id, want)
		}
	}
}

// TestWatchPastTheFeed: a position the feed does not hold (newer than
// its end: the stream was wiped and made again) is ErrExpired: the
// reader resyncs.
func TestWatchPastTheFeed(t *testing.T) {
	t.Parallel()
	f, _ := feed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Publish(execChange("a", "1"))
	if _, err := f.Watch(ctx, nil, 1000, 16); !errors.Is(err, changes.ErrExpired) {
		t.Fatalf("watch after position 1000 of a feed of 1: %v, want ErrExpired", err)
	}
}

// TestSlowWatchFallsBehindAlone: a watch that stops reading fills its
// buffer and is told it is behind, while another watch of the same feed
// gets every batch.
func TestSlowWatchFallsBehindAlone(t *testing.T) {
	t.Parallel()
	f, _ := feed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := f.Watch(ctx, nil, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	const n = 500
	fast, err := f.Watch(ctx, nil, 0, n) // room for all: it keeps up
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()

	go func() {
		for i := range n {
			f.Publish(execChange("a", fmt.Sprint(i)))
		}
	}()
	for i := range n {
		b := next(t, fast)
		if got := b.Changes[0].ExecutionID; got != fmt.Sprint(i) {
			t.Fatalf("fast watch: batch %d is execution %s", i, got)
		}
	}
	select {
	case <-slow.Behind():
	case <-time.After(10 * time.Second):
		t.Fatal("the slow watch was not told it is behind")
	}
	if got := len(slow.Batches()); got != 4 {
		t.Errorf("slow watch holds %d batches, want its buffer of 4", got)
	}
}

// TestWatchMakesTheFeed: a watch on a NATS without the feed's stream (an
// API-only node that started first, or NATS wiped) makes it, with the
// Feed's replicas, and then reads what is published.
func TestWatchMakesTheFeed(t *testing.T) {
	t.Parallel()
	js := testenv.JetStream(t)
	f := changes.NewFeed(js, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := f.Watch(ctx, nil, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := js.Stream(ctx, wire.ChangeStream); err != nil {
		t.Fatalf("the feed's stream after a watch: %v", err)
	}
	f.Publish(execChange("a", "1"))
	if b := next(t, w); len(b.Changes) != 1 || b.Changes[0].ExecutionID != "1" {
		t.Fatalf("batch %+v, want execution 1", b.Changes)
	}
}
