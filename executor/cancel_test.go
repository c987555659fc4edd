package executor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

func (e *env) cancel(id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := wire.CancelExecution(ctx, e.js, id); err != nil {
		e.t.Fatal(err)
	}
}

// A delivery of a cancelled execution is not run: a cancelled event, and
// the message is terminated.
func TestCancelledBeforeStart(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	var calls atomic.Int32
	w.Handle("q", func(ctx context.Context, x *Execution) (string, error) {
		calls.Add(1)
		return "ran", nil
	})
	e.run(w)

	ex := execution("q")
	e.cancel(ex.ExecutionID)
	if !waitUntil(func() bool { return w.cancels.has(ex.ExecutionID) }) {
		t.Fatal("the worker never saw the cancellation")
	}
	e.publish(ex)
	ev := evs.expect(ex, domain.EventCancelled, 1, false)
	if ev.StartedAt != nil || ev.Error != "" || ev.Output != "" {
		t.Errorf("cancelled event = %+v, want no start, error or output", ev)
	}
	e.settled("q")

	// The worker runs other executions.
	other := execution("q")
	e.publish(other)
	evs.expect(other, domain.EventStarted, 1, false)
	evs.expect(other, domain.EventSucceeded, 1, false)
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want once (not for the cancelled execution)", n)
	}
}

// Cancelling a running attempt cancels its context with ErrCancelled; its
// end is reported as cancelled, with its start since no started event
// reported it, and the message is terminated.
func TestCancelWhileRunning(t *testing.T) {
	e := newEnv(t)
	evs := e.events()
	w := e.worker(e.nc, "exec-1")
	w.cfg.StartReportDelay = time.Hour
	entered := make(chan struct{})
	cause := make(chan error, 1)
	w.Handle("long", func(ctx context.Context, x *Execution) (string, error) {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return "half done", ctx.Err()
	})
	e.run(w)

	ex := execution("long")
	ex.Retry.MaxAttempts = 5
	e.publish(ex)
	recv(t, entered)
	cancelled := time.Now()
	e.cancel(ex.ExecutionID)
	select {
	case err := <-cause:
		if !errors.Is(err, ErrCancelled) {
			t.Errorf("handler context's cause %v, want ErrCancelled", err)
		}
		if d := time.Since(cancelled); d > time.Second {
			t.Errorf("handler context cancelled %v after the cancellation", d)
		}
	case <-time.After(time.Second):
		t.Fatal("handler context not cancelled within 1s")
	}
	ev := evs.expect(ex, domain.EventCancelled, 1, false)
	if ev.StartedAt == nil || ev.Output != "half done" {
		t.Errorf("cancelled event = %+v, want its start and output", ev)
	}
	e.settled("long")
	evs.none(200 * time.Millisecond)
}
