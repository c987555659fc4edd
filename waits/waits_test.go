package waits

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

func TestExplain(t *testing.T) {
	now := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	custom := domain.Handler{Type: domain.HandlerCustom, Name: "mail"}
	served := []wire.QueueConsumer{{Queue: "mail", Priority: domain.PriorityNormal, Pending: 7, Waiting: 1}}
	for _, tc := range []struct {
		name   string
		e      model.Execution
		states []wire.BreakerState
		cons   []wire.QueueConsumer
		seen   []model.HandlerSeen
		nats   bool // the snapshot was read
		kind   string
		says   string
	}{
		{name: "running", e: model.Execution{State: domain.ExecRunning}, nats: true},
		{name: "not due", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(time.Minute)}, cons: served, nats: true,
			kind: Scheduled, says: "due at 2026-11-28 16:01:00Z"},
		{name: "retry backoff", e: model.Execution{State: domain.ExecFailed, Attempts: 2, ScheduledFor: now.Add(-time.Minute), NextAttemptAt: at(4 * time.Second), Dispatches: 2},
			cons: served, nats: true, kind: RetryBackoff, says: "attempt 2 failed; the next is due at 2026-11-28 16:00:04Z"},
		{name: "deferred by an open breaker", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Minute), NextAttemptAt: at(6 * time.Second), Dispatches: 1},
			states: []wire.BreakerState{{Key: "mail", Queue: "mail", ExecutorID: "a", Breaker: wire.BreakerOpen, Since: now.Add(-time.Minute), ProbeAt: at(20 * time.Second), Reason: "3 of 3 attempts failed within 1m0s"}},
			cons:   served, nats: true, kind: BreakerOpen, says: "open on every executor serving it (1) since 2026-11-28 15:59:00Z (3 of 3 attempts failed within 1m0s); next probe at 2026-11-28 16:00:20Z"},
		{name: "deferred otherwise", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Minute), NextAttemptAt: at(6 * time.Second), Dispatches: 1},
			cons: served, nats: true, kind: Deferred, says: "handed back unrun"},
		{name: "one breaker of two open", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second), DispatchedAt: at(-time.Second)},
			states: []wire.BreakerState{{Key: "mail", Queue: "mail", ExecutorID: "a", Breaker: wire.BreakerOpen}, {Key: "mail", Queue: "mail", ExecutorID: "b", Breaker: wire.BreakerClosed}},
			cons:   served, nats: true, kind: InQueue, says: "(7 messages of queue mail not yet taken)"},
		{name: "at limit", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second), DispatchedAt: at(-time.Second)},
			states: []wire.BreakerState{{Key: "mail", Queue: "mail", ExecutorID: "a", Breaker: wire.BreakerClosed, InFlight: 4, Limit: 4}},
			cons:   served, nats: true, kind: AtLimit, says: "every executor of mail (1) runs as many"},
		{name: "never served", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second)}, nats: true,
			kind: NoExecutor, says: "no executor has ever served the queue mail"},
		{name: "none for a while", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second)},
			cons: []wire.QueueConsumer{{Queue: "mail", Priority: domain.PriorityNormal}}, seen: []model.HandlerSeen{{Handler: "mail", Queue: "mail", LastSeen: now.Add(-10 * time.Minute)}},
			nats: true, kind: NoExecutor, says: "none seen for 10 minutes (last at 2026-11-28 15:50:00Z)"},
		{name: "not yet published", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second)}, cons: served, nats: true,
			kind: Publishing, says: "not yet published"},
		{name: "NATS did not answer", e: model.Execution{State: domain.ExecQueued, ScheduledFor: now.Add(-time.Second), DispatchedAt: at(-time.Second)},
			kind: InQueue, says: "waiting for an executor"},
		{name: "dependency", e: model.Execution{State: domain.ExecWaiting}, nats: true, kind: Dependency},
		{name: "buffered", e: model.Execution{State: domain.ExecQueued, Buffered: true}, nats: true, kind: Buffered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.e.Handler = custom
			var snap *Snapshot
			if tc.nats {
				snap = NewSnapshot(now, tc.states, tc.cons, tc.seen)
			}
			r := Explain(&tc.e, snap.Handler(custom), now)
			if tc.kind == "" {
				if r != nil {
					t.Fatalf("a reason for an execution that does not wait: %+v", r)
				}
				return
			}
			if r == nil || r.Kind != tc.kind || !strings.Contains(r.Message, tc.says) {
				t.Fatalf("got %+v; want %s saying %q", r, tc.kind, tc.says)
			}
		})
	}
}

// The cache reads its sources once a TTL, failures too.
func TestCache(t *testing.T) {
	now := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	reads, fail := 0, false
	c := NewCache(Sources{
		States: func(context.Context) ([]wire.BreakerState, error) {
			reads++
			if fail {
				return nil, errors.New("nats: timeout")
			}
			return []wire.BreakerState{{Key: "mail", Queue: "mail"}}, nil
		},
		Consumers: func(context.Context) ([]wire.QueueConsumer, error) { return nil, nil },
		Seen:      func(context.Context) ([]model.HandlerSeen, error) { return nil, nil },
	}, time.Second, func() time.Time { return now })
	for range 3 {
		if s, err := c.Get(context.Background()); err != nil || len(s.Handler(domain.Handler{Type: domain.HandlerCustom, Name: "mail"}).Executors) != 1 {
			t.Fatalf("get: %v %v", s, err)
		}
	}
	if reads != 1 {
		t.Errorf("%d reads within the TTL, want 1", reads)
	}
	now, fail = now.Add(time.Second), true
	for range 3 {
		if s, err := c.Get(context.Background()); err == nil || s != nil {
			t.Fatalf("a failed read: %v %v", s, err)
		}
	}
	if reads != 2 {
		t.Errorf("%d reads after a failure within the TTL, want 2", reads)
	}
	if h := (*Snapshot)(nil).Handler(domain.Handler{Type: domain.HandlerCustom, Name: "mail"}); h.Known {
		t.Errorf("a handler of no snapshot is known: %+v", h)
	}
}
