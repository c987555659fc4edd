package node_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/pgha"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node/nodetest"
)

// TestPostgresFailoverDuringFiring runs every-second jobs through a node
// connected to a Patroni cluster (a primary and a synchronous standby)
// by its multi-host URL, kills the primary with SIGKILL mid-firing, and
// checks that the node finds the new primary by itself: every scheduled
// time fired exactly once (none lost with synchronous replication, none
// twice when a firing's commit was cut off), firing resumed within a
// bound, and /readyz said not ready during the outage and ready after.
// A switchover back to the restarted member follows, with the same
// checks of exactly once.
func TestPostgresFailoverDuringFiring(t *testing.T) {
	etcd := testenv.Etcd(t)
	c := pgha.Test(t, pgha.Config{Etcd: etcd.Endpoint(), TTL: 6})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createDatabase(t, ctx, c.URL("postgres"), "tock")
	e := &nodetest.Env{PG: c.URL("tock") + "&pool_max_conns=8", Etcd: etcd, NATS: testenv.NATS(t)}
	e.Echo(t, "pgfo")
	n := e.Start(t, "n1")
	jobs := n.EverySecondJobs(t, "pgfo", 5)
	time.Sleep(3 * time.Second)
	start := time.Now()
	time.Sleep(3 * time.Second)

	ready := watchReadyz(ctx, n.URL)
	killed := time.Now()
	old, err := c.KillPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.WaitLeader(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(killed)
	resumed := waitFiring(t, ctx, c.URL("tock"), killed.Add(promoted))
	resumed += promoted
	t.Logf("primary %s killed (SIGKILL); %s promoted after %v (leader key TTL 6s); firing resumed %v after the kill",
		old.Name, l.Name, promoted.Round(time.Millisecond), resumed.Round(time.Millisecond))
	if bound := 30 * time.Second; resumed > bound {
		t.Errorf("firing resumed %v after the kill, want within %v", resumed, bound)
	}
	nodetest.WaitFor(t, 20*time.Second, "/readyz ready again", func() bool { return ready.last() == http.StatusOK })
	if !ready.saw(http.StatusServiceUnavailable) {
		t.Errorf("/readyz never answered 503 while the primary was down (codes %v)", ready.codes())
	}
	// The killed member rejoins as a standby; a switchover then makes it
	// the primary again: the other member, still up, now takes only
	// read-only sessions, which target_session_attrs=read-write skips.
	if err := c.Restart(old); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	switched := time.Now()
	if _, err := c.Switchover(ctx); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	resumed = done.Sub(switched) + waitFiring(t, ctx, c.URL("tock"), done)
	t.Logf("switchover: the new primary took writes %v after the request, firing resumed %v after it",
		done.Sub(switched).Round(time.Millisecond), resumed.Round(time.Millisecond))
	time.Sleep(4 * time.Second)
	stop := time.Now().Add(-2 * time.Second)
	nodetest.AssertExactlyOnce(t, e.PG, jobs, start, stop)
	if got := n.Metric(t, "tock_postgres_up"); got != 1 {
		t.Errorf("tock_postgres_up = %v after the failover, want 1", got)
	}
	if got := n.Metric(t, "tock_postgres_outages_total"); got < 1 {
		t.Errorf("tock_postgres_outages_total = %v, want at least 1", got)
	}
}

// createDatabase creates database name on the server at url.
func createDatabase(t *testing.T, ctx context.Context, url, name string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
}

// waitFiring waits until an execution is created after since, and
// returns how long after since it was (by the database's clock).
func waitFiring(t *testing.T, ctx context.Context, url string, since time.Time) time.Duration {
	t.Helper()
	var first time.Time
	nodetest.WaitFor(t, 60*time.Second, "an execution fired after the failover", func() bool {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var at *time.Time
		err = conn.QueryRow(ctx, "SELECT min(created_at) FROM executions WHERE created_at > $1", since).Scan(&at)
		if err != nil || at == nil {
			return false
		}
		first = *at
		return true
	})
	return first.Sub(since)
}

// readyzWatch is the status codes of GET /readyz, polled every 200 ms.
type readyzWatch struct {
	mu   sync.Mutex
	seen []int
}

func watchReadyz(ctx context.Context, base string) *readyzWatch {
	w := &readyzWatch{}
	cl := &http.Client{Timeout: 3 * time.Second}
	go func() {
		for ctx.Err() == nil {
			code := 0
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
			if resp, err := cl.Do(req); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			w.mu.Lock()
			if len(w.seen) == 0 || w.seen[len(w.seen)-1] != code {
				w.seen = append(w.seen, code)
			}
			w.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return w
}

func (w *readyzWatch) codes() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.seen...)
}

func (w *readyzWatch) last() int {
	c := w.codes()
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1]
}

func (w *readyzWatch) saw(code int) bool {
	for _, c := range w.codes() {
		if c == code {
			return true
		}
	}
	return false
}
