package wire_test

import (
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

func TestHandlerKeyAndSubjects(t *testing.T) {
	for _, tc := range []struct {
		h   domain.Handler
		key string
	}{
		{domain.Handler{Type: domain.HandlerCustom, Name: "send-email"}, "send-email"},
		{domain.Handler{Type: domain.HandlerHTTP, URL: "https://api.example.com:8443/hook?x=1"}, "http:api.example.com:8443"},
		{domain.Handler{Type: domain.HandlerNATS, Subject: "orders.sync"}, "nats:orders.sync"},
	} {
		if got := tc.h.Key(); got != tc.key {
			t.Errorf("%+v.Key() = %q, want %q", tc.h, got, tc.key)
		}
	}
	if got := wire.ExecSubject("http", ""); got != "tock.exec.http.normal" {
		t.Errorf("ExecSubject default priority = %q", got)
	}
	if got := wire.ConsumerName("send-email", domain.PriorityLow); got != "tock_send-email_low" {
		t.Errorf("ConsumerName = %q", got)
	}
	if wire.ExecMsgID("x", 0) != "x" || wire.ExecMsgID("x", 2) != "x:2" {
		t.Error("ExecMsgID")
	}
	if !domain.Priority("high").Valid() || domain.Priority("").Valid() || domain.Priority("urgent").Valid() {
		t.Error("Priority.Valid")
	}
}

func TestAttemptNumbering(t *testing.T) {
	// Two attempts made in the first series, which died after its third;
	// re-driven with max 2 attempts: attempts 4 and 5 make the new series.
	e := wire.Execution{AttemptBase: 3, SeriesBase: 3, Retry: domain.RetryPolicy{MaxAttempts: 2}}
	if e.Attempt(1) != 4 || e.LastAttempt(4) || !e.LastAttempt(5) {
		t.Errorf("attempt %d, last(4) %v, last(5) %v", e.Attempt(1), e.LastAttempt(4), e.LastAttempt(5))
	}
	one := wire.Execution{}
	if !one.LastAttempt(1) {
		t.Error("a zero retry policy allows one attempt")
	}
}

func TestEventMsgID(t *testing.T) {
	ev := wire.Event{ExecutionID: "e", Dispatch: 2, Attempt: 3, Type: domain.EventHeartbeat, Seq: 4}
	if ev.MsgID() != "e:2:3:heartbeat:4" {
		t.Errorf("heartbeat MsgID %q", ev.MsgID())
	}
	ev.Type = domain.EventDeferred
	if ev.MsgID() != "e:2:3:deferred" {
		t.Errorf("deferred MsgID %q", ev.MsgID())
	}
}
