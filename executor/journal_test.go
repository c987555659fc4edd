package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// recreate deletes streams and creates tock's streams again, as tock's
// processes do once JetStream has lost them.
func (e *env) recreate(streams ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, s := range streams {
		if err := e.js.DeleteStream(ctx, s); err != nil {
			e.t.Fatalf("delete stream %s: %v", s, err)
		}
	}
	if err := wire.EnsureStreams(ctx, e.js); err != nil {
		e.t.Fatal(err)
	}
}

var errFlaky = errors.New("flaky")

// callCounter counts a handler's calls by execution id and attempt.
type callCounter struct {
	mu    sync.Mutex
	calls map[string][]int
}

func (c *callCounter) add(x *Execution) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[x.ExecutionID] = append(c.calls[x.ExecutionID], x.Attempt)
}

func (c *callCounter) of(id string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls[id]...)
}

func TestDeliveryOfAnAttemptRunHereBeforeIsAnswered(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-j")
	calls := &callCounter{calls: map[string][]int{}}
	unblock := make(chan struct{})
	w.Handle("journal", func(ctx context.Context, x *Execution) (string, error) {
		calls.add(x)
		if string(x.Payload) == `"slow"` {
			<-unblock
		}
		return "done", nil
	})
	e.run(w)

	ran := execution("journal")
	e.publish(ran)
	evs.expect(ran, domain.EventStarted, 1, false)
	evs.expect(ran, domain.EventSucceeded, 1, false)
	e.settled("journal")
	running := execution("journal")
	running.Payload = []byte(`"slow"`)
	e.publish(running)
	evs.expect(running, domain.EventStarted, 1, false)

	// The exec stream is lost, and tock publishes both executions again:
	// as their first dispatch, so their deliveries are attempt 1 again.
	// The one that ran is answered with its result (the same event again:
	// events go out in batches, so the stream may hold it twice, and tock
	// records it once), the running one's copy is acknowledged; neither
	// runs a second time.
	e.recreate(wire.ExecStream)
	e.publish(ran)
	e.publish(running)
	e.settled("journal")
	close(unblock)
	for {
		ev := evs.next()
		if ev.ExecutionID == ran.ExecutionID && ev.Type == domain.EventSucceeded && ev.Attempt == 1 {
			continue // the answer: the stored result again
		}
		if ev.ExecutionID != running.ExecutionID || ev.Type != domain.EventSucceeded || ev.Attempt != 1 {
			t.Fatalf("event %s attempt %d for %s, want the running one's success", ev.Type, ev.Attempt, ev.ExecutionID)
		}
		break
	}
	evs.none(300 * time.Millisecond)
	for _, x := range []wire.Execution{ran, running} {
		if got := calls.of(x.ExecutionID); len(got) != 1 {
			t.Errorf("execution %s: handler called for attempts %v, want once", x.ExecutionID, got)
		}
	}

	// JetStream redelivering an attempt is another attempt: it runs.
	again := ran
	again.AttemptBase = 1
	again.Dispatch = 1
	e.publish(again)
	evs.expect(again, domain.EventStarted, 2, false)
	evs.expect(again, domain.EventSucceeded, 2, false)
	if got := calls.of(ran.ExecutionID); len(got) != 2 || got[1] != 2 {
		t.Errorf("execution %s: handler called for attempts %v, want 1 then 2", ran.ExecutionID, got)
	}
}

func TestEventsAreSentAgainIntoANewEventStream(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "exec-r")
	w.Handle("resend", func(ctx context.Context, x *Execution) (string, error) {
		if x.Attempt == 1 {
			return "", RetryAfter(errFlaky, time.Minute)
		}
		return "second time lucky", nil
	})
	e.run(w)
	evs := e.events()
	failed := execution("resend")
	failed.Retry = domain.RetryPolicy{MaxAttempts: 2, InitialBackoff: "1m", Jitter: "none"}
	e.publish(failed)
	evs.expect(failed, domain.EventStarted, 1, false)
	retry := evs.expect(failed, domain.EventFailed, 1, false)
	ok := e.republish(failed, retry)
	started := evs.expect(ok, domain.EventStarted, 2, false)
	evs.expect(ok, domain.EventSucceeded, 2, false)
	e.settled("resend")

	// The event stream is lost before a recorder read those events. The
	// executor notices the new stream and sends the attempts' last
	// events again, oldest first, each with its start.
	e.recreate(wire.EventStream)
	evs = e.events()
	first := evs.expect(failed, domain.EventFailed, 1, false)
	if first.RetryInMS != retry.RetryInMS || first.Error != retry.Error || first.StartedAt == nil {
		t.Errorf("failure sent again as %+v, want %+v with its start", first, retry)
	}
	second := evs.expect(ok, domain.EventSucceeded, 2, false)
	if second.Output != "second time lucky" || second.StartedAt == nil || !second.StartedAt.Equal(started.At) {
		t.Errorf("success sent again as %+v, want its output and its start %s", second, started.At)
	}
	evs.none(2 * wipeCheckEvery)
}

