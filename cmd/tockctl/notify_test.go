package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// fakeNotifier answers every test message with its attempt (delivered
// by default) and counts the tests of a rule.
type fakeNotifier struct {
	mu    sync.Mutex
	fail  string
	rules int
}

func (f *fakeNotifier) Test(_ context.Context, _ *model.Channel, r *model.Rule) model.DeliveryAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r != nil {
		f.rules++
	}
	if f.fail != "" {
		return model.DeliveryAttempt{At: time.Now(), Status: 502, Error: f.fail, TookMS: 9}
	}
	return model.DeliveryAttempt{At: time.Now(), Status: 204, TookMS: 3}
}

// ruleTests is how many test messages were of a rule.
func (f *fakeNotifier) ruleTests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rules
}

func (f *fakeNotifier) failWith(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = msg
}

// notifyServer runs the real API over a real store, with a keyring and a
// fake notifier.
func notifyServer(t *testing.T) (*httptest.Server, *store.Store, *fakeNotifier) {
	t.Helper()
	st := storetest.New(t, 16)
	n := &fakeNotifier{}
	srv, err := api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(),
		Open: true, Secrets: testenv.Keyring(t), Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, st, n
}

const (
	channelHeader = "ID NAME TYPE URL SECRET STATE"
	ruleHeader    = "ID NAME STATE SELECTOR EVENTS CHANNELS"
	ctlSecret     = "ctl-hook-s3cret-0123456789"
	ctlSlackURL   = "https://hooks.slack.com/services/T1/B2/ctlSl4ck"
)

