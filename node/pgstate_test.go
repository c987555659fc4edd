package node

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
)

// A node's Postgres check sets tock_postgres_up and /readyz from what the
// database answers: ready while it does, 503 and one outage counted once
// it no longer does (here: its pool closed). Ready again after a
// failover is TestPostgresFailoverDuringFiring's.
func TestPostgresStateFollowsTheDatabase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, testenv.Postgres(t)+"&pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := watchPostgres(ctx, st, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	readyz := func() int {
		w := httptest.NewRecorder()
		p.readyz(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return w.Code
	}
	time.Sleep(2 * pgProbeInterval)
	if code, up := readyz(), testutil.ToFloat64(p.upG); code != http.StatusOK || up != 1 {
		t.Fatalf("database up: /readyz %d, tock_postgres_up %v; want 200, 1", code, up)
	}
	st.Close()
	defer func() { cancel(); p.wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for readyz() != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("/readyz still ready 10s after the database went away")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if up, n := testutil.ToFloat64(p.upG), testutil.ToFloat64(p.outages); up != 0 || n != 1 {
		t.Errorf("database gone: tock_postgres_up %v, tock_postgres_outages_total %v; want 0, 1", up, n)
	}
}
