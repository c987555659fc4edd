package ui_test

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
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/notify"
	"github.com/tock-sched/tock/secret"
)

// startNotifySite is startSite with what notifications need: secret keys
// to seal channel secrets with, and deliveries retried within seconds.
func startNotifySite(t *testing.T) *site {
	t.Helper()
	env := nodetest.New(t)
	st := nodetest.OpenStore(t, env.PG)
	s := &site{env: env, admin: makeKey(t, st, "admin"), reader: makeKey(t, st, "reader")}
	file := filepath.Join(t.TempDir(), "secret.keys")
	if err := secret.WriteNewFile(file, "k1"); err != nil {
		t.Fatal(err)
	}
	keys, err := node.LoadKeyring(file)
	if err != nil {
		t.Fatal(err)
	}
	s.node = env.StartWith(t, "ui", func(c *node.Config) {
		c.AuthNone, c.Pprof = false, false
		c.Secrets = keys
		c.NotifyMaxBackoff = 2 * time.Second
	})
	return s
}

// hook is a webhook receiver as a user would write one: it checks each
// message's signature and refuses the first delivery of every message
// but a test's (503), so each has a failed attempt before its good one.
type hook struct {
	secret string
	srv    *httptest.Server

	mu       sync.Mutex
	tries    map[string]int
	accepted []notify.Message
}