func TestJournalForgetsOldAttemptsAndKeepsWithinItsBytes(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := newJournal(func() time.Time { return now })
	end := func(id string, output string) {
		t.Helper()
		k := attemptKey{id, 0, 1}
		if known, _ := j.begin(k); known {
			t.Fatalf("attempt %s known before it began", id)
		}
		j.record(wire.Event{Type: domain.EventSucceeded, ExecutionID: id, Attempt: 1, Output: output})
		j.finish(k)
	}
	end("a", "x")
	now = now.Add(JournalSpan / 2)
	end("b", "y")
	if evs := j.events(); len(evs) != 2 || evs[0].ExecutionID != "a" || evs[1].ExecutionID != "b" {
		t.Fatalf("events %+v, want a then b", evs)
	}
	now = now.Add(JournalSpan/2 + time.Second)
	if evs := j.events(); len(evs) != 1 || evs[0].ExecutionID != "b" {
		t.Fatalf("events %+v, want b alone once a is older than %s", evs, JournalSpan)
	}
	if known, ev := j.begin(attemptKey{"a", 0, 1}); known || ev != nil {
		t.Fatalf("forgotten attempt a: known %v, event %+v", known, ev)
	}

	// An attempt that ended without a result published is forgotten at
	// once: a new delivery of it must run.
	j.finish(attemptKey{"a", 0, 1})
	if known, _ := j.begin(attemptKey{"a", 0, 1}); known {
		t.Fatal("an attempt that reported nothing is still known")
	}
	j.finish(attemptKey{"a", 0, 1})

	// Big outputs: the oldest go first once JournalBytes is passed.
	big := string(make([]byte, domain.MaxOutputBytes))
	n := JournalBytes/(domain.MaxOutputBytes+journalEntryBytes) + 10
	for i := range n {
		end(fmt.Sprint("big-", i), big)
	}
	evs := j.events()
	if j.bytes > JournalBytes || len(evs) >= n || evs[len(evs)-1].ExecutionID != fmt.Sprint("big-", n-1) {
		t.Fatalf("%d events in %d bytes after %d big ones; want the newest within %d bytes", len(evs), j.bytes, n, JournalBytes)
	}
}

// The cancel bucket lost and created again: its sequence numbers start
// over, and a watcher that resumed where it was would skip every key up
// to its old position. Cancelling a running attempt still stops it.
func TestCancelReachesAttemptsAfterTheCancelBucketIsNew(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "exec-c")
	cause := make(chan error, 1)
	entered := make(chan struct{}, 1)
	w.Handle("long", func(ctx context.Context, x *Execution) (string, error) {
		entered <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return "", ctx.Err()
	})
	e.run(w)
	var old []string
	for range 5 {
		id := execution("long").ExecutionID
		e.cancel(id)
		old = append(old, id)
	}
	if !waitUntil(func() bool { return w.cancels.has(old[len(old)-1]) }) {
		t.Fatal("the worker never saw the first cancellations")
	}

	e.recreate("KV_" + wire.CancelBucket)
	ex := execution("long")
	e.publish(ex)
	recv(t, entered)
	cancelled := time.Now()
	e.cancel(ex.ExecutionID)
	select {
	case err := <-cause:
		if !errors.Is(err, ErrCancelled) {
			t.Errorf("handler context's cause %v, want ErrCancelled", err)
		}
		t.Logf("attempt stopped %s after its cancellation in the new bucket", time.Since(cancelled).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		// The watcher retries a failed watch with a backoff capped at 5 s
		// (the bucket was gone a moment: opening it failed), so a bound of
		// 5 s failed under load (seen in CI).
		t.Fatal("handler context not cancelled within 15s of a cancellation in the new bucket")
	}
}

// An attempt that ended here is answered from the journal when tock
// publishes it again as its next dispatch (the rescue of an execution
// whose recorded end Postgres lost): the same attempt, run once. A
// deferral is not: the next dispatch of a deferred attempt runs.
func TestJournalAnswersTheSameAttemptUnderAnotherDispatch(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := newJournal(func() time.Time { return now })
	run := func(id string, typ domain.EventType) {
		t.Helper()
		k := attemptKey{id, 0, 1}
		if known, _ := j.begin(k); known {
			t.Fatalf("attempt %s known before it began", id)
		}
		j.record(wire.Event{Type: typ, ExecutionID: id, Attempt: 1, Dispatch: 0})
		j.finish(k)
	}
	run("ran", domain.EventSucceeded)
	run("deferred", domain.EventDeferred)
	if known, ev := j.begin(attemptKey{"ran", 1, 1}); !known || ev == nil || ev.Type != domain.EventSucceeded {
		t.Errorf("attempt 1 of ran under dispatch 1: known %v, event %+v; want its success", known, ev)
	}
	if known, ev := j.begin(attemptKey{"deferred", 1, 1}); known || ev != nil {
		t.Errorf("attempt 1 of deferred under dispatch 1: known %v, event %+v; want it run", known, ev)
	}
	if known, _ := j.begin(attemptKey{"ran", 1, 2}); known {
		t.Error("attempt 2 of ran is known: a new attempt must run")
	}
	now = now.Add(JournalSpan + time.Second)
	j.trim()
	if known, _ := j.begin(attemptKey{"ran", 2, 1}); known {
		t.Errorf("attempt 1 of ran still answered after %s", JournalSpan)
	}
}
