package api

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

// sseEvent is one server-sent event as a client sees it.
type sseEvent struct {
	id, event, data string
	change          changes.Change
}

// sseStream is an open GET /v1/changes.
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

// watch opens GET /v1/changes with query q, the key (none: "") and
// Last-Event-ID lastID (none: ""), and fails the test unless it answers
// 200 text/event-stream.
func (a *authEnv) watch(t *testing.T, key, q, lastID string) *sseStream {
	t.Helper()
	s, status := a.openWatch(t, key, q, lastID)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/changes?%s: %d", q, status)
	}
	return s
}

func (a *authEnv) openWatch(t *testing.T, key, q, lastID string) (*sseStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.http.URL+"/v1/changes?"+q, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	s := &sseStream{resp: resp, events: make(chan sseEvent, 1000), cancel: cancel}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "":
				if ev.event != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case "id":
				ev.id = value
			case "event":
				ev.event = value
			case "data":
				ev.data = value
				_ = json.Unmarshal([]byte(value), &ev.change)
			}
		}
	}()
	t.Cleanup(s.close)
	return s, http.StatusOK
}

func (s *sseStream) close() { s.cancel(); s.resp.Body.Close() }

// until reads events until one satisfies ok, and returns it and the ids
// seen on the way; it fails the test after 10 s or when the stream ends.
func (s *sseStream) until(t *testing.T, what string, ok func(sseEvent) bool) (sseEvent, []sseEvent) {
	t.Helper()
	var seen []sseEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-s.events:
			if !open {
				t.Fatalf("the stream ended before %s (saw %+v)", what, seen)
			}
			seen = append(seen, ev)
			if ok(ev) {
				return ev, seen
			}
		case <-deadline:
			t.Fatalf("no %s within 10 s (saw %+v)", what, seen)
		}
	}
}

func newChangesEnv(t *testing.T, buffer int) *authEnv {
	t.Helper()
	js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wire.EnsureChangeStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	e := newEnvWith(t, st, func(c *Config) {
		c.Open = false
		c.Changes = changes.NewFeed(js, slog.New(slog.DiscardHandler))
		c.ChangeBuffer = buffer
	})
	e.store = st
	a := &authEnv{env: e}
	a.admin = a.key("*", "admin", nil)
	return a
}

// TestChangesStream: GET /v1/changes streams the jobs and executions
// changed through the API, of the caller's namespace only, as the lists
// it mirrors; and a client that reconnects with Last-Event-ID gets what
// happened while it was away, nothing lost and nothing twice.
func TestChangesStream(t *testing.T) {
	t.Parallel()
	a := newChangesEnv(t, 0)
	reader := a.key("team-a", "reader", nil)

	// Authorised like GET /v1/jobs: another namespace is a 403, no key a 401.
	if _, status := a.openWatch(t, reader, "namespace=team-b", ""); status != http.StatusForbidden {
		t.Errorf("a reader of team-a watching team-b: %d, want 403", status)
	}
	if _, status := a.openWatch(t, "", "", ""); status != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", status)
	}
	if r := a.doHeaders(http.MethodGet, "/v1/changes", nil, map[string]string{"Authorization": "Bearer " + reader, "Last-Event-ID": "x"}); r.status != http.StatusBadRequest || !hasField(r.problem(t), "Last-Event-ID") {
		t.Errorf("Last-Event-ID x: %d %s, want 400 naming Last-Event-ID", r.status, r.body)
	}

	s := a.watch(t, reader, "", "") // the key's own namespace, team-a
	inB := jobBody("b-job")
	inB["namespace"] = "team-b"
	mustStatus(t, a.as(a.admin, http.MethodPost, "/v1/jobs", inB), http.StatusCreated)
	inA := jobBody("a-job")
	inA["namespace"] = "team-a"
	inA["schedule"] = map[string]any{"cron": "0 0 * * * *"}
	r := a.as(a.admin, http.MethodPost, "/v1/jobs", inA)
	mustStatus(t, r, http.StatusCreated)
	var job struct{ ID string }
	r.decode(t, &job)

	created, seen := s.until(t, "team-a's job created", func(ev sseEvent) bool { return ev.event == "job" })
	if created.change.JobID != job.ID || created.change.State != "active" || created.change.Namespace != "team-a" || created.id == "" {
		t.Errorf("first event %+v, want job %s active in team-a, with an id", created, job.ID)
	}
	for _, ev := range seen {
		if ev.change.Namespace != "team-a" {
			t.Errorf("a reader of team-a was sent %+v", ev)
		}
	}

	// Away: the job is paused and run; back with Last-Event-ID.
	s.close()
	mustStatus(t, a.as(a.admin, http.MethodPost, "/v1/jobs/"+job.ID+"/pause", nil), http.StatusOK)
	mustStatus(t, a.as(a.admin, http.MethodPost, "/v1/jobs/"+job.ID+"/run", nil), http.StatusAccepted)
	back := a.watch(t, reader, "job_id="+job.ID, created.id)
	paused, _ := back.until(t, "the pause", func(ev sseEvent) bool { return ev.event == "job" })
	if paused.change.State != "paused" {
		t.Errorf("first event after reconnecting: %+v, want the job paused", paused)
	}
	run, _ := back.until(t, "the manual run", func(ev sseEvent) bool { return ev.event == "execution" })
	if run.change.JobID != job.ID || run.change.State != "queued" {
		t.Errorf("second event after reconnecting: %+v, want an execution of the job, queued", run)
	}
	// A bulk resume of the namespace: one change without a job, which a
	// watcher of one job gets too (reload).
	mustStatus(t, a.as(a.admin, http.MethodPost, "/v1/jobs:resume", map[string]any{"namespace": "team-a"}), http.StatusOK)
	bulk, _ := back.until(t, "the bulk resume", func(ev sseEvent) bool { return ev.event == "job" })
	if bulk.change.JobID != "" || bulk.change.Namespace != "team-a" {
		t.Errorf("event of a bulk resume: %+v, want one of team-a without a job", bulk)
	}
	mustStatus(t, a.as(a.admin, http.MethodDelete, "/v1/jobs/"+job.ID, nil), http.StatusNoContent)
	gone, _ := back.until(t, "the delete", func(ev sseEvent) bool { return ev.event == "job" })
	if gone.change.State != changes.StateDeleted || gone.change.JobID != job.ID {
		t.Errorf("event of the delete: %+v, want the job deleted", gone)
	}
}

