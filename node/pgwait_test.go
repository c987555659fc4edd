package node

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/storetest"
)

// TestStoreWaitsForPostgres: a node started before its Postgres answers
// (a cluster coming up, a failover in progress) waits for it and starts
// when it answers; the node started against a database that does not
// exist fails at once instead.
func TestStoreWaitsForPostgres(t *testing.T) {
	pg := storetest.Postgres(t)
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	gate := testenv.NewProxy(t, u.Host, false) // Postgres down until gate.SetUp(true)
	u.Host = gate.Addr

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Roles: AllRoles, PostgresURL: u.String(), Migrate: true, Buckets: 16}
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		st, err := storeFor(ctx, ctx, &cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			err = st.Pool().Ping(ctx)
			st.Close()
		}
		done <- result{err, time.Now()}
	}()

	// Postgres "comes up" only after the node has been turned away three
	// times: the node must still be waiting then.
	for gate.Refused() < 3 {
		select {
		case r := <-done:
			t.Fatalf("storeFor returned (err %v) while no Postgres answered", r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	opened := time.Now()
	gate.SetUp(true)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("storeFor after Postgres came up: %v", r.err)
		}
		// The pause between tries doubles up to 5 s: the node starts
		// within one pause of Postgres answering.
		if wait := r.at.Sub(opened); wait > 10*time.Second {
			t.Errorf("storeFor returned %v after Postgres came up, want within one retry pause", wait)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("storeFor still waiting 30 s after Postgres came up")
	}

	// A server that refuses the node (no such database) fails the start at once.
	u, _ = url.Parse(pg)
	u.Path = "/tock_no_such_database"
	start := time.Now()
	bad := Config{Roles: AllRoles, PostgresURL: u.String(), Migrate: true, Buckets: 16}
	if _, err := storeFor(ctx, ctx, &bad, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("storeFor on a database that does not exist: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("storeFor on a database that does not exist took %v, want an error at once", d)
	}
}
