package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// A saturated queue starts its queued high executions before normal ones,
// and normal before low, whatever order they were queued in.
func TestPriorityOrderWhenSaturated(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "exec-1")
	w.depthEvery = 20 * time.Millisecond
	release := make(chan struct{})
	started := make(chan string, 10)
	w.HandleWith("ranked", func(ctx context.Context, x *Execution) (string, error) {
		var name string
		_ = json.Unmarshal(x.Payload, &name)
		started <- name
		if name == "blocker" {
			<-release
		}
		return "", nil
	}, QueueOptions{Concurrency: 1})
	e.run(w)

	publish := func(name string, priority domain.Priority) {
		ex := execution("ranked")
		ex.Payload = json.RawMessage(fmt.Sprintf("%q", name))
		ex.Priority = priority
		e.publish(ex)
	}
	publish("blocker", domain.PriorityNormal)
	if got := recv(t, started); got != "blocker" {
		t.Fatalf("first start %q, want blocker", got)
	}
	publish("low", domain.PriorityLow)
	publish("normal", domain.PriorityNormal)
	publish("high", domain.PriorityHigh)
	// Published means stored, but each consumer learns of its message a
	// moment later (the server signals consumers asynchronously), and
	// until then a no-wait pull finds it empty.
	if !waitUntil(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		for _, p := range domain.Priorities {
			c, err := e.js.Consumer(ctx, wire.ExecStream, wire.ConsumerName("ranked", p))
			if err != nil || c.CachedInfo().NumPending != 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the consumers never saw their executions")
	}
	if !waitUntil(func() bool {
		for _, p := range domain.Priorities {
			if gaugeValue(t, w.m.queueDepth.WithLabelValues("ranked", string(p))) != 1 {
				return false
			}
		}
		return true
	}) {
		t.Error("tock_queue_depth never showed one execution per priority")
	}
	close(release)
	var order []string
	for range 3 {
		order = append(order, recv(t, started))
	}
	if fmt.Sprint(order) != "[high normal low]" {
		t.Errorf("start order %v, want [high normal low]", order)
	}
	e.settled("ranked")
}

// An idle executor starts an execution on the doorbell, not on its
// fallback poll.
func TestIdleExecutorStartsAtOnce(t *testing.T) {
	e := newEnv(t)
	w := e.worker(e.nc, "exec-1")
	w.pollEvery = time.Minute // only the doorbell can start it in time
	entered := make(chan time.Time, 1)
	w.Handle("prompt", func(ctx context.Context, x *Execution) (string, error) {
		entered <- time.Now()
		return "", nil
	})
	e.run(w)
	for i := range 5 {
		for _, p := range domain.Priorities {
			ex := execution("prompt")
			ex.Priority = p
			// Let the queue go idle first.
			time.Sleep(50 * time.Millisecond)
			published := time.Now()
			e.publish(ex)
			lag := recv(t, entered).Sub(published)
			t.Logf("round %d, %s: started %v after publish", i, p, lag)
			if lag > 5*time.Second {
				t.Errorf("%s execution started %v after publish", p, lag)
			}
		}
	}
	e.settled("prompt")
}