// TestChangesStreamSlowClient: a client that falls a buffer behind is
// told to resync, and its stream ends, rather than holding up the feed.
func TestChangesStreamSlowClient(t *testing.T) {
	t.Parallel()
	a := newChangesEnv(t, 2)
	slow := a.watch(t, a.admin, "namespace=team-a", "")
	// Nothing reads slow's events while the changes are published: its
	// reader, then the connection's buffers, then the server's buffer of
	// 2 batches fill.
	big := strings.Repeat("x", 4000)
	const n = 10000
	for range n {
		a.srv.changes.Publish(changes.Change{Kind: changes.KindJob, Namespace: "team-a", JobID: big, State: "active", At: time.Now()})
	}
	ev, seen := slow.until(t, "a resync", func(ev sseEvent) bool { return ev.event == "resync" })
	if ev.data != `{"reason":"behind"}` {
		t.Errorf("resync data %s, want reason behind", ev.data)
	}
	if len(seen) > n {
		t.Errorf("%d events before the resync, more than the %d changes", len(seen), n)
	}
	if _, open := <-slow.events; open {
		t.Error("the stream goes on after the resync; want it ended")
	}
}

// TestChangesStreamBadParameters: a parameter no stream can be watched
// with is a 400 naming it, answered before NATS is asked (once, a
// namespace with a space or a NATS wildcard was a 503 "NATS did not
// answer", and one of a few KiB cost the server its NATS connection, so
// that every watch after it was a 503 too); the feed works after them.
func TestChangesStreamBadParameters(t *testing.T) {
	t.Parallel()
	a := newChangesEnv(t, 0)
	// A stream answered instead of the 400 ends the request, not the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.ctx = ctx
	for _, tc := range []struct{ query, field string }{
		{"namespace=%20", "namespace"},
		{"namespace=%3E", "namespace"},
		{"namespace=a*b", "namespace"},
		{"namespace=*", "namespace"},
		{"namespace=team-a.%3E", "namespace"},
		{"namespace=" + strings.Repeat("x", 5000), "namespace"},
		{"kind=%C3%BC", "kind"},
		{"kind=jobs", "kind"},
	} {
		r := a.as(a.admin, http.MethodGet, "/v1/changes?"+tc.query, nil)
		if r.status != http.StatusBadRequest || !hasField(r.problem(t), tc.field) {
			t.Errorf("GET /v1/changes?%.40s: %d %s, want 400 naming %s", tc.query, r.status, r.body, tc.field)
		}
	}
	s := a.watch(t, a.admin, "namespace=team-a&kind=job", "")
	a.fixtureJob("team-a")
	s.until(t, "the job created", func(ev sseEvent) bool { return ev.event == "job" })
}