// channels create (its secret from a file, or a Slack URL), list, get,
// update, test and delete; no secret is ever printed.
func TestChannelsCommands(t *testing.T) {
	t.Parallel()
	hs, _, n := notifyServer(t)
	u := hs.URL
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(ctlSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noSecret := func(what, out string) {
		t.Helper()
		for _, s := range []string{"s3cret", "ctlSl4ck", "/services/"} {
			if strings.Contains(out, s) {
				t.Errorf("%s shows a secret (%q):\n%s", what, s, out)
			}
		}
	}

	out := ok(t, u, "channels", "create", "--name", "oncall", "--namespace", "team-a", "--type", "webhook",
		"--url", "https://hooks.example.com/tock", "--secret-file", secretFile)
	noSecret("channels create", out)
	r := rows(t, out, channelHeader)
	if len(r) != 1 || !regexp.MustCompile(`^\S+ +team-a/oncall +webhook +https://hooks\.example\.com/tock +set +active$`).MatchString(r[0]) {
		t.Fatalf("channels create:\n%s", out)
	}
	hook := uuidRE.FindString(r[0])
	// The secret read from standard input.
	var stdout, stderr strings.Builder
	if code := run([]string{"--server", u, "channels", "create", "--name", "stdin", "--type", "webhook", "--url", "https://example.com/h",
		"--secret-file", "-"}, strings.NewReader(ctlSecret+"\n"), &stdout, &stderr); code != 0 {
		t.Fatalf("--secret-file -: exit %d, %s", code, stderr.String())
	}
	out = ok(t, u, "channels", "create", "--name", "chat", "--namespace", "team-a", "--type", "slack", "--url", ctlSlackURL)
	noSecret("channels create slack", out)
	if r := rows(t, out, channelHeader); !strings.Contains(r[0], "slack  https://hooks.slack.com  set") {
		t.Errorf("slack channel:\n%s", out)
	}

	list := ok(t, u, "channels", "list", "--namespace", "team-a")
	noSecret("channels list", list)
	if r := rows(t, list, channelHeader); len(r) != 2 || !strings.Contains(r[0], "team-a/chat") || !strings.Contains(r[1], "team-a/oncall") {
		t.Errorf("channels list:\n%s", list)
	}
	js := ok(t, u, "-o", "json", "channels", "get", hook)
	noSecret("channels get -o json", js)
	if !strings.Contains(js, `"secret_set": true`) {
		t.Errorf("channels get -o json:\n%s", js)
	}

	out = ok(t, u, "channels", "update", hook, "--pause", "--name", "oncall-2")
	if r := rows(t, out, channelHeader); !strings.Contains(r[0], "team-a/oncall-2") || !strings.HasSuffix(r[0], "paused") {
		t.Errorf("channels update:\n%s", out)
	}
	tockctl(t, u, "channels", "update", hook).failed(t, 1, "nothing to change")
	tockctl(t, u, "channels", "update", hook, "--url", "https://other.example.net/x").failed(t, 1, "secret: is required with a url of another origin")
	tockctl(t, u, "channels", "create", "--name", "bad", "--type", "webhook", "--url", "http://10.0.0.1/x", "--secret", "short").
		failed(t, 1, "url: refused: 10.0.0.1 is a private address", "secret: must be at least 16 bytes")

	// By id, or by name in its namespace.
	for _, args := range [][]string{{hook}, {"oncall-2", "--namespace", "team-a"}} {
		out = ok(t, u, append([]string{"channels", "test"}, args...)...)
		if r := rows(t, out, "CHANNEL DELIVERED STATUS TOOK ERROR"); len(r) != 1 || !regexp.MustCompile(hook+` +yes +204 +3ms +-$`).MatchString(r[0]) {
			t.Errorf("channels test %v:\n%s", args, out)
		}
	}
	tockctl(t, u, "channels", "test", "oncall-2").failed(t, 1, "channel oncall-2: namespace default has no channel of that name")
	n.failWith("502 Bad Gateway")
	res := tockctl(t, u, "channels", "test", hook)
	if res.code != 1 || !strings.Contains(res.stdout, "no  ") || !strings.Contains(res.stdout, "502 Bad Gateway") ||
		!strings.Contains(res.stderr, "the test message was not delivered") {
		t.Errorf("a failed test: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	res = tockctl(t, u, "-o", "json", "channels", "test", hook)
	var dr struct {
		Delivered bool   `json:"delivered"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &dr); err != nil || res.code != 1 || dr.Delivered || dr.Status != 502 {
		t.Errorf("a failed test -o json: exit %d %v\n%s", res.code, err, res.stdout)
	}

	if out := ok(t, u, "channels", "delete", hook); out != "deleted channel "+hook+"\n" {
		t.Errorf("channels delete: %q", out)
	}
	tockctl(t, u, "channels", "get", hook).failed(t, 1, "No notification channel with id")
	tockctl(t, u, "channels", "get", "oncall-2", "--namespace", "team-a").failed(t, 1, "namespace team-a has no channel of that name")
}

// rules create (channels by name or id), list, get, update, pause,
// resume, test and delete.
func TestRulesCommands(t *testing.T) {
	t.Parallel()
	hs, _, n := notifyServer(t)
	u := hs.URL
	ch := func(ns, name string) string {
		out := ok(t, u, "channels", "create", "--name", name, "--namespace", ns, "--type", "webhook", "--url", "https://example.com/"+name,
			"--secret", ctlSecret)
		return uuidRE.FindString(out)
	}
	oncall, audit := ch("team-a", "oncall"), ch("team-a", "audit")
	ch("team-b", "theirs")

	out := ok(t, u, "rules", "create", "--name", "payments", "--namespace", "team-a", "-l", "team=payments",
		"--event", "execution.dead", "--event", "job.failing,job.recovered", "--channel", "oncall", "--channel", audit,
		"--failing-after", "5", "--slow-after", "30m")
	r := rows(t, out, ruleHeader)
	if len(r) != 1 || !regexp.MustCompile(`^\S+ +team-a/payments +active +team=payments +execution\.dead,job\.failing,job\.recovered +`+
		oncall+","+audit+`$`).MatchString(r[0]) {
		t.Fatalf("rules create:\n%s", out)
	}
	for _, want := range []string{"failing after:   5 dead executions in a row", "slow after:      30m", "late after:      1m",
		"group interval:  1m", "last sent:       -"} {
		if !strings.Contains(out, want) {
			t.Errorf("rules create lacks %q:\n%s", want, out)
		}
	}
	id := uuidRE.FindString(r[0])

	tockctl(t, u, "rules", "create", "--name", "x", "--namespace", "team-a", "--event", "execution.dead", "--channel", "theirs").
		failed(t, 1, "--channel theirs: namespace team-a has no channel of that name")
	tockctl(t, u, "rules", "create", "--name", "x", "--namespace", "team-a", "--event", "job.exploded", "--channel", "oncall").
		failed(t, 1, "events[0]: must be one of")
	tockctl(t, u, "rules", "create", "--name", "x", "--namespace", "team-a", "--channel", "oncall").failed(t, 1, "needs --event and --channel")

	list := ok(t, u, "rules", "list", "--namespace", "team-a")
	if r := rows(t, list, ruleHeader); len(r) != 1 || !strings.HasPrefix(r[0], id) {
		t.Errorf("rules list:\n%s", list)
	}
	if out := ok(t, u, "rules", "pause", "payments", "--namespace", "team-a"); !strings.Contains(rows(t, out, ruleHeader)[0], " paused ") {
		t.Errorf("rules pause:\n%s", out)
	}
	if out := ok(t, u, "rules", "resume", id); !strings.Contains(rows(t, out, ruleHeader)[0], " active ") {
		t.Errorf("rules resume:\n%s", out)
	}
	out = ok(t, u, "rules", "update", id, "--event", "job.silent", "--channel", "audit", "--selector", "", "--silent-grace", "5m")
	if r := rows(t, out, ruleHeader); !regexp.MustCompile(` +- +job\.silent +`+audit+`$`).MatchString(r[0]) ||
		!strings.Contains(out, "silent grace:    5m") || !strings.Contains(out, "failing after:   5 ") {
		t.Errorf("rules update:\n%s", out)
	}
	tockctl(t, u, "rules", "update", id).failed(t, 1, "nothing to change")
	tockctl(t, u, "rules", "update", id, "--group-interval", "2d").failed(t, 1, "group_interval: must be a duration")

	out = ok(t, u, "rules", "test", id)
	if r := rows(t, out, "CHANNEL DELIVERED STATUS TOOK ERROR"); len(r) != 1 || !strings.HasPrefix(r[0], audit+"  yes") {
		t.Errorf("rules test:\n%s", out)
	}
	if got := n.ruleTests(); got != 1 {
		t.Errorf("the notifier was given the rule %d times", got)
	}
	n.failWith("connection refused")
	if res := tockctl(t, u, "rules", "test", id); res.code != 1 || !strings.Contains(res.stderr, "1 of 1 test messages were not delivered") ||
		!strings.Contains(res.stdout, "connection refused") {
		t.Errorf("a failed rule test: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}

	js := ok(t, u, "-o", "json", "rules", "get", id)
	var rule struct {
		Name        string   `json:"name"`
		Events      []string `json:"events"`
		SilentGrace string   `json:"silent_grace"`
	}
	if err := json.Unmarshal([]byte(js), &rule); err != nil || rule.Name != "payments" || rule.SilentGrace != "5m" {
		t.Errorf("rules get -o json: %v\n%s", err, js)
	}
	if out := ok(t, u, "rules", "delete", id); out != "deleted rule "+id+"\n" {
		t.Errorf("rules delete: %q", out)
	}
	tockctl(t, u, "rules", "get", id).failed(t, 1, "No notification rule with id")
}

// notifications list with its filters, and get with the attempts and
// the body.
func TestNotificationsCommands(t *testing.T) {
	t.Parallel()
	hs, st, _ := notifyServer(t)
	u := hs.URL
	rule, job := uuid.New(), uuid.New()
	sent := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	ids := make([]string, 3)
	for i, state := range []string{"sent", "failed", "pending"} {
		id := uuid.Must(uuid.NewV7())
		ids[i] = id.String()
		jobs := []uuid.UUID{}
		var sentAt *time.Time
		log := `[]`
		if state == "sent" {
			jobs, sentAt = []uuid.UUID{job}, &sent
			log = `[{"at":"` + sent.Format(time.RFC3339) + `","status":500,"error":"500 Internal Server Error","took_ms":40,"node":"n1"},` +
				`{"at":"` + sent.Format(time.RFC3339) + `","status":200,"took_ms":12,"node":"n2"}]`
		}
		if _, err := st.Pool().Exec(context.Background(), `INSERT INTO notifications (id, namespace, rule_id, channel_id, state,
			kinds, job_ids, body, created_at, attempts, attempt_log, sent_at)
			VALUES ($1, 'team-a', $2, $3, $4, '{execution.dead}', $5, $6, $7, $8, $9, $10)`,
			id, rule, uuid.New(), state, jobs, `{"text":"payments-sync died","id":"`+id.String()+`"}`,
			sent.Add(time.Duration(i)*time.Second), strings.Count(log, "took_ms"), log, sentAt); err != nil {
			t.Fatal(err)
		}
	}
	const header = "ID NAMESPACE CREATED STATE KINDS JOBS ATTEMPTS SENT"
	r := rows(t, ok(t, u, "notifications", "list"), header)
	if len(r) != 3 || !strings.HasPrefix(r[0], ids[2]) || !strings.HasPrefix(r[2], ids[0]) {
		t.Errorf("notifications list: %v", r)
	}
	r = rows(t, ok(t, u, "notifications", "list", "--state", "sent", "--job", job.String(), "--rule", rule.String(), "--namespace", "team-a"), header)
	if len(r) != 1 || !regexp.MustCompile(`^`+ids[0]+` +team-a +\S+ +sent +execution\.dead +1 +2 +`+sent.Format(time.RFC3339)+`$`).MatchString(r[0]) {
		t.Errorf("filtered: %v", r)
	}
	res := tockctl(t, u, "notifications", "list", "--limit", "2")
	if r := rows(t, res.stdout, header); len(r) != 2 || !strings.Contains(res.stderr, "more notifications: --cursor") {
		t.Errorf("a page: %v %q", r, res.stderr)
	}
	if r := rows(t, ok(t, u, "notifications", "list", "--limit", "2", "--all"), header); len(r) != 3 {
		t.Errorf("--all: %v", r)
	}
	tockctl(t, u, "notifications", "list", "--state", "lost").failed(t, 1, "state: must be one of pending, sent, failed")
	tockctl(t, u, "notifications", "list", "--rule", "x").failed(t, 1, "--rule: id: must be a UUID")

	out := ok(t, u, "notifications", "get", ids[0])
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^rule: +` + rule.String() + `$`),
		regexp.MustCompile(`(?m)^jobs: +` + job.String() + `$`),
		regexp.MustCompile(`(?m)^1 +\S+ +n1 +500 +40ms +500 Internal Server Error$`),
		regexp.MustCompile(`(?m)^2 +\S+ +n2 +200 +12ms +-$`),
		regexp.MustCompile(`(?m)^  "text": "payments-sync died"`),
	} {
		if !want.MatchString(out) {
			t.Errorf("notifications get: no line matching %s in\n%s", want, out)
		}
	}
	js := ok(t, u, "-o", "json", "notifications", "get", ids[1])
	if !strings.Contains(js, `"state": "failed"`) || !strings.Contains(js, `"text": "payments-sync died"`) {
		t.Errorf("notifications get -o json:\n%s", js)
	}
	tockctl(t, u, "notifications", "get", uuid.NewString()).failed(t, 1, "No notification with id")
}
