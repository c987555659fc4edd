package wire_test

import (
	"testing"

	"github.com/tock-sched/tock/executor/wire"
)

func TestHandlerKeyAndSubjects(t *testing.T) {
	for _, tc := range []struct {
		h   wire.Handler
		key string
	}{
		{wire.Handler{Type: wire.HandlerCustom, Name: "send-email"}, "send-email"},
		{wire.Handler{Type: wire.HandlerHTTP, URL: "https://api.example.com:8443/hook?x=1"}, "http:api.example.com:8443"},
		{wire.Handler{Type: wire.HandlerNATS, Subject: "orders.sync"}, "nats:orders.sync"},
	} {
		if got := tc.h.Key(); got != tc.key {
			t.Errorf("%+v.Key() = %q, want %q", tc.h, got, tc.key)
		}
	}
	if got := wire.ExecSubject("http", ""); got != "tock.exec.http.normal" {
		t.Errorf("ExecSubject default priority = %q", got)
	}
	if got := wire.ConsumerName("send-email", wire.PriorityLow); got != "tock_send-email_low" {
		t.Errorf("ConsumerName = %q", got)
	}
	if wire.ExecMsgID("x", 0) != "x" || wire.ExecMsgID("x", 2) != "x:2" {
		t.Error("ExecMsgID")
	}
	if !wire.ValidPriority("high") || wire.ValidPriority("") || wire.ValidPriority("urgent") {
		t.Error("ValidPriority")
	}
}

func TestAttemptNumbering(t *testing.T) {
	// Two attempts made in the first series, which died after its third;
	// re-driven with max 2 attempts: attempts 4 and 5 make the new series.
	e := wire.Execution{AttemptBase: 3, SeriesBase: 3, Retry: wire.RetryPolicy{MaxAttempts: 2}}
	if e.Attempt(1) != 4 || e.LastAttempt(4) || !e.LastAttempt(5) {
		t.Errorf("attempt %d, last(4) %v, last(5) %v", e.Attempt(1), e.LastAttempt(4), e.LastAttempt(5))
	}
	one := wire.Execution{}
	if !one.LastAttempt(1) {
		t.Error("a zero retry policy allows one attempt")
	}
}

func TestEventMsgID(t *testing.T) {
	ev := wire.Event{ExecutionID: "e", Dispatch: 2, Attempt: 3, Type: wire.EventHeartbeat, Seq: 4}
	if ev.MsgID() != "e:2:3:heartbeat:4" {
		t.Errorf("heartbeat MsgID %q", ev.MsgID())
	}
	ev.Type = wire.EventDeferred
	if ev.MsgID() != "e:2:3:deferred" {
		t.Errorf("deferred MsgID %q", ev.MsgID())
	}
}
