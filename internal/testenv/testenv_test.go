package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestServersRestart checks that each dependency is real and that etcd and
// NATS keep their data across a stop and start.
func TestServersRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1: %v %d", err, one)
	}
	conn.Close(ctx)

	e := Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("etcd after restart: %v %v", err, resp)
	}

	n := NATS(t)
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if s.CachedInfo().State.Msgs != 1 {
		t.Fatalf("stream after restart has %d messages, want 1", s.CachedInfo().State.Msgs)
	}
}
