package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

// lockedBuffer is a bytes.Buffer written by the command and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestExecutionsWatch: tockctl executions watch prints the changes of its
// namespace as they happen, one line each, and ends cleanly when
// interrupted; a watch the server refuses fails at once.
func TestExecutionsWatch(t *testing.T) {
	t.Parallel()
	js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := wire.EnsureChangeStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	st := storetest.New(t, 16)
	srv, err := api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(),
		Open: true, Changes: changes.NewFeed(js, slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	watchCtx, stop := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(watchCtx, []string{"--server", hs.URL, "executions", "watch", "--namespace", "team-a"}, strings.NewReader(""), &out, &errOut)
	}()
	// The watch is open once a change made now reaches it: create jobs
	// until one does (the first may come before the stream is open).
	create := func(ns string) string {
		made := ok(t, hs.URL, "-o", "json", "jobs", "create", "--namespace", ns, "--name", "j-"+time.Now().Format("150405.000000"), "--in", "1h", "--http", "https://example.com/")
		var j struct{ ID string }
		if err := json.Unmarshal([]byte(made), &j); err != nil || j.ID == "" {
			t.Fatalf("jobs create printed %q (%v)", made, err)
		}
		return j.ID
	}
	var id string
	var others []string
	testenv.WaitFor(t, 20*time.Second, "a job's creation in the watch's output", func() bool {
		others = append(others, create("team-b"))
		id = create("team-a")
		return strings.Contains(out.String(), id)
	})
	ok(t, hs.URL, "jobs", "pause", id)
	testenv.WaitFor(t, 10*time.Second, "the pause in the watch's output", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, id) && strings.Contains(line, " paused ") {
				return true
			}
		}
		return false
	})
	for _, other := range others {
		if strings.Contains(out.String(), other) {
			t.Errorf("a watch of team-a printed job %s of team-b:\n%s", other, out.String())
		}
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("interrupted watch: exit %d, stderr %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end when interrupted")
	}

	// A server that refuses the watch (no key) ends it at once, exit 1,
	// with the problem's detail, rather than reconnecting for ever.
	closed, err := api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(),
		Changes: changes.NewFeed(js, slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	hc := httptest.NewServer(closed.Handler())
	t.Cleanup(hc.Close)
	refused := make(chan result, 1)
	go func() { refused <- tockctl(t, hc.URL, "executions", "watch") }()
	select {
	case r := <-refused:
		r.failed(t, 1, "This operation needs an API key")
	case <-time.After(10 * time.Second):
		t.Fatal("a refused watch did not end")
	}
}
