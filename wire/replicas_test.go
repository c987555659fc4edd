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

// TestEnsureStreamsReplicasScalesInPlace: streams and buckets made with
// one replica on a 3-server cluster are updated to 3 in place (messages,
// KV entries and consumers kept) and back to 1; a process that does not
// own the setting (replicas 0) leaves the count alone.
func TestEnsureStreamsReplicasScalesInPlace(t *testing.T) {
	c := testenv.NATSCluster(t)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if err := wire.EnsureStreamsReplicas(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.EnsureConsumer(ctx, js, "http", domain.PriorityNormal, wire.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, wire.ExecSubject("http", domain.PriorityNormal), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wire.CancelExecution(ctx, js, "e1"); err != nil {
		t.Fatal(err)
	}
	created := streamInfo(ctx, t, js, wire.ExecStream).Created

	for _, want := range []int{3, 3, 1} {
		if err := wire.EnsureStreamsReplicas(ctx, js, want); err != nil {
			t.Fatalf("replicas %d: %v", want, err)
		}
		// A process without the setting changes nothing.
		if err := wire.EnsureStreams(ctx, js); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{wire.ExecStream, wire.EventStream, "KV_" + wire.CancelBucket, "KV_" + wire.BreakerBucket} {
			si := streamInfo(ctx, t, js, name)
			if si.Config.Replicas != want {
				t.Errorf("%s: %d replicas, want %d", name, si.Config.Replicas, want)
			}
			if !si.Created.Equal(streamInfo(ctx, t, js, name).Created) || (name == wire.ExecStream && !si.Created.Equal(created)) {
				t.Errorf("%s was recreated", name)
			}
		}
		testenv.WaitFor(t, 30*time.Second, "the consumers to follow the stream's replicas", func() bool {
			ci, err := js.Consumer(ctx, wire.ExecStream, wire.ConsumerName("http", domain.PriorityNormal))
			if err != nil {
				return false
			}
			info, err := ci.Info(ctx)
			return err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == want-1
		})
		if si := streamInfo(ctx, t, js, wire.ExecStream); si.State.Msgs != 5 {
			t.Errorf("replicas %d: %s holds %d messages, want 5", want, wire.ExecStream, si.State.Msgs)
		}
		kv, err := js.KeyValue(ctx, wire.CancelBucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, "e1"); err != nil {
			t.Errorf("replicas %d: cancel entry: %v", want, err)
		}
	}
	if err := wire.EnsureStreamsReplicas(ctx, js, 6); err == nil {
		t.Error("6 replicas: no error")
	}
}

func streamInfo(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return info
}
