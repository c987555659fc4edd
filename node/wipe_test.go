package node_test

// Wiping NATS JetStream or etcd while every-second jobs run. tock keeps
// the truth in Postgres, so neither wipe may lose, double or re-run a
// scheduled time: each still fires once, reaches a handler, and ends
// finished in Postgres.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/wire"
)

// wipeJobs is how many every-second jobs the wipe tests run.
const wipeJobs = 40

// handlerCall is one call of the test's handler.
type handlerCall struct {
	attempt  int
	dispatch int
	at       time.Time
}

// handlerCalls records every call of the test's handler, by execution
// id, and can stop the handler in the middle of one second's executions.
type handlerCalls struct {
	mu    sync.Mutex
	calls map[string][]handlerCall
	// Of the executions scheduled for second: how many calls the
	// handler saw, who waits for a count, and after how many calls the
	// handler holds each further one until released is closed (0: never).
	second   time.Time
	seen     int
	waiters  map[int]chan struct{}
	holdFrom int
	released chan struct{}
}

func (h *handlerCalls) handle(_ context.Context, x *executor.Execution) (string, error) {
	h.mu.Lock()
	h.calls[x.ExecutionID] = append(h.calls[x.ExecutionID], handlerCall{attempt: x.Attempt, dispatch: x.Dispatch, at: time.Now()})
	hold := false
	if x.ScheduledFor.Equal(h.second) {
		h.seen++
		if c, ok := h.waiters[h.seen]; ok {
			close(c)
		}
		hold = h.holdFrom > 0 && h.seen > h.holdFrom
	}
	released := h.released
	h.mu.Unlock()
	if hold {
		<-released
	}
	return "ok", nil
}

// watch starts counting the calls for second: after n calls, each
// further one is held until release. It returns a channel per count in
// counts, closed when the handler has seen that many.
func (h *handlerCalls) watch(second time.Time, holdFrom int, counts ...int) []chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.second, h.seen, h.holdFrom, h.released = second, 0, holdFrom, make(chan struct{})
	h.waiters = map[int]chan struct{}{}
	out := make([]chan struct{}, len(counts))
	for i, n := range counts {
		out[i] = make(chan struct{})
		h.waiters[n] = out[i]
	}
	return out
}

// release lets held calls go on.
func (h *handlerCalls) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holdFrom > 0 {
		close(h.released)
		h.holdFrom = 0
	}
}

// await waits for c, failing the test after d.
func await(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// callsText is calls for a log line.
func callsText(calls []handlerCall) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = fmt.Sprintf("attempt %d of dispatch %d at %s", c.attempt, c.dispatch, c.at.UTC().Format("15:04:05.000"))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (h *handlerCalls) of(id string) []handlerCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]handlerCall(nil), h.calls[id]...)
}

// wipeCluster is two tockd processes sharing the buckets (api,
// scheduler and executor roles), a third one recording events (recorder
// role), a custom executor in this process (the SDK, as a user's program)
// recording every handler call, and wipeJobs every-second jobs on it.
type wipeCluster struct {
	e        *nodetest.Env
	cli      *clientv3.Client
	api      *nodetest.Node
	bases    []string // both scheduler nodes' API addresses
	recorder *nodetest.Node
	jobs     []uuid.UUID
	calls    *handlerCalls
	from     time.Time // the window's first scheduled time
	// A second handler, <handler>-cancel, runs until its execution is
	// cancelled: it sends its execution id to started, then how its
	// context ended to stopped.
	cancelHandler string
	started       chan string
	stopped       chan error
	// The test's executor's metrics, on a registry of the test's own.
	metrics *prometheus.Registry
}

