package wire_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

func TestEnsureStreamsAndConsumer(t *testing.T) {
	n := testenv.NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Twice: the second call finds them and leaves them as they are.
	for range 2 {
		if err := wire.EnsureStreams(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	exec, err := js.Stream(ctx, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	ec := exec.CachedInfo().Config
	if ec.Retention != jetstream.WorkQueuePolicy || ec.Storage != jetstream.FileStorage ||
		ec.Duplicates != 2*time.Minute || len(ec.Subjects) != 1 || ec.Subjects[0] != "tock.exec.>" {
		t.Errorf("%s config: %+v", wire.ExecStream, ec)
	}
	events, err := js.Stream(ctx, wire.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	vc := events.CachedInfo().Config
	if vc.Retention != jetstream.InterestPolicy || vc.MaxAge != 24*time.Hour ||
		vc.Duplicates != 2*time.Minute || len(vc.Subjects) != 1 || vc.Subjects[0] != "tock.events.>" {
		t.Errorf("%s config: %+v", wire.EventStream, vc)
	}

	c, err := wire.EnsureConsumer(ctx, js, "send-email", domain.PriorityNormal, wire.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	if cc.Durable != "tock_send-email_normal" || cc.FilterSubject != "tock.exec.send-email.normal" || cc.AckPolicy != jetstream.AckExplicitPolicy ||
		cc.AckWait != 30*time.Second || cc.MaxDeliver != -1 || cc.MaxAckPending != 1000 {
		t.Errorf("consumer config: %+v", cc)
	}
	// Updating settings in place, and a second queue beside it on the
	// work-queue stream (filters must not overlap).
	if c, err = wire.EnsureConsumer(ctx, js, "send-email", domain.PriorityNormal, wire.ConsumerOptions{AckWait: time.Minute, MaxAckPending: 10}); err != nil {
		t.Fatal(err)
	}
	if cc := c.CachedInfo().Config; cc.AckWait != time.Minute || cc.MaxAckPending != 10 {
		t.Errorf("updated consumer config: %+v", cc)
	}
	if _, err := wire.EnsureConsumer(ctx, js, domain.HandlerHTTP, domain.PriorityHigh, wire.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}

	// A duplicate event within the window is dropped.
	for range 2 {
		if _, err := js.Publish(ctx, wire.EventSubjectPrefix+"started", []byte("{}"), jetstream.WithMsgID("x:1:started")); err != nil {
			t.Fatal(err)
		}
	}
	info, err := events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d events stored, want 1 (duplicate dropped; kept for the recorder's consumer, which exists from the start)", info.State.Msgs)
	}
	// Once the recorder has it, the event is gone from the stream.
	rc, err := js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := rc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ = events.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d events left after the recorder acknowledged them, want 0", info.State.Msgs)
	}
}

func TestFormatTime(t *testing.T) {
	tm := time.Date(2030, 1, 2, 4, 4, 5, 6_500_000, time.FixedZone("x", 3600))
	if got := wire.FormatTime(tm); got != "2030-01-02T03:04:05.006Z" {
		t.Errorf("FormatTime = %s", got)
	}
}

func TestKVBuckets(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := wire.CancelExecution(ctx, js, "0193-abc"); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, wire.CancelBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "0193-abc"); err != nil {
		t.Errorf("cancelled key: %v", err)
	}

	hkv, err := js.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.BreakerState{Key: "http:api.example.com:8443", Queue: "http", ExecutorID: "host.a-1-ff",
		Breaker: wire.BreakerOpen, Requests: 10, Failures: 7}
	if err := wire.PutBreakerState(ctx, hkv, want); err != nil {
		t.Fatal(err)
	}
	got, err := wire.BreakerStates(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != want.Key || got[0].Breaker != wire.BreakerOpen || got[0].Failures != 7 {
		t.Errorf("handler states: %+v", got)
	}
}

func TestEnsureStreamsFixesDriftedSettings(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	// A stream someone created by hand, with a shorter max age.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.EventStream, Subjects: []string{"tock.events.>"},
		Retention: jetstream.InterestPolicy, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second call finds everything right and changes nothing
		if err := wire.EnsureStreams(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, wire.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.MaxAge != wire.EventMaxAge || c.Duplicates != wire.DuplicateWindow {
		t.Errorf("events stream after EnsureStreams: max age %s, duplicates %s", c.MaxAge, c.Duplicates)
	}
}

// EnsureStreams puts a recorder consumer someone changed back to tock's
// settings. (A right one it only reads, which is all a custom executor's
// NATS user may do: node's TestNATSPermissionsExample.)
func TestEnsureStreamsFixesTheRecorderConsumer(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	drifted := wire.RecorderConsumerConfig()
	drifted.AckWait = time.Minute
	if _, err := js.UpdateConsumer(ctx, wire.EventStream, drifted); err != nil {
		t.Fatal(err)
	}
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, wire.EventStream, wire.RecorderConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.AckWait; got != wire.RecorderAckWait {
		t.Errorf("recorder consumer's ack wait %s after EnsureStreams, want %s", got, wire.RecorderAckWait)
	}
}
