package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
)

// tockd dev creates its database even when --postgres-url carries pool
// settings, which a plain connection would send to Postgres.
func TestEnsureDatabaseWithPoolSettings(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := os.Getenv("TOCK_TEST_POSTGRES_URL")
	if admin == "" {
		admin = testenv.DefaultPostgresURL
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tock_test_dev_" + hex.EncodeToString(b[:])
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	plain := u.String()
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()

	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	for range 2 { // the second time, it exists already
		if err := node.EnsureDatabase(ctx, u.String()); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, plain)
	if err != nil {
		t.Fatalf("the database was not created: %v", err)
	}
	conn.Close(ctx)
}