func startWipeCluster(t *testing.T, handler string) *wipeCluster {
	t.Helper()
	e := nodetest.New(t)
	cli := e.EtcdClient(t)
	a := e.StartProcess(t, "a", "--roles", "api,scheduler,executor")
	b := e.StartProcess(t, "b", "--roles", "api,scheduler,executor")
	r := e.StartProcess(t, "r", "--roles", "recorder")
	nodetest.WaitFor(t, 20*time.Second, "a and b to share the buckets", func() bool {
		o := nodetest.Owners(t, cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	c := &wipeCluster{e: e, cli: cli, api: a, bases: []string{a.URL, b.URL}, recorder: r,
		calls: &handlerCalls{calls: map[string][]handlerCall{}}, cancelHandler: handler + "-cancel",
		started: make(chan string, 10), stopped: make(chan error, 10)}

	nc, err := nats.Connect(e.NATS.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Four at a time: each second's executions queue up in JetStream
	// for a moment, so the wipe finds work in every place it can be.
	c.metrics = prometheus.NewRegistry()
	w, err := executor.New(executor.Config{NATS: nc, ExecutorID: "wipe-executor", Concurrency: 4,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: c.metrics})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(handler, c.calls.handle)
	w.Handle(c.cancelHandler, func(ctx context.Context, x *executor.Execution) (string, error) {
		c.started <- x.ExecutionID
		<-ctx.Done()
		c.stopped <- context.Cause(ctx)
		return "", context.Cause(ctx)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
		nc.Close()
	})

	c.jobs = createJobsConcurrently(t, a, handler, wipeJobs)
	c.from = time.Now().Add(2 * time.Second).Truncate(time.Second)
	c.waitFinished(t, c.from.Add(time.Second), 20*time.Second, "the first seconds of the window to run")
	t.Cleanup(c.calls.release)
	return c
}

// wipeInFlight calls wipe at a moment when one second's executions are
// in every place JetStream holds work: some run and recorded, some run
// with their events waiting for a recorder (the recorder process is
// killed for it, as if its node had crashed, and started again after the
// wipe), four running in the handler (held until the wipe is over), and
// the rest waiting in the exec stream. It returns when wipe began. With
// recorderLate, the recorder comes back only once the nodes have
// published the lost executions again: the events the executor sends
// again are then still unrecorded when those executions reach it.
func (c *wipeCluster) wipeInFlight(t *testing.T, recorderLate bool, wipe func()) time.Time {
	t.Helper()
	second := time.Now().Truncate(time.Second).Add(2 * time.Second)
	reached := c.calls.watch(second, wipeJobs/2, wipeJobs/4, wipeJobs/2)
	await(t, reached[0], 15*time.Second, "the handler to run a quarter of a second's executions")
	c.recorder.Kill(t)
	await(t, reached[1], 15*time.Second, "the handler to run half of a second's executions")
	wiped := time.Now()
	wipe()
	c.calls.release()
	if recorderLate {
		// Until an execution the executor had run has come back to it:
		// the nodes publish the lost executions again bucket by bucket,
		// and a recorder started at the first of them could record the
		// executor's resent events before the rest are published, so
		// that none it had run reaches it again.
		nodetest.WaitFor(t, 30*time.Second, "the nodes to publish the lost executions again, and one the executor "+
			"had run to reach it again", func() bool {
			r := c.counters(t)
			return r.requeued > 0 && r.answered > 0
		})
	}
	c.recorder = c.e.StartProcess(t, "r", "--roles", "recorder")
	return wiped
}

// recoveryCounters are tock's counts of what it did after a wipe.
type recoveryCounters struct {
	requeued float64 // by the nodes: executions published again
	resent   float64 // by the test's executor: events sent again
	answered float64 // by the test's executor: deliveries answered from its journal
}

func (c *wipeCluster) counters(t *testing.T) recoveryCounters {
	t.Helper()
	var r recoveryCounters
	for _, base := range c.bases {
		r.requeued += nodetest.Scrape(t, base, "tock_wipe_requeued_total")
	}
	r.resent = counter(t, c.metrics, "tock_executor_events_resent_total")
	r.answered = counter(t, c.metrics, "tock_executor_redeliveries_answered_total")
	return r
}

// waitFinished waits until every job has a succeeded execution for every
// second of the window up to to.
func (c *wipeCluster) waitFinished(t *testing.T, to time.Time, d time.Duration, what string) {
	t.Helper()
	st := nodetest.OpenStore(t, c.e.PG)
	deadline := time.Now().Add(d)
	for {
		var n int
		if err := st.Pool().QueryRow(context.Background(), `
			SELECT count(*) FROM unnest($1::uuid[]) AS j(id)
			CROSS JOIN generate_series($2::timestamptz, $3::timestamptz, interval '1 second') AS s(at)
			LEFT JOIN executions e ON e.job_id = j.id AND e.scheduled_for = s.at
			WHERE e.state IS DISTINCT FROM 'succeeded'`, c.jobs, c.from, to).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.logUnfinished(t, to)
			t.Fatalf("timed out after %s waiting for %s: %d executions of %s to %s not succeeded",
				d, what, n, c.from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logUnfinished logs a few executions of the window that have not
// succeeded, with what the handler saw of them.
func (c *wipeCluster) logUnfinished(t *testing.T, to time.Time) {
	t.Helper()
	rows, err := nodetest.OpenStore(t, c.e.PG).Pool().Query(context.Background(), `
		SELECT e.id, e.state, e.attempts, e.dispatches, e.dispatched_at, e.next_attempt_at, e.error
		FROM executions e WHERE e.job_id = ANY($1) AND e.scheduled_for BETWEEN $2 AND $3
			AND e.state <> 'succeeded'
		ORDER BY e.scheduled_for LIMIT 20`, c.jobs, c.from, to)
	if err != nil {
		t.Logf("unfinished executions: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, state, msg       string
			attempts, dispatches int
			dispatched, next     *time.Time
		)
		if err := rows.Scan(&id, &state, &attempts, &dispatches, &dispatched, &next, &msg); err != nil {
			t.Logf("unfinished executions: %v", err)
			return
		}
		t.Logf("unfinished: %s %s attempts=%d dispatches=%d dispatched_at=%v next_attempt_at=%v error=%q; handler calls %s",
			id, state, attempts, dispatches, dispatched, next, msg, callsText(c.calls.of(id)))
	}
}

// check asserts what a user would check after the wipe, for every job and
// every second of [c.from, to]: exactly one execution in Postgres, and it
// succeeded (every execution of the window finished); the handler saw it;
// and no execution ran twice as attempt 1.
func (c *wipeCluster) check(t *testing.T, wiped, to time.Time) {
	t.Helper()
	c.waitFinished(t, to, 30*time.Second, "every execution of the window to succeed")
	t.Logf("every execution of the window succeeded %s after the wipe", time.Since(wiped).Round(time.Millisecond))
	nodetest.AssertExactlyOnce(t, c.e.PG, c.jobs, c.from, to)

	rows, err := nodetest.OpenStore(t, c.e.PG).Pool().Query(context.Background(), `
		SELECT id, attempts, dispatches FROM executions
		WHERE job_id = ANY($1) AND scheduled_for BETWEEN $2 AND $3 ORDER BY scheduled_for, id`, c.jobs, c.from, to)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	attempts, dispatches := map[string]int{}, map[string]int{}
	for rows.Next() {
		var id string
		var a, d int
		if err := rows.Scan(&id, &a, &d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		attempts[id], dispatches[id] = a, d
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var unseen, twiceFirst, again, before int
	for _, id := range ids {
		calls := c.calls.of(id)
		if len(calls) == 0 {
			unseen++
			if unseen <= 10 {
				t.Errorf("execution %s succeeded in Postgres but the handler never saw it", id)
			}
			continue
		}
		if calls[0].at.Before(wiped) {
			before++
		}
		firsts := 0
		for _, call := range calls {
			if call.attempt == 1 {
				firsts++
			}
		}
		if firsts > 1 {
			twiceFirst++
			t.Errorf("execution %s ran %d times as attempt 1: %s (wiped at %s; Postgres: %d attempts, %d dispatches)",
				id, firsts, callsText(calls), wiped.UTC().Format("15:04:05.000"), attempts[id], dispatches[id])
		}
		if len(calls) > 1 {
			again++
		}
	}
	if unseen > 10 {
		t.Errorf("... %d executions in all that the handler never saw", unseen)
	}
	t.Logf("%d executions in the window (%s to %s), %d handled before the wipe at %s; %d handled more than once, %d ran twice as attempt 1",
		len(ids), c.from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"), before,
		wiped.UTC().Format("15:04:05.000"), again, twiceFirst)
	r := c.counters(t)
	t.Logf("the nodes re-queued %.0f executions lost with the exec stream; the test's executor sent %.0f events again "+
		"and answered %.0f deliveries of attempts it had run with their result", r.requeued, r.resent, r.answered)
}

// counter is the sum of the series of the metric name in g.
func counter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// waitRecovered waits until the jobs run again after a wipe at wiped,
// and returns the end of the window to check: a few seconds later.
func (c *wipeCluster) waitRecovered(t *testing.T, wiped time.Time) time.Time {
	t.Helper()
	// The first second that fires after the wipe, then two more.
	first := wiped.Truncate(time.Second).Add(time.Second)
	st := nodetest.OpenStore(t, c.e.PG)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		_ = st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM executions
			WHERE job_id = ANY($1) AND scheduled_for > $2 AND state = 'succeeded'`, c.jobs, first).Scan(&n)
		if n >= len(c.jobs) {
			break
		}
		if time.Now().After(deadline) {
			c.logUnfinished(t, time.Now())
			logConsumers(t, c.e.NATS.URL())
			t.Fatalf("timed out after 30s waiting for the jobs to run again after the wipe")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the jobs ran again %s after the wipe", time.Since(wiped).Round(time.Millisecond))
	return time.Now().Add(2 * time.Second).Truncate(time.Second)
}

// assertCancelStops checks that cancelling an execution through the API
// still stops its running attempt: executors hear of it through the
// TOCK_CANCELLED key-value bucket, which a JetStream wipe takes too.
func (c *wipeCluster) assertCancelStops(t *testing.T) {
	t.Helper()
	id := c.api.RunOnce(t, map[string]any{"name": "cancelled-after-the-wipe",
		"handler": map[string]any{"type": "custom", "name": c.cancelHandler}})
	select {
	case got := <-c.started:
		if got != id.String() {
			t.Fatalf("the cancel handler started %s, want %s", got, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the execution to cancel never started")
	}
	asked := time.Now()
	if code := nodetest.Code(c.api.Client.CancelExecutionWithResponse(context.Background(), id)); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	select {
	case cause := <-c.stopped:
		if !errors.Is(cause, executor.ErrCancelled) {
			t.Errorf("the attempt's context ended with %v, want executor.ErrCancelled", cause)
		}
		t.Logf("after the wipe, a cancel through the API stopped its running attempt in %s", time.Since(asked).Round(time.Millisecond))
	case <-time.After(2 * time.Second):
		t.Fatal("a cancel through the API did not stop the running attempt within 2 s after the wipe")
	}
}

// assertStreamsBack checks that the streams and key-value buckets that
// carry tock's work exist again, as `nats stream ls` would show them.
func assertStreamsBack(t *testing.T, url string) {
	t.Helper()
	js := jsFor(t, url)
	nodetest.WaitFor(t, 15*time.Second, "tock's streams and key-value buckets to exist again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range []string{wire.ExecStream, wire.EventStream, "KV_" + wire.CancelBucket, "KV_" + wire.BreakerBucket} {
			if _, err := js.Stream(ctx, s); err != nil {
				return false
			}
		}
		return true
	})
}

func jsFor(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// The recorder comes back at once: the events the executor sends again
// are recorded before the nodes publish the lost executions again, so
// those it had run are not published at all.
func TestWipeJetStreamStreamsDeleted(t *testing.T) {
	c := startWipeCluster(t, "wipe-streams")
	js := jsFor(t, c.e.NATS.URL())

	// Delete every stream tock uses, as `nats stream rm` would: the
	// events waiting for the recorders, the executions waiting for
	// executors, and the key-value buckets.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wiped := c.wipeInFlight(t, false, func() {
		began := time.Now()
		for _, s := range []string{wire.EventStream, wire.ExecStream, "KV_" + wire.CancelBucket, "KV_" + wire.BreakerBucket} {
			if err := js.DeleteStream(ctx, s); err != nil {
				t.Errorf("delete stream %s: %v", s, err)
			}
		}
		t.Logf("deleted the streams in %s", time.Since(began).Round(time.Millisecond))
	})
	to := c.waitRecovered(t, wiped)
	assertStreamsBack(t, c.e.NATS.URL())
	c.check(t, wiped, to)
	if r := c.counters(t); r.requeued == 0 || r.resent == 0 {
		t.Errorf("the wipe lost no execution or no event (%+v): the test no longer wipes work in flight", r)
	}
	c.assertCancelStops(t)
}

// The recorder comes back only after the nodes have published the lost
// executions again: those the executor had run reach it again, and it
// answers them from its journal instead of running them.
func TestWipeJetStreamRestartedEmpty(t *testing.T) {
	c := startWipeCluster(t, "wipe-nats")

	// NATS restarts on the same address with an empty store: every
	// stream, consumer, message and key-value bucket is gone.
	dir := t.TempDir()
	wiped := c.wipeInFlight(t, true, func() {
		began := time.Now()
		c.e.NATS.Stop()
		c.e.NATS.Dir = dir
		if err := c.e.NATS.Start(); err != nil {
			t.Error(err)
		}
		t.Logf("NATS restarted empty in %s", time.Since(began).Round(time.Millisecond))
	})
	to := c.waitRecovered(t, wiped)
	assertStreamsBack(t, c.e.NATS.URL())
	c.check(t, wiped, to)
	c.assertCancelStops(t)
}

func TestWipeEtcdRestartedEmpty(t *testing.T) {
	c := startWipeCluster(t, "wipe-etcd")

	// etcd restarts on the same address with a new data directory: no
	// members, no owners, no leases, and revisions start again near 1.
	// While a second's executions run.
	reached := c.calls.watch(time.Now().Truncate(time.Second).Add(2*time.Second), 0, wipeJobs/4)
	await(t, reached[0], 15*time.Second, "the handler to run a quarter of a second's executions")
	wiped := time.Now()
	c.e.Etcd.Stop()
	c.e.Etcd.Dir = t.TempDir()
	if err := c.e.Etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd restarted empty in %s", time.Since(wiped).Round(time.Millisecond))
	nodetest.WaitFor(t, 30*time.Second, "a and b to own every bucket again", func() bool {
		o := nodetest.Owners(t, c.cli)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == 16
	})
	t.Logf("every bucket owned again %s after the wipe (%s)", time.Since(wiped).Round(time.Millisecond), sortedKeys(nodetest.Owners(t, c.cli)))
	to := c.waitRecovered(t, wiped)
	c.check(t, wiped, to)
}
