package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

func TestCancelRetryAndHandlers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	js := testenv.JetStream(t)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{
		Store:     st,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry:  prometheus.NewRegistry(),
		Executors: api.JetStreamExecutors{JS: js},
		Open:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	u := hs.URL

	out := ok(t, u, "jobs", "create", "--name", "mail", "--custom", "send-email", "--priority", "high", "--max-attempts", "2", "--backoff", "5s")
	id := uuidRE.FindString(out)
	j, err := st.GetJob(ctx, mustUUID(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if j.Priority != "high" || j.Retry.MaxAttempts != 2 || j.Retry.InitialBackoff != "5s" {
		t.Errorf("created job: priority %q retry %+v", j.Priority, j.Retry)
	}
	now, _ := st.Now(ctx)
	x, err := st.CreateManualExecution(ctx, j.ID, now)
	if err != nil {
		t.Fatal(err)
	}

	// Cancel: recorded, and executors told through the cancel bucket.
	if out := ok(t, u, "executions", "cancel", x.ID.String()); !strings.Contains(out, "cancelled") {
		t.Errorf("cancel output:\n%s", out)
	}
	kv, err := js.KeyValue(ctx, wire.CancelBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, x.ID.String()); err != nil {
		t.Errorf("cancel bucket has no key for the execution: %v", err)
	}

	// A dead letter, listed across jobs and re-driven.
	y, err := st.CreateManualExecution(ctx, j.ID, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := st.RecordAttemptEvents(ctx, []model.AttemptEvent{{ID: y.ID, Attempt: 1, Executor: "x", At: now,
		Type: domain.EventFailed, Final: true, Error: "boom"}}); err != nil || res[0] != nil {
		t.Fatalf("record: %v %v", err, res)
	}
	if r := rows(t, ok(t, u, "executions", "list", "--state", "dead"), execHeader); len(r) != 1 || !strings.Contains(r[0], y.ID.String()) {
		t.Errorf("dead letters: %v", r)
	}
	// The search: several states, a relative time, a count on stderr.
	res := tockctl(t, u, "executions", "list", "--state", "failed,dead", "--since", "24h", "--error", "BOOM", "--count")
	if r := rows(t, res.stdout, execHeader); res.code != 0 || len(r) != 1 || !strings.Contains(r[0], y.ID.String()) ||
		!strings.Contains(res.stderr, "1 executions match") {
		t.Errorf("search: exit %d, rows %v, stderr %s", res.code, r, res.stderr)
	}
	if res := tockctl(t, u, "executions", "list", "--since", "yesterday"); res.code != 1 || !strings.Contains(res.stderr, "since") {
		t.Errorf("a bad --since: exit %d, stderr %s", res.code, res.stderr)
	}
	// Statistics: the namespace's executions by state (the dead letter is
	// scheduled a minute ahead, after the range, which ends now: a second
	// ahead was not enough on a loaded machine).
	if out := ok(t, u, "stats", "--by", "namespace", "--since", "1h"); !strings.Contains(out, "KEY") ||
		!strings.Contains(out, "default") {
		t.Errorf("stats:\n%s", out)
	}
	var rep models.StatsReport
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "stats", "--by", "namespace", "--since", "1h")), &rep); err != nil ||
		len(rep.Groups) != 1 || rep.Groups[0].Counts["cancelled"] != 1 || rep.Groups[0].Total != 1 {
		t.Errorf("stats as JSON: %+v, %v", rep, err)
	}
	if out := ok(t, u, "executions", "retry", y.ID.String()); !strings.Contains(out, "queued") {
		t.Errorf("retry output:\n%s", out)
	}
	if r := tockctl(t, u, "executions", "retry", y.ID.String()); r.code != 1 || !strings.Contains(r.stderr, "not dead") {
		t.Errorf("second retry: exit %d, stderr %s", r.code, r.stderr)
	}
	// Queued again, it says why it waits.
	if out := ok(t, u, "executions", "get", y.ID.String()); !strings.Contains(out, "\nwaiting: ") {
		t.Errorf("a queued execution without its reason:\n%s", out)
	}

	// Handlers as executors report them.
	probe := now.Add(30 * time.Second).UTC().Truncate(time.Second)
	hkv, err := js.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.PutBreakerState(ctx, hkv, wire.BreakerState{Key: "send-email", Queue: "send-email", ExecutorID: "x1",
		Breaker: wire.BreakerOpen, Since: now, Requests: 10, Failures: 8, InFlight: 1, Limit: 4, UpdatedAt: now,
		Reason: "8 of 10 attempts failed within 1m0s", ProbeAt: &probe}); err != nil {
		t.Fatal(err)
	}
	out = ok(t, u, "handlers")
	if r := rows(t, out, "HANDLER"); len(r) != 1 || !strings.Contains(r[0], "send-email") || !strings.Contains(r[0], "open") ||
		!strings.Contains(r[0], "8/10") || !strings.Contains(r[0], "1/4") ||
		!strings.Contains(r[0], "8 of 10 attempts failed within 1m0s; next probe "+probe.Format(time.RFC3339)) {
		t.Errorf("handlers:\n%s", out)
	}
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatalf("not a uuid: %q", s)
	}
	return id
}
