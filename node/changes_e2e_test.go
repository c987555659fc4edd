package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/wire"
)

// TestChangesFeedShowsExecutionsLive: with a real node (executor reports,
// recorder, API), GET /v1/changes streams each execution of a job as it
// runs and ends, without polling: what the web UI and tockctl executions
// watch show.
func TestChangesFeedShowsExecutionsLive(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	e.Echo(t, "live-echo")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/v1/changes?namespace=live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/changes: %d", resp.StatusCode)
	}

	j := n.CreateJob(t, map[string]any{
		"namespace": "live",
		"name":      "every-second",
		"schedule":  map[string]any{"cron": "* * * * * *"},
		"handler":   map[string]any{"type": "custom", "name": "live-echo"},
	})
	type change struct {
		Kind, Namespace, State string
		JobID                  string    `json:"job_id"`
		ExecutionID            string    `json:"execution_id"`
		At                     time.Time `json:"at"`
	}
	created, succeeded, queued := false, map[string]time.Time{}, map[string]time.Time{}
	// Until 3 executions have succeeded and each one's queued change is
	// in too (the dispatcher's may come after the recorder's).
	enough := func() bool {
		if len(succeeded) < 3 {
			return false
		}
		for id := range succeeded {
			if _, ok := queued[id]; !ok {
				return false
			}
		}
		return true
	}
	sc := bufio.NewScanner(resp.Body)
	for !enough() && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c change
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		if c.Namespace != "live" || c.JobID != j.Id.String() {
			t.Errorf("change %+v, want job %s of namespace live", c, j.Id)
			continue
		}
		switch {
		case c.Kind == "job" && c.State == "active":
			created = true
		case c.Kind == "execution" && c.State == "succeeded":
			succeeded[c.ExecutionID] = c.At
		case c.Kind == "execution" && c.State == "queued":
			queued[c.ExecutionID] = c.At
		}
	}
	if !enough() {
		t.Fatalf("the stream ended (%v) after %d succeeded executions (%d queued), want 3 and each queued", sc.Err(), len(succeeded), len(queued))
	}
	if !created {
		t.Error("no event of the job's creation")
	}
	// Each execution was queued (by the dispatcher) before it succeeded
	// (recorded from the executor's report): the feed's times order an
	// execution's changes, whichever arrived first.
	for id, done := range succeeded {
		if q, ok := queued[id]; !ok || !q.Before(done) {
			t.Errorf("execution %s: queued at %v (seen %v), succeeded at %v; want queued first", id, q, ok, done)
		}
	}
	// What the stream said is what the API lists.
	for id := range succeeded {
		if x := n.Execution(t, uuid.MustParse(id)); x.State != "succeeded" || x.JobId != j.Id {
			t.Errorf("execution %s: %s of job %s, the stream said succeeded of %s", id, x.State, x.JobId, j.Id)
		}
	}
}

// TestNoChangeFeed: a node started with --no-change-feed answers GET
// /v1/changes with 503 and makes no feed stream.
func TestNoChangeFeed(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.StartWith(t, "n1", func(c *node.Config) { c.NoChangeFeed = true })
	resp, err := http.Get(n.URL + "/v1/changes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/changes with --no-change-feed: %d, want 503", resp.StatusCode)
	}
	nc, err := nats.Connect(e.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, wire.ChangeStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the feed's stream with --no-change-feed: %v, want none", err)
	}
}

// TestChangesFeedCancelAndRedrive: cancelling an execution and re-driving
// a dead one reach the feed, as the dashboard's lists need: a cancelled
// change for the one, a queued change and then its new end for the other.
func TestChangesFeedCancelAndRedrive(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	e.Serve(t, "feed-fail", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", errors.New("refused")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/v1/changes?namespace=feed&kind=execution", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// next reads changes until one of execution id is in state.
	next := func(id, state string) {
		t.Helper()
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var c struct {
				State       string
				ExecutionID string `json:"execution_id"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			if c.ExecutionID == id && c.State == state {
				return
			}
		}
		t.Fatalf("the stream ended (%v) before execution %s was %s", sc.Err(), id, state)
	}

	// A run nobody serves waits queued; cancelled, the feed says so.
	waits := n.CreateJob(t, map[string]any{"namespace": "feed", "name": "nobody-serves",
		"schedule": map[string]any{"cron": "0 0 0 1 1 *"}, "handler": map[string]any{"type": "custom", "name": "feed-nobody"}})
	var run models.Execution
	if code := nodetest.Call(t, "POST", n.URL+"/v1/jobs/"+waits.Id.String()+"/run", nil, &run); code != http.StatusAccepted {
		t.Fatalf("run: %d", code)
	}
	next(run.Id.String(), "queued")
	if code := nodetest.Call(t, "POST", n.URL+"/v1/executions/"+run.Id.String()+"/cancel", nil, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	next(run.Id.String(), "cancelled")

	// One that dies, re-driven: queued again, then dead again.
	fails := n.CreateJob(t, map[string]any{"namespace": "feed", "name": "fails", "schedule": map[string]any{},
		"handler": map[string]any{"type": "custom", "name": "feed-fail"}, "retry": map[string]any{"max_attempts": 1}})
	var dead models.Execution
	nodetest.WaitFor(t, 30*time.Second, "a dead execution", func() bool {
		xs := n.Executions(t, fails.Id)
		if len(xs) == 1 && xs[0].State == "dead" {
			dead = xs[0]
			return true
		}
		return false
	})
	next(dead.Id.String(), "dead")
	if code := nodetest.Call(t, "POST", n.URL+"/v1/executions/"+dead.Id.String()+"/retry", nil, nil); code != http.StatusAccepted {
		t.Fatalf("re-drive: %d", code)
	}
	next(dead.Id.String(), "queued")
	next(dead.Id.String(), "dead")
}