func newHook(t *testing.T, secretText string) *hook {
	h := &hook{secret: secretText, tries: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify([]byte(h.secret), body, r.Header.Get(notify.SignatureHeader), time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m notify.Message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "not a tock message", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tries[m.ID]++
		if !m.Test && h.tries[m.ID] == 1 {
			http.Error(w, "receiver warming up", http.StatusServiceUnavailable)
			return
		}
		h.accepted = append(h.accepted, m)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// tests counts the test messages the receiver accepted.
func (h *hook) tests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.accepted {
		if m.Test {
			n++
		}
	}
	return n
}

// clickIn clicks the button (or link) labelled label inside the element
// matching css: a row's own Test, Pause or Delete.
func (b *browser) clickIn(css, label string) {
	b.t.Helper()
	find := fmt.Sprintf(`[...(document.querySelector(%q)||document.createElement("p")).querySelectorAll("button, a.button")].find(e => e.innerText.trim() === %q)`, css, label)
	b.waitFor(label+" in "+css, find+` && !`+find+`.disabled`, 15*time.Second)
	if err := b.eval(find+`.click()`, nil); err != nil && !strings.Contains(err.Error(), "undefined") {
		b.t.Fatalf("click %s in %s: %v", label, css, err)
	}
}

// TestNotifications round-trips the notification pages through the API:
// a channel and a rule made in the browser are what the API then holds
// (the channel's secret never shown back), those made through the API
// are listed in the browser, and testing, pausing and deleting there
// change what the API says; the rule form previews its selector against
// the jobs the API says match, and shows the API's fault with a bad one;
// a real message, refused once and then delivered, is in the history with
// both attempts; a reader sees it all and no write action; each page
// passes the accessibility check.
func TestNotifications(t *testing.T) {
	s := startNotifySite(t)
	b := newBrowser(t, s.node.URL)
	const whsec = "whsec-ui-0123456789abcdef"
	h := newHook(t, whsec)
	s.env.Serve(t, "ui-notify-fail", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", errors.New("ledger-api answered 500")
	})
	shot := b.shot
	step := func(name string, f func(t *testing.T)) { b.step(t, name, f) }
	channels := func() []models.Channel {
		var l models.ChannelList
		if code := s.call(t, s.admin, "GET", "/v1/notification-channels?namespace=default", nil, &l); code != http.StatusOK {
			t.Fatalf("list channels: %d", code)
		}
		return l.Items
	}
	channelNamed := func(name string) *models.Channel {
		for _, c := range channels() {
			if c.Name == name {
				return &c
			}
		}
		return nil
	}
	rules := func() []models.Rule {
		var l models.RuleList
		if code := s.call(t, s.admin, "GET", "/v1/notification-rules?namespace=default", nil, &l); code != http.StatusOK {
			t.Fatalf("list rules: %d", code)
		}
		return l.Items
	}
	ruleNamed := func(name string) *models.Rule {
		for _, r := range rules() {
			if r.Name == name {
				return &r
			}
		}
		return nil
	}
	var hookID, ruleID, settleID string

	step("create a channel, its secret never shown back", func(t *testing.T) {
		b.t = t
		b.open("/notifications/channels")
		b.waitText("main h1", "Sign in")
		b.fill("key", s.admin)
		b.click("Sign in")
		b.waitText("main h1", "Notification channels")
		b.waitText("header nav", "Notifications")
		b.waitText("main", "never shown again")
		b.fill("f-name", "ops-hook")
		b.fill("f-url", h.srv.URL+"/tock")
		b.fill("f-secret", "too-short")
		b.click("Create channel")
		b.waitText(`[data-field="secret"] .field-error`, "at least 16 bytes")
		if channelNamed("ops-hook") != nil {
			t.Fatal("a channel with a bad secret was created")
		}
		b.fill("f-secret", whsec)
		b.click("Create channel")
		b.waitText(".notice", "will not be shown")
		c := channelNamed("ops-hook")
		if c == nil || c.Type != "webhook" || !c.SecretSet || c.Url != h.srv.URL+"/tock" || c.Paused {
			t.Fatalf("the API holds %+v", c)
		}
		hookID = c.Id.String()
		var raw json.RawMessage
		s.call(t, s.admin, "GET", "/v1/notification-channels/"+hookID, nil, &raw)
		if strings.Contains(string(raw), whsec) {
			t.Errorf("the API shows the secret: %s", raw)
		}
		b.waitText(fmt.Sprintf(`tr[data-channel=%q]`, hookID), "set (not shown)")
		var shown bool
		if err := b.eval(fmt.Sprintf(`document.documentElement.outerHTML.includes(%q) || [...document.querySelectorAll("input")].some(i => i.value.includes(%q))`, whsec, whsec), &shown); err != nil || shown {
			t.Errorf("the page still holds the secret (%v)", err)
		}
		b.checkClean()
	})

	var slackID string
	step("a channel made through the API: listed, tested, paused, deleted", func(t *testing.T) {
		b.t = t
		slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
		t.Cleanup(slack.Close)
		var c models.Channel
		if code := s.call(t, s.admin, "POST", "/v1/notification-channels", map[string]any{
			"name": "team-slack", "type": "slack", "url": slack.URL + "/services/T0/B0/secretpart",
		}, &c); code != http.StatusCreated {
			t.Fatalf("create slack channel: %d", code)
		}
		slackID = c.Id.String()
		row := fmt.Sprintf(`tr[data-channel=%q]`, slackID)
		b.open("/notifications/channels")
		b.waitText(row, "team-slack")
		if got := b.text(row); strings.Contains(got, "secretpart") || !strings.Contains(got, slack.URL) {
			t.Errorf("the slack channel's row: %q", got)
		}
		// Test the webhook: the receiver gets a signed sample.
		b.clickIn(fmt.Sprintf(`tr[data-channel=%q]`, hookID), "Test")
		b.waitText(".notice", "delivered (204")
		if h.tests() != 1 {
			t.Errorf("the receiver accepted %d test messages, want 1", h.tests())
		}
		b.clickIn(row, "Pause")
		b.waitText(row, "paused")
		if c := channelNamed("team-slack"); c == nil || !c.Paused {
			t.Fatalf("after Pause the API says %+v", c)
		}
		b.clickIn(row, "Resume")
		b.waitText(row, "active")
		if c := channelNamed("team-slack"); c == nil || c.Paused {
			t.Fatalf("after Resume the API says %+v", c)
		}
		b.clickIn(row, "Delete")
		b.waitFor("the row gone", fmt.Sprintf(`!document.querySelector(%q)`, row), 15*time.Second)
		if code := s.call(t, s.admin, "GET", "/v1/notification-channels/"+slackID, nil, nil); code != http.StatusNotFound {
			t.Errorf("after Delete the API answers %d for the channel", code)
		}
		b.checkClean()
	})

	step("the rule form previews its selector and creates the rule", func(t *testing.T) {
		b.t = t
		for _, j := range []struct{ name, team string }{{"settle", "payments"}, {"refund", "payments"}, {"reindex", "search"}} {
			job := s.createJob(t, map[string]any{"name": j.name, "labels": map[string]string{"team": j.team},
				"schedule": map[string]any{"cron": "0 0 3 * * *"}, "retry": map[string]any{"max_attempts": 1},
				"handler": map[string]any{"type": "custom", "name": "ui-notify-fail"}})
			if j.name == "settle" {
				settleID = job.Id.String()
			}
		}
		b.open("/notifications/rules")
		b.click("New rule")
		b.waitText("main h1", "New rule")
		b.fill("f-name", "payments-dead")
		b.fill("f-selector", "tier in ()")
		b.waitText(".preview .error", "at least one value")
		b.waitText(".preview .error", "selector")
		b.fill("f-selector", "team=payments")
		b.waitFor("the preview's count", `document.querySelector(".preview [data-count]")`, 15*time.Second)
		var l models.JobList
		s.call(t, s.admin, "GET", "/v1/jobs?namespace=default&selector=team%3Dpayments", nil, &l)
		if len(l.Items) != 2 {
			t.Fatalf("the API says %d jobs match team=payments, want 2", len(l.Items))
		}
		b.waitText(".preview .words", "2 jobs in default match now")
		var names []string
		_ = b.eval(`[...document.querySelectorAll(".preview ul.matches a")].map(a => a.innerText)`, &names)
		slices.Sort(names)
		want := []string{l.Items[0].Name, l.Items[1].Name}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("the preview names %v, the API %v", names, want)
		}
		shot("notification-rule-form")
		b.fill("f-group_interval", "0s")
		// No channel chosen: the API's fault, at its field.
		b.click("Create rule")
		b.waitText(`[data-field="channels"] .field-error`, "channel")
		b.waitFor("the channel offered", fmt.Sprintf(`document.querySelector('input[name=channels][value=%q]')`, hookID), 15*time.Second)
		_ = b.eval(fmt.Sprintf(`document.querySelector('input[name=channels][value=%q]').click()`, hookID), nil)
		b.axe("new rule")
		b.click("Create rule")
		b.waitText("main h1", "Notification rules")
		r := ruleNamed("payments-dead")
		if r == nil || r.Selector != "team=payments" || !slices.Equal(r.Events, []models.NotifyEvent{"execution.dead"}) ||
			len(r.Channels) != 1 || r.Channels[0].String() != hookID || r.GroupInterval != "0s" || r.Paused {
			t.Fatalf("the API holds %+v", r)
		}
		ruleID = r.Id.String()
		b.waitText(fmt.Sprintf(`tr[data-rule=%q]`, ruleID), "ops-hook")
		b.checkClean()
	})

	step("edit a rule", func(t *testing.T) {
		b.t = t
		b.clickIn(fmt.Sprintf(`tr[data-rule=%q]`, ruleID), "Edit")
		b.waitText("main h1", "Edit rule default/payments-dead")
		b.waitFor("the form filled", `document.querySelector("#f-selector").value === "team=payments"`, 15*time.Second)
		_ = b.eval(`document.querySelector('input[name=events][value="job.failing"]').click()`, nil)
		b.fill("f-failing_after", "2")
		b.click("Save")
		b.waitText("main h1", "Notification rules")
		r := ruleNamed("payments-dead")
		if r == nil || !slices.Contains(r.Events, "job.failing") || r.FailingAfter != 2 || r.Selector != "team=payments" {
			t.Fatalf("after the edit the API holds %+v", r)
		}
		b.checkClean()
	})

	step("a rule made through the API: listed, tested, paused, deleted", func(t *testing.T) {
		b.t = t
		var r models.Rule
		if code := s.call(t, s.admin, "POST", "/v1/notification-rules", map[string]any{
			"name": "search-silent", "selector": "team=search", "events": []string{"job.silent"}, "channels": []string{hookID},
		}, &r); code != http.StatusCreated {
			t.Fatalf("create rule: %d", code)
		}
		row := fmt.Sprintf(`tr[data-rule=%q]`, r.Id.String())
		b.open("/notifications/rules")
		b.waitText(row, "search-silent")
		b.waitText(row, "team=search")
		before := h.tests()
		b.clickIn(row, "Test")
		b.waitText(".notice", "ops-hook: delivered (204")
		if h.tests() != before+1 {
			t.Errorf("the receiver accepted %d test messages of the rule, want 1", h.tests()-before)
		}
		b.clickIn(row, "Pause")
		b.waitText(row, "paused")
		if got := ruleNamed("search-silent"); got == nil || !got.Paused {
			t.Fatalf("after Pause the API says %+v", got)
		}
		b.clickIn(row, "Resume")
		b.waitText(row, "active")
		if got := ruleNamed("search-silent"); got == nil || got.Paused {
			t.Fatalf("after Resume the API says %+v", got)
		}
		b.clickIn(row, "Delete")
		b.waitFor("the row gone", fmt.Sprintf(`!document.querySelector(%q)`, row), 15*time.Second)
		if code := s.call(t, s.admin, "GET", "/v1/notification-rules/"+r.Id.String(), nil, nil); code != http.StatusNotFound {
			t.Errorf("after Delete the API answers %d for the rule", code)
		}
		b.checkClean()
	})

	var msg models.Notification
	step("a message and its attempts in the history", func(t *testing.T) {
		b.t = t
		var run models.Execution
		if code := s.call(t, s.admin, "POST", "/v1/jobs/"+settleID+"/run", nil, &run); code >= 300 {
			t.Fatalf("run settle: %d", code)
		}
		// Under make test's load this wait once ran out at 60 s (twice
		// in three full runs, never alone, where it takes ~1 s): the
		// bound is generous, and each change of the run's and its
		// message's states is logged, so that a failure says where it
		// stood.
		seen := ""
		nodetest.WaitFor(t, 150*time.Second, "a message delivered on its second attempt", func() bool {
			var x models.Execution
			s.call(t, s.admin, "GET", "/v1/executions/"+run.Id.String(), nil, &x)
			var all models.NotificationList
			s.call(t, s.admin, "GET", "/v1/notifications?rule_id="+ruleID, nil, &all)
			now := fmt.Sprintf("run %s, attempts %d", x.State, x.Attempts)
			for _, m := range all.Items {
				now += fmt.Sprintf("; message %v %s, %d attempts, next %v", m.Kinds, m.State, m.Attempts, m.NextAttemptAt)
			}
			if now != seen {
				t.Logf("%s: %s", time.Now().Format("15:04:05.000"), now)
				seen = now
			}
			for _, m := range all.Items {
				if m.State == "sent" {
					msg = m
					return true
				}
			}
			return false
		})
		if len(msg.AttemptLog) != 2 || nodetest.Str(msg.AttemptLog[0].Error) == "" {
			t.Fatalf("the message's attempts: %+v", msg.AttemptLog)
		}
		row := fmt.Sprintf(`tr[data-notification=%q]`, msg.Id.String())
		b.open("/notifications")
		b.waitText("main h1", "Notifications")
		b.waitText(row, "sent")
		b.waitFor("two attempts listed", fmt.Sprintf(`document.querySelectorAll(%q).length === 2`, row+" ol.attempts li"), 15*time.Second)
		text := b.text(row)
		for _, want := range []string{"settle", "execution.dead", "payments-dead", "ops-hook", "503", "204", nodetest.Str(msg.AttemptLog[0].Error)} {
			if !strings.Contains(text, want) {
				t.Errorf("the history's row lacks %q: %q", want, text)
			}
		}
		// Filtered as the API allows: by rule, and by state.
		b.open("/notifications?state=failed")
		b.waitText("tbody", "No notification matches")
		b.open("/notifications?rule_id=" + ruleID + "&state=sent")
		b.waitText(row, "payments-dead")
		b.checkClean()
	})

	step("the pages pass the accessibility check", func(t *testing.T) {
		b.t = t
		for _, p := range []struct{ name, path, shot string }{
			{"notifications", "/notifications", "notifications"},
			{"notification rules", "/notifications/rules", "notification-rules"},
			{"notification channels", "/notifications/channels", "notification-channels"},
			{"edit rule", "/notifications/rules/" + ruleID, ""},
		} {
			b.open(p.path)
			b.waitFor(p.name+" loaded", `document.querySelector("main h1") && document.querySelector("tbody tr, form.job-form") && !document.querySelector('[aria-busy="true"]')`, 15*time.Second)
			b.axe(p.name)
			if p.shot != "" {
				shot(p.shot)
			}
		}
		b.checkClean()
	})

	step("a reader sees everything and no write action", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.click("Sign out")
		b.waitText("main h1", "Sign in")
		b.fill("key", s.reader)
		b.click("Sign in")
		b.waitText("main h1", "Overview")
		b.waitText("header nav", "Notifications")
		writes := []string{"New rule", "Edit", "Test", "Pause", "Resume", "Delete", "Create channel", "Create rule", "Save"}
		for _, p := range []struct{ path, sees string }{
			{"/notifications", "payments-dead"},
			{"/notifications/rules", "payments-dead"},
			{"/notifications/channels", "ops-hook"},
		} {
			b.open(p.path)
			b.waitText("tbody", p.sees)
			for _, w := range writes {
				if b.offers(w) {
					t.Errorf("a reader is offered %q on %s", w, p.path)
				}
			}
		}
		if b.has("#f-secret") || strings.Contains(b.text("main"), "New channel") {
			t.Error("a reader is offered the new channel form")
		}
		b.waitText(fmt.Sprintf(`tr[data-channel=%q]`, hookID), "set (not shown)")
		// The edit form's address typed in: shown, refused, nothing to press.
		b.open("/notifications/rules/" + ruleID)
		b.waitText(".error.forbidden", "may not change")
		if !b.has(`form.job-form fieldset:disabled`) || b.has(`form.job-form button[type=submit]:not(:disabled)`) {
			t.Error("a reader may submit the rule form")
		}
		b.open(fmt.Sprintf("/notifications?rule_id=%s", ruleID))
		b.waitText(fmt.Sprintf(`tr[data-notification=%q]`, msg.Id.String()), "204")
		b.checkClean()
	})
}
