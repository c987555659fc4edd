package pgha_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/pgha"
)

// TestFailoverKeepsCommits starts a primary and a synchronous standby,
// commits through the multi-host URL, and checks that every commit is
// still there after a switchover, a failover and a kill -9 of the
// primary, each time through the same URL (target_session_attrs finds the
// new primary).
func TestFailoverKeepsCommits(t *testing.T) {
	c := pgha.Test(t, pgha.Config{TTL: 6})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := c.URL("postgres")
	exec(t, ctx, url, "CREATE TABLE t (n int PRIMARY KEY)")
	n := 0
	insert := func() {
		t.Helper()
		n++
		exec(t, ctx, url, "INSERT INTO t VALUES ($1)", n)
	}
	insert()
	steps := []struct {
		name string
		do   func() (*pgha.Member, error)
	}{
		{"switchover", func() (*pgha.Member, error) { return c.Switchover(ctx) }},
		{"failover", func() (*pgha.Member, error) { return c.Failover(ctx, nil) }},
		{"kill -9", func() (*pgha.Member, error) {
			old, err := c.KillPrimary(ctx)
			if err != nil {
				return nil, err
			}
			start := time.Now()
			l, err := c.WaitLeader(ctx, old)
			t.Logf("kill -9 of the primary: %s leads after %v", l.Name, time.Since(start).Round(time.Millisecond))
			if err == nil {
				err = c.Restart(old)
			}
			return l, err
		}},
	}
	for _, s := range steps {
		insert()
		l, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := count(t, ctx, c.MemberURL(l, "postgres"))
		if got != n {
			t.Fatalf("after %s, the new primary %s has %d rows, want %d", s.name, l.Name, got, n)
		}
		insert()
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatalf("after %s: %v", s.name, err)
		}
	}
}

func exec(t *testing.T, ctx context.Context, url, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_, err = conn.Exec(ctx, sql, args...)
			conn.Close(ctx)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", sql, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func count(t *testing.T, ctx context.Context, url string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
