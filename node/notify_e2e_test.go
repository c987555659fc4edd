package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/notify"
	"github.com/tock-sched/tock/secret"
)

// receiver is a webhook receiver as a user would write one: it checks
// each delivery's signature, and keeps the messages it accepted (those
// it answered 2xx).
type receiver struct {
	t      *testing.T
	secret []byte
	srv    *httptest.Server
	// down makes it answer 503; hang makes it hold requests until the
	// channel is closed (or the sender goes away).
	down atomic.Bool
	hang atomic.Pointer[chan struct{}]

	mu       sync.Mutex
	accepted []notify.Message
	tries    map[string]int // by message id, every request seen
	badSigs  int
}

func newReceiver(t *testing.T, secretText string) *receiver {
	r := &receiver{t: t, secret: []byte(secretText), tries: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if err := notify.Verify(r.secret, body, req.Header.Get(notify.SignatureHeader), time.Now(), 5*time.Minute); err != nil {
		r.mu.Lock()
		r.badSigs++
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var m notify.Message
	if err := json.Unmarshal(body, &m); err != nil || m.ID == "" || m.ID != req.Header.Get(notify.IDHeader) {
		http.Error(w, "not a tock message", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.tries[m.ID]++
	r.mu.Unlock()
	if h := r.hang.Load(); h != nil {
		select {
		case <-*h:
		case <-req.Context().Done():
			return
		}
	}
	if r.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	r.accepted = append(r.accepted, m)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// events are the events of the accepted messages of kind (every kind
// when empty), each with its message's id.
func (r *receiver) events(kind string) []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Event
	for _, m := range r.accepted {
		for _, e := range m.Events {
			if kind == "" || e.Kind == kind {
				out = append(out, e)
			}
		}
	}
	return out
}

// acceptedIDs counts the accepted messages by id.
func (r *receiver) acceptedIDs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := map[string]int{}
	for _, m := range r.accepted {
		ids[m.ID]++
	}
	return ids
}

func (r *receiver) signatureFailures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.badSigs
}

// newKeys writes a secret key file.
func newKeys(t *testing.T) string {
	keys := filepath.Join(t.TempDir(), "secret.keys")
	if err := secret.WriteNewFile(keys, "k1"); err != nil {
		t.Fatal(err)
	}
	return keys
}

// notifyNode starts a node whose notifications retry within a second or
// two, with secret keys.
func notifyNode(t *testing.T, e *nodetest.Env, id string) *nodetest.Node {
	return notifyNodeWith(t, e, id, newKeys(t))
}

// notifyNodeWith is notifyNode with the secret keys of file keys.
func notifyNodeWith(t *testing.T, e *nodetest.Env, id, keys string) *nodetest.Node {
	k, err := node.LoadKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return e.StartWith(t, id, func(c *node.Config) {
		c.Secrets = k
		c.NotifyMaxBackoff, c.NotifyLease = 2*time.Second, 12*time.Second
	})
}

// webhookChannel creates a webhook channel to r in namespace ns.
func webhookChannel(t *testing.T, n *nodetest.Node, ns string, r *receiver) string {
	t.Helper()
	var c struct {
		ID string `json:"id"`
	}
	if code := nodetest.Call(t, "POST", n.URL+"/v1/notification-channels", map[string]any{
		"namespace": ns, "name": "ops-webhook", "type": "webhook", "url": r.srv.URL + "/tock", "secret": string(r.secret),
	}, &c); code != http.StatusCreated {
		t.Fatalf("create channel: %d", code)
	}
	return c.ID
}

// createRule creates a rule; body's namespace, name and channels are
// set by the caller.
func createRule(t *testing.T, n *nodetest.Node, body map[string]any) string {
	t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	if code := nodetest.Call(t, "POST", n.URL+"/v1/notification-rules", body, &r); code != http.StatusCreated {
		t.Fatalf("create rule: %d", code)
	}
	return r.ID
}

// TestNotifyFailingRecoveredAndDead: a job that fails four times in a
// row, then succeeds, sends exactly one job.failing (after its third dead
// execution) and exactly one job.recovered, and a signed execution.dead
// for each dead execution; a job the rule's selector leaves out sends
// nothing; the API lists the messages as sent.
func TestNotifyFailingRecoveredAndDead(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := notifyNode(t, e, "n1")
	r := newReceiver(t, "whsec-0123456789abcdef")
	ch := webhookChannel(t, n, "pay", r)
	rule := createRule(t, n, map[string]any{
		"namespace": "pay", "name": "payments-failing", "selector": "team=payments",
		"events":   []string{"execution.dead", "job.failing", "job.recovered"},
		"channels": []string{ch}, "failing_after": 3, "group_interval": "0s",
	})
	// A Slack-compatible receiver beside the webhook.
	var slackMu sync.Mutex
	var slackTexts []string
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b struct {
			Text string `json:"text"`
		}
		if json.NewDecoder(req.Body).Decode(&b) != nil || b.Text == "" {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		slackMu.Lock()
		slackTexts = append(slackTexts, b.Text)
		slackMu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(slack.Close)
	var sc struct {
		ID string `json:"id"`
	}
	if code := nodetest.Call(t, "POST", n.URL+"/v1/notification-channels", map[string]any{
		"namespace": "pay", "name": "ops-slack", "type": "slack", "url": slack.URL + "/services/T000/B000/XXXX",
	}, &sc); code != http.StatusCreated {
		t.Fatalf("create slack channel: %d", code)
	}
	slackRule := createRule(t, n, map[string]any{
		"namespace": "pay", "name": "payments-slack", "selector": "team=payments",
		"events": []string{"job.failing"}, "channels": []string{sc.ID}, "group_interval": "0s",
	})
	const sentSeries = `tock_notifications_sent_total{channel="ops-webhook",namespace="pay"}`
	sentBefore, _ := metricValue(t, n.URL, sentSeries)
	// The job fails until released; then it succeeds.
	var failures, successes atomic.Int64
	var release atomic.Bool
	e.Serve(t, "flaky", func(ctx context.Context, x *executor.Execution) (string, error) {
		if !release.Load() {
			failures.Add(1)
			return "", errors.New("payments-api refused the connection")
		}
		successes.Add(1)
		return "ok", nil
	})
	e.Serve(t, "always-fails", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", errors.New("nobody is watching this one")
	})
	job := n.CreateJob(t, map[string]any{
		"namespace": "pay", "name": "settle", "labels": map[string]string{"team": "payments"},
		"schedule": map[string]any{"cron": "*/2 * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "flaky"}, "retry": map[string]any{"max_attempts": 1},
	})
	n.CreateJob(t, map[string]any{
		"namespace": "pay", "name": "unlabelled", "labels": map[string]string{"team": "search"},
		"schedule": map[string]any{"cron": "*/2 * * * * *"},
		"handler":  map[string]any{"type": "custom", "name": "always-fails"}, "retry": map[string]any{"max_attempts": 1},
	})
	nodetest.WaitFor(t, 60*time.Second, "job.failing", func() bool { return len(r.events("job.failing")) >= 1 })
	if d := len(r.events("execution.dead")); d < 3 {
		t.Errorf("job.failing after %d execution.dead, want 3", d)
	}
	release.Store(true)
	nodetest.WaitFor(t, 60*time.Second, "job.recovered", func() bool { return len(r.events("job.recovered")) >= 1 })
	// Two more successes: no second recovery.
	nodetest.WaitFor(t, 30*time.Second, "two more runs", func() bool { return successes.Load() >= 3 })
	time.Sleep(2 * time.Second)
	// In-process nodes share Prometheus's default registry (a node in a
	// process of its own has its own): the counter of this test's
	// namespace moved by what this test's receiver accepted.
	if v, ok := metricValue(t, n.URL, sentSeries); !ok || int(v-sentBefore) != len(r.acceptedIDs()) {
		t.Errorf("tock_notifications_sent_total of the webhook moved by %v (%v), the receiver accepted %d", v-sentBefore, ok, len(r.acceptedIDs()))
	}
	slackMu.Lock()
	texts := slices.Clone(slackTexts)
	slackMu.Unlock()
	if len(texts) != 1 || !strings.Contains(texts[0], "payments-slack") || !strings.Contains(texts[0], "pay/settle is failing") {
		t.Errorf("Slack got %q, want one job.failing message of rule payments-slack", texts)
	}
	failing, recovered, dead := r.events("job.failing"), r.events("job.recovered"), r.events("execution.dead")
	if len(failing) != 1 || len(recovered) != 1 {
		t.Fatalf("want one job.failing and one job.recovered, got %d and %d: %+v", len(failing), len(recovered), r.events(""))
	}
	if failing[0].Job == nil || failing[0].Job.ID != job.Id.String() || recovered[0].Job.ID != job.Id.String() {
		t.Errorf("the events are about %+v and %+v, not job %s", failing[0].Job, recovered[0].Job, job.Id)
	}
	if !failing[0].At.Before(recovered[0].At) {
		t.Errorf("job.failing at %s is not before job.recovered at %s", failing[0].At, recovered[0].At)
	}
	if int64(len(dead)) != failures.Load() {
		t.Errorf("want an execution.dead for each of the settle job's %d failures, got %d", failures.Load(), len(dead))
	}
	for _, d := range dead {
		if d.Job == nil || d.Job.ID != job.Id.String() {
			t.Errorf("execution.dead of a job the selector leaves out: %+v", d)
		}
	}
	if f := r.signatureFailures(); f != 0 {
		t.Errorf("%d deliveries failed the signature check", f)
	}
	for id, k := range r.acceptedIDs() {
		if k != 1 {
			t.Errorf("message %s accepted %d times", id, k)
		}
	}
	var list struct {
		Items []struct {
			ID    string   `json:"id"`
			State string   `json:"state"`
			Kinds []string `json:"kinds"`
		} `json:"items"`
	}
	if code := nodetest.Call(t, "GET", n.URL+"/v1/notifications?rule_id="+rule+"&limit=100", nil, &list); code != http.StatusOK {
		t.Fatalf("list notifications: %d", code)
	}
	ids := r.acceptedIDs()
	if len(list.Items) != len(ids) {
		t.Errorf("the API lists %d notifications, the receiver accepted %d", len(list.Items), len(ids))
	}
	for _, it := range list.Items {
		if it.State != "sent" || ids[it.ID] != 1 {
			t.Errorf("notification %s is %s, accepted %d times", it.ID, it.State, ids[it.ID])
		}
	}
	// By job, across both rules: the webhook's messages and Slack's.
	if code := nodetest.Call(t, "GET", n.URL+"/v1/notifications?job_id="+job.Id.String()+"&state=sent&limit=100", nil, &list); code != http.StatusOK || len(list.Items) != len(ids)+len(texts) {
		t.Errorf("by job: %d, %d items, want %d", code, len(list.Items), len(ids)+len(texts))
	}
	if code := nodetest.Call(t, "GET", n.URL+"/v1/notifications?rule_id="+slackRule+"&job_id="+job.Id.String(), nil, &list); code != http.StatusOK || len(list.Items) != 1 {
		t.Errorf("by rule and job: %d, %d items, want 1", code, len(list.Items))
	}
}

// TestNotifyReceiverDown: a receiver that answers 503 for 30 seconds gets
// every notification afterwards, each once by id.
func TestNotifyReceiverDown(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := notifyNode(t, e, "n1")
	r := newReceiver(t, "whsec-down-0123456789")
	r.down.Store(true)
	ch := webhookChannel(t, n, "down", r)
	rule := createRule(t, n, map[string]any{
		"namespace": "down", "name": "every-death", "events": []string{"execution.dead"},
		"channels": []string{ch}, "group_interval": "0s",
	})
	var deaths atomic.Int64
	e.Serve(t, "dies", func(ctx context.Context, x *executor.Execution) (string, error) {
		deaths.Add(1)
		return "", errors.New("boom")
	})
	job := n.CreateJob(t, map[string]any{
		"namespace": "down", "name": "dies", "schedule": map[string]any{"cron": "*/3 * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "dies"}, "retry": map[string]any{"max_attempts": 1},
	})
	time.Sleep(30 * time.Second)
	if s := nodetest.Call(t, "POST", n.URL+"/v1/jobs/"+job.Id.String()+"/pause", nil, nil); s != http.StatusOK {
		t.Fatalf("pause: %d", s)
	}
	r.down.Store(false)
	type item struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
	}
	var list struct {
		Items []item `json:"items"`
	}
	nodetest.WaitFor(t, 60*time.Second, "every notification sent", func() bool {
		nodetest.Call(t, "GET", n.URL+"/v1/notifications?rule_id="+rule+"&limit=200", nil, &list)
		return len(list.Items) > 0 && !slices.ContainsFunc(list.Items, func(i item) bool { return i.State != "sent" })
	})
	time.Sleep(2 * time.Second) // anything late would show now
	ids := r.acceptedIDs()
	if len(ids) != len(list.Items) {
		t.Errorf("the receiver accepted %d messages, the API lists %d", len(ids), len(list.Items))
	}
	retried := 0
	for _, it := range list.Items {
		if ids[it.ID] != 1 {
			t.Errorf("message %s accepted %d times", it.ID, ids[it.ID])
		}
		if it.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("no message needed a second attempt: the receiver was never down for them")
	}
	if got, want := len(r.events("execution.dead")), int(deaths.Load()); got < want-1 || got > want {
		t.Errorf("%d execution.dead delivered for %d deaths", got, want)
	}
}

// TestNotifySilentJob: a job whose handler stops succeeding is reported
// silent within its interval plus the rule's grace (once), and a paused
// job never is.
func TestNotifySilentJob(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := notifyNode(t, e, "n1")
	r := newReceiver(t, "whsec-silent-0123456789")
	ch := webhookChannel(t, n, "quiet", r)
	createRule(t, n, map[string]any{
		"namespace": "quiet", "name": "silence", "events": []string{"job.silent"},
		"channels": []string{ch}, "silent_grace": "5s", "group_interval": "0s",
	})
	var ok atomic.Bool
	ok.Store(true)
	e.Serve(t, "sometimes", func(ctx context.Context, x *executor.Execution) (string, error) {
		if ok.Load() {
			return "fine", nil
		}
		return "", errors.New("the disk is full")
	})
	live := n.CreateJob(t, map[string]any{
		"namespace": "quiet", "name": "heartbeat", "schedule": map[string]any{"cron": "*/2 * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "sometimes"},
	})
	paused := n.CreateJob(t, map[string]any{
		"namespace": "quiet", "name": "paused", "schedule": map[string]any{"cron": "*/2 * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "never-served"},
	})
	if s := nodetest.Call(t, "POST", n.URL+"/v1/jobs/"+paused.Id.String()+"/pause", nil, nil); s != http.StatusOK {
		t.Fatalf("pause: %d", s)
	}
	// A few successes, then none.
	time.Sleep(5 * time.Second)
	if len(r.events("job.silent")) != 0 {
		t.Fatalf("job.silent while the job succeeds: %+v", r.events("job.silent"))
	}
	stopped := time.Now()
	ok.Store(false)
	// Silent after its next run (2 s) plus 5 s of grace (room for a slow
	// machine's start lag while it succeeds); the sweep runs every 5 s.
	nodetest.WaitFor(t, 30*time.Second, "job.silent", func() bool { return len(r.events("job.silent")) > 0 })
	if d := time.Since(stopped); d < 5*time.Second {
		t.Errorf("job.silent %s after the last success, within the grace", d)
	}
	time.Sleep(6 * time.Second) // another sweep
	silent := r.events("job.silent")
	if len(silent) != 1 || silent[0].Job == nil || silent[0].Job.ID != live.Id.String() {
		t.Fatalf("want one job.silent, of %s; got %+v", live.Id, silent)
	}
}

// TestNotifyBreakerOncePerHandler: a circuit breaker opening for a handler
// that 50 jobs use sends one handler.open, not one per job.
func TestNotifyBreakerOncePerHandler(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := notifyNode(t, e, "n1")
	r := newReceiver(t, "whsec-breaker-0123456789")
	ch := webhookChannel(t, n, "brk", r)
	createRule(t, n, map[string]any{
		"namespace": "brk", "name": "handlers", "events": []string{"handler.open", "handler.close"},
		"channels": []string{ch}, "group_interval": "0s",
	})
	var failing atomic.Bool
	failing.Store(true)
	// The breaker half-opens 3 s after it opens (the default is 30 s).
	e.Worker(t, executor.Config{Breaker: executor.BreakerConfig{OpenFor: 3 * time.Second}}, "fragile", func(ctx context.Context, x *executor.Execution) (string, error) {
		if failing.Load() {
			return "", errors.New("upstream is down")
		}
		return "ok", nil
	})
	for i := range 50 {
		n.CreateJob(t, map[string]any{
			"namespace": "brk", "name": "job-" + string(rune('a'+i/26)) + string(rune('a'+i%26)),
			"schedule": map[string]any{"cron": "* * * * * *"},
			"handler":  map[string]any{"type": "custom", "name": "fragile"}, "retry": map[string]any{"max_attempts": 1},
		})
	}
	nodetest.WaitFor(t, 20*time.Second, "the breaker open", func() bool {
		var hs struct {
			Items []struct {
				Handler, Breaker string
			} `json:"items"`
		}
		nodetest.Call(t, "GET", n.URL+"/v1/handlers", nil, &hs)
		return slices.ContainsFunc(hs.Items, func(h struct{ Handler, Breaker string }) bool {
			return h.Handler == "fragile" && h.Breaker == "open"
		})
	})
	nodetest.WaitFor(t, 30*time.Second, "handler.open", func() bool { return len(r.events("handler.open")) > 0 })
	time.Sleep(6 * time.Second) // three more reads of the breakers
	open := r.events("handler.open")
	if len(open) != 1 || open[0].Handler != "fragile" {
		t.Fatalf("want one handler.open for fragile, got %+v", open)
	}
	// The handler works again: its breaker's probe succeeds and it closes.
	failing.Store(false)
	nodetest.WaitFor(t, 60*time.Second, "handler.close", func() bool { return len(r.events("handler.close")) > 0 })
	time.Sleep(6 * time.Second)
	if c := r.events("handler.close"); len(c) != 1 || c[0].Handler != "fragile" || len(r.events("handler.open")) != 1 {
		t.Fatalf("want one handler.close after one handler.open, got %+v", r.events(""))
	}
}

// TestNotifyNodeKilledDuringDelivery: the node delivering a message is
// killed (SIGKILL) while the receiver holds the request; another node
// delivers it once the first one's lease has run out, under the same
// id. Nothing is lost, and the only repeat carries the same id.
func TestNotifyNodeKilledDuringDelivery(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	keys := newKeys(t)
	n1 := e.StartProcess(t, "n1", "--secret-key-file", keys, "--notify-max-backoff", "2s", "--notify-lease", "12s")
	r := newReceiver(t, "whsec-kill-0123456789")
	hold := make(chan struct{})
	r.hang.Store(&hold)
	ch := webhookChannel(t, n1, "kill", r)
	rule := createRule(t, n1, map[string]any{
		"namespace": "kill", "name": "deaths", "events": []string{"execution.dead"},
		"channels": []string{ch}, "group_interval": "0s",
	})
	e.Serve(t, "dies-once", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", errors.New("boom")
	})
	n1.CreateJob(t, map[string]any{
		"namespace": "kill", "name": "once", "schedule": map[string]any{},
		"handler": map[string]any{"type": "custom", "name": "dies-once"}, "retry": map[string]any{"max_attempts": 1},
	})
	var id string
	nodetest.WaitFor(t, 60*time.Second, "the delivery held by the receiver", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for k := range r.tries {
			id = k
		}
		return id != ""
	})
	// The held request ends when its sender dies, unanswered: it is not
	// released, or the receiver would accept what the killed node never
	// heard was accepted.
	n1.Kill(t)
	r.hang.Store(nil)
	t.Cleanup(func() { close(hold) })
	n2 := notifyNodeWith(t, e, "n2", keys)
	nodetest.WaitFor(t, 90*time.Second, "the message delivered by n2", func() bool { return r.acceptedIDs()[id] == 1 })
	time.Sleep(3 * time.Second) // a second delivery would show now

	ids := r.acceptedIDs()
	if len(ids) != 1 || ids[id] != 1 {
		t.Errorf("the receiver accepted %v, want %s once", ids, id)
	}
	r.mu.Lock()
	tries := r.tries[id]
	r.mu.Unlock()
	if tries != 2 {
		t.Errorf("message %s came %d times, want twice (the killed node's, then n2's)", id, tries)
	}
	var got struct {
		State      string `json:"state"`
		Attempts   int    `json:"attempts"`
		AttemptLog []struct {
			Node string `json:"node"`
		} `json:"attempt_log"`
	}
	if code := nodetest.Call(t, "GET", n2.URL+"/v1/notifications/"+id, nil, &got); code != http.StatusOK {
		t.Fatalf("get notification: %d", code)
	}
	if got.State != "sent" || len(got.AttemptLog) != 1 || got.AttemptLog[0].Node != "n2" {
		t.Errorf("notification %s: %+v (of rule %s)", id, got, rule)
	}
}

// metricValue reads one sample of node url's /metrics, by its name and
// labels as the text format writes them.
func metricValue(t *testing.T, url, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
