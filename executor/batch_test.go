package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// publishBatch publishes executions of one queue as a batch message, as
// tock's dispatcher does, under the batch's message id.
func (e *env) publishBatch(batch string, exs ...wire.Execution) {
	e.t.Helper()
	bodies := make([][]byte, len(exs))
	for i := range exs {
		b, err := json.Marshal(exs[i])
		if err != nil {
			e.t.Fatal(err)
		}
		bodies[i] = b
	}
	msg := wire.BatchMsg(wire.ExecSubject(exs[0].Handler.Queue(), exs[0].Priority), bodies)
	msg.Header.Set(nats.MsgIdHdr, wire.BatchMsgID(batch, msg.Subject))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := e.js.PublishMsg(ctx, msg); err != nil {
		e.t.Fatal(err)
	}
}

// byExecution reads n events and files them by execution id, in order.
func (r *events) byExecution(n int) map[string][]wire.Event {
	r.t.Helper()
	out := map[string][]wire.Event{}
	for range n {
		ev := r.next()
		out[ev.ExecutionID] = append(out[ev.ExecutionID], ev)
	}
	return out
}

// A batch message's members run as if each came alone, beyond the
// Worker's concurrency (the rest wait for a slot): each is attempt 1 with
// its own events and outcome, and the message is acked once all are
// settled.
func TestBatchMessageRunsEachMember(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1") // Concurrency 4
	var (
		mu       sync.Mutex
		attempts = map[string][]int{}
		running  int
		most     int
	)
	exs := make([]wire.Execution, 10)
	for i := range exs {
		exs[i] = execution("batched")
		exs[i].Retry.MaxAttempts = 3
	}
	failing := exs[3].ExecutionID
	w.Handle("batched", func(ctx context.Context, x *Execution) (string, error) {
		mu.Lock()
		attempts[x.ExecutionID] = append(attempts[x.ExecutionID], x.Attempt)
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		if x.ExecutionID == failing {
			return "", errors.New("smtp: try again")
		}
		return "sent " + x.ExecutionID, nil
	})
	e.run(w)
	e.publishBatch(exs[0].ExecutionID, exs...)

	got := evs.byExecution(2 * len(exs)) // started and an end each
	for _, ex := range exs {
		list := got[ex.ExecutionID]
		if len(list) != 2 || list[0].Type != domain.EventStarted || list[0].Attempt != 1 {
			t.Fatalf("events of %s: %+v, want started then an end of attempt 1", ex.ExecutionID, list)
		}
		end := list[1]
		switch {
		case ex.ExecutionID == failing:
			if end.Type != domain.EventFailed || end.Final || end.RetryInMS <= 0 || end.Dispatch != 0 {
				t.Errorf("failing member's end = %+v, want a failure with a retry", end)
			}
		case end.Type != domain.EventSucceeded || end.Output != "sent "+ex.ExecutionID || end.Attempt != 1:
			t.Errorf("member %s's end = %+v, want succeeded attempt 1", ex.ExecutionID, end)
		}
		if end.PublishedAt == nil || end.Namespace != ex.Namespace || end.JobID != ex.JobID {
			t.Errorf("member %s's end event lacks the message's time or the execution's namespace and job: %+v", ex.ExecutionID, end)
		}
	}
	e.settled("batched")
	evs.none(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, ex := range exs {
		if a := attempts[ex.ExecutionID]; len(a) != 1 || a[0] != 1 {
			t.Errorf("member %s ran as attempts %v, want [1]", ex.ExecutionID, a)
		}
	}
	if most > 4 {
		t.Errorf("%d members ran at once, more than the Worker's concurrency (4)", most)
	}
}

// The Worker says in its consumers' metadata which form it takes.
func TestConsumersSayTheForm(t *testing.T) {
	for _, one := range []bool{false, true} {
		e := newEnv(t)
		w := e.worker(e.nc, "exec-1")
		if one {
			w.consumerOpts.Batch = false
		}
		w.Handle("formed", func(ctx context.Context, x *Execution) (string, error) { return "", nil })
		stop := e.run(w)
		ok := waitUntil(func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			c, err := e.js.Consumer(ctx, wire.ExecStream, wire.ConsumerName("formed", domain.PriorityNormal))
			return err == nil && wire.BatchForm(c.CachedInfo().Config.Metadata) == !one
		})
		if !ok {
			t.Errorf("one execution per message %v: consumer metadata does not say batch form %v", one, !one)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	}
	if w, err := New(Config{NATS: &nats.Conn{}, OneExecutionPerMessage: true}); err != nil || w.consumerOpts.Batch {
		t.Errorf("Config.OneExecutionPerMessage: consumer options %+v, %v", w.consumerOpts, err)
	}
}

// A batch message delivered again (its executor died halfway through its
// members) is not run again: every member goes back to tock as a
// deferral of its next attempt, so tock publishes again only those no
// executor finished, one per message, and none runs twice as attempt 1.
func TestBatchRedeliveredIsHandedBack(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	short := wireShortAck()

	deadNC := e.connect()
	dead := e.worker(deadNC, "exec-dead")
	dead.consumerOpts.AckWait = short
	dead.cfg.ShutdownTimeout = 10 * time.Millisecond
	dead.cfg.Concurrency = 1
	entered := make(chan string, 3)
	var calls atomic.Int32
	dead.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		entered <- x.ExecutionID
		if calls.Add(1) == 1 {
			return "done", nil // the first member finishes
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	stopDead := e.run(dead)

	exs := []wire.Execution{execution("q"), execution("q"), execution("q")}
	e.publishBatch(exs[0].ExecutionID, exs...)
	first, second := recv(t, entered), recv(t, entered)
	got := evs.byExecution(3) // first: started, succeeded; second: started
	if l := got[first]; len(l) != 2 || l[1].Type != domain.EventSucceeded {
		t.Fatalf("first member's events %+v", l)
	}
	if l := got[second]; len(l) != 1 || l[0].Type != domain.EventStarted {
		t.Fatalf("second member's events %+v", l)
	}
	deadNC.Close() // no more in-progress acks, no ack

	live := e.worker(e.nc, "exec-live")
	live.consumerOpts.AckWait = short
	ran := make(chan string, 3)
	live.Handle("q", func(ctx context.Context, x *Execution) (string, error) { ran <- x.ExecutionID; return "", nil })
	e.run(live)
	back := evs.byExecution(3)
	for _, ex := range exs {
		l := back[ex.ExecutionID]
		if len(l) != 1 || l[0].Type != domain.EventDeferred || l[0].Attempt != 2 || l[0].ExecutorID != "exec-live" || l[0].RetryInMS != 0 {
			t.Errorf("member %s after the redelivery: %+v, want one deferral of attempt 2 by exec-live, at once", ex.ExecutionID, l)
		}
	}
	e.settled("q")
	select {
	case id := <-ran:
		t.Errorf("the live executor ran member %s of the redelivered batch", id)
	default:
	}
	if err := stopDead(); err == nil {
		t.Log("dead executor stopped cleanly")
	}
}

func wireShortAck() time.Duration { return time.Second }

// A stopping Worker hands back at once the members it has not started:
// a deferral each, for another executor, while the running one finishes
// within the shutdown grace; the message is settled.
func TestBatchShutdownHandsBackUnstarted(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.Concurrency = 1
	entered := make(chan string, 4)
	release := make(chan struct{})
	w.Handle("slow", func(ctx context.Context, x *Execution) (string, error) {
		entered <- x.ExecutionID
		<-release
		return "finished", nil
	})
	stop := e.run(w)
	exs := []wire.Execution{execution("slow"), execution("slow"), execution("slow"), execution("slow")}
	e.publishBatch(exs[0].ExecutionID, exs...)
	running := recv(t, entered)
	evs.expect(wire.Execution{ExecutionID: running, ScheduledFor: exs[0].ScheduledFor}, domain.EventStarted, 1, false)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	got := evs.byExecution(3)
	for _, ex := range exs {
		if ex.ExecutionID == running {
			continue
		}
		l := got[ex.ExecutionID]
		if len(l) != 1 || l[0].Type != domain.EventDeferred || l[0].Attempt != 1 || l[0].RetryInMS != 0 {
			t.Errorf("unstarted member %s at shutdown: %+v, want a deferral of attempt 1, at once", ex.ExecutionID, l)
		}
	}
	close(release)
	if ev := evs.next(); ev.ExecutionID != running || ev.Type != domain.EventSucceeded {
		t.Errorf("running member's end = %+v, want it succeeded within the grace", ev)
	}
	if err := recv(t, stopped); err != nil {
		t.Errorf("Run: %v", err)
	}
	e.settled("slow")
	if len(entered) != 0 {
		t.Errorf("%d more members ran after the stop began", len(entered))
	}
}
