package testenv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdClusterMemberRestartsIntoTheCluster: with one member of three
// down, writes go on; the member restarts into the same cluster with its
// data and the writes made without it.
func TestEtcdClusterMemberRestartsIntoTheCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c := EtcdCluster(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c.Stop(0)
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put with one member of three down: %v", err)
	}
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	members, err := cli.MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("members after the restart: %v %v", err, members)
	}
	one, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()[:1], DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	WaitFor(t, 20*time.Second, "the restarted member to serve the write made without it", func() bool {
		resp, err := one.Get(ctx, "/k")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v"
	})
}

// TestNATSClusterServerRestartsWithItsPorts: a replicated stream keeps
// taking messages with one server of three down, and the server comes
// back on its port and catches up.
func TestNATSClusterServerRestartsWithItsPorts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c := NATSCluster(t)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	port := c.Servers[1].Port
	c.Stop(1)
	// A publish caught in the stream's leader election gets no ack: it
	// is sent again, with its message id, as tock's dispatcher does, and
	// JetStream keeps one copy.
	for i := range 3 {
		publishUntilAcked(ctx, t, js, "t.a", strconv.Itoa(i))
	}
	if err := c.Start(1); err != nil {
		t.Fatal(err)
	}
	if c.Servers[1].Port != port {
		t.Errorf("server restarted on port %d, want %d", c.Servers[1].Port, port)
	}
	WaitFor(t, 30*time.Second, "the restarted server's replica to catch up", func() bool {
		s := c.Servers[1].Server()
		return s != nil && s.JetStreamIsStreamCurrent("$G", "T")
	})
	st, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("stream after the restart: %v, %+v", err, info)
	}
}

// publishUntilAcked publishes a message with id until JetStream
// acknowledges it, waiting 5 s for each ack.
func publishUntilAcked(ctx context.Context, t *testing.T, js jetstream.JetStream, subject, id string) {
	t.Helper()
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, subject, []byte("x"), jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("publish %s with one server of three down: %v", id, err)
		}
	}
}
