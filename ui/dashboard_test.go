package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/ui"
)

// site is a tockd that requires keys, with an admin's and a reader's.
type site struct {
	env           *nodetest.Env
	node          *nodetest.Node
	admin, reader string
}

// startSite starts the site's tockd, with config changing its
// configuration when given.
func startSite(t *testing.T, config ...func(*node.Config)) *site {
	t.Helper()
	env := nodetest.New(t)
	st := nodetest.OpenStore(t, env.PG)
	s := &site{env: env, admin: makeKey(t, st, "admin"), reader: makeKey(t, st, "reader")}
	s.node = env.StartWith(t, "ui", func(c *node.Config) {
		c.AuthNone, c.Pprof = false, false
		for _, f := range config {
			f(c)
		}
	})
	return s
}

// makeKey stores a new API key with role in every namespace, as tockd keys
// create does, and returns it.
func makeKey(t *testing.T, st interface {
	CreateAPIKey(context.Context, model.APIKey) (*model.APIKey, error)
}, role string) string {
	t.Helper()
	k, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAPIKey(context.Background(), model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: "*",
		Role: role, Name: role + " of the browser tests", CreatedBy: "test", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return k.String()
}

// call sends a JSON request with key to the site's API, decodes a 2xx
// answer into out, and returns the status.
func (s *site) call(t *testing.T, key, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.node.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	} else if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

func (s *site) createJob(t *testing.T, body map[string]any) models.Job {
	t.Helper()
	var j models.Job
	if code := s.call(t, s.admin, "POST", "/v1/jobs", body, &j); code != http.StatusCreated {
		t.Fatalf("create job: %d", code)
	}
	return j
}

func (s *site) job(t *testing.T, id string) models.Job {
	t.Helper()
	var j models.Job
	if code := s.call(t, s.admin, "GET", "/v1/jobs/"+id, nil, &j); code != http.StatusOK {
		t.Fatalf("get job %s: %d", id, code)
	}
	return j
}

func (s *site) execution(t *testing.T, id string) models.Execution {
	t.Helper()
	var x models.Execution
	if code := s.call(t, s.admin, "GET", "/v1/executions/"+id, nil, &x); code != http.StatusOK {
		t.Fatalf("get execution %s: %d", id, code)
	}
	return x
}

// TestDashboard drives the dashboard in Chromium as its users would: a
// stranger is asked to sign in, an admin creates a job through the form
// (and sees the field error first), watches its executions arrive live,
// re-drives a dead execution and pauses jobs by a label selector; a reader
// sees no write action and is told when the API refuses; every page passes
// an accessibility check.
func TestDashboard(t *testing.T) {
	s := startSite(t)
	b := newBrowser(t, s.node.URL)
	var jobID string
	var runs atomic.Int64
	s.env.Serve(t, "ui-live", func(ctx context.Context, x *executor.Execution) (string, error) {
		runs.Add(1)
		return "ok", nil
	})
	s.env.Serve(t, "ui-fail", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "", errors.New("payments-api refused the connection")
	})
	// The steps build on each other: the first to fail ends the test,
	// with a screenshot of its page.
	step := func(name string, f func(t *testing.T)) { b.step(t, name, f) }

	step("an unknown key is asked to sign in", func(t *testing.T) {
		b.t = t
		b.open("/jobs")
		b.waitText("main h1", "Sign in")
		b.fill("key", "tock_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB")
		b.click("Sign in")
		b.waitText(".error", "Unauthorized")
		if got := b.text("main h1"); got != "Sign in to tock" {
			t.Fatalf("an unknown key got past the sign-in page to %q", got)
		}
		b.fill("key", s.admin)
		b.click("Sign in")
		b.waitText("main h1", "Jobs")
		b.waitText("header .who", "Sign out")
		b.checkClean()
	})

	step("create a job through the form", func(t *testing.T) {
		b.t = t
		b.open("/jobs")
		b.click("New job")
		b.waitText("main h1", "New job")
		b.fill("f-name", "every-second")
		b.fill("f-schedule.cron", "0 0 25 * * *") // there is no hour 25
		b.choose("f-handler.type", "custom")
		b.fill("f-handler.name", "ui-live")
		b.click("Create job")
		b.waitText(`[data-field="schedule.cron"] .field-error`, "25")
		if b.text("main h1") != "New job" {
			t.Fatal("an invalid job left the form")
		}
		b.fill("f-schedule.cron", "* * * * * *")
		b.waitText(".preview .words", "Every second")
		b.waitFor("the next 5 runs", `document.querySelectorAll(".preview ol.fires li").length === 5`, 15*time.Second)
		var ns string
		if err := b.eval(`document.querySelector("#f-namespace").value`, &ns); err != nil || ns != "default" {
			t.Errorf("the form's namespace is %q (%v), want default", ns, err)
		}
		b.click("Create job")
		b.waitText("main h1", "default/every-second")
		if err := b.eval(`location.pathname.split("/").pop()`, &jobID); err != nil {
			t.Fatal(err)
		}
		j := s.job(t, jobID)
		if nodetest.Str(j.Schedule.Cron) != "* * * * * *" || j.Handler.Type != "custom" {
			t.Fatalf("the job stored is %+v", j)
		}
		b.checkClean()
	})

	step("executions appear live", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + jobID)
		b.waitText("main h1", "every-second")
		// A mark on the page's window: a reload would lose it.
		_ = b.eval(`window.__noReload = 1`, nil)
		var first string
		b.waitFor("an execution listed", `document.querySelector("tr[data-execution]")`, 15*time.Second)
		_ = b.eval(`document.querySelector("tr[data-execution]").dataset.execution`, &first)
		b.waitFor("newer executions on top", fmt.Sprintf(`document.querySelector("tr[data-execution]").dataset.execution !== %q`, first), 15*time.Second)
		b.waitFor("executions that succeeded", `document.querySelectorAll('tr[data-state="succeeded"]').length >= 2`, 15*time.Second)
		if runs.Load() == 0 {
			t.Fatal("the page shows executions that the executor never ran")
		}
		var mark int
		if err := b.eval(`window.__noReload`, &mark); err != nil || mark != 1 {
			t.Fatalf("the page was reloaded (mark %d, %v)", mark, err)
		}
		if s.call(t, s.admin, "POST", "/v1/jobs/"+jobID+"/pause", nil, nil) != http.StatusOK {
			t.Fatal("pause")
		}
		b.waitText("main h1", "paused") // the job's change arrives live too
		b.checkClean()
	})

	step("an execution's log, followed live", func(t *testing.T) {
		b.t = t
		// Attempt 1 writes a line every 20 ms for 6 s, each carrying the
		// time it was written, then fails; attempt 2 writes one line.
		var (
			mu      sync.Mutex
			written strings.Builder
		)
		s.env.Serve(t, "ui-logs", func(ctx context.Context, x *executor.Execution) (string, error) {
			if x.Attempt > 1 {
				fmt.Fprintln(executor.Log(ctx), "second attempt, all good")
				return "", nil
			}
			for i := range 300 {
				line := fmt.Sprintf("%06d %d writing\n", i, time.Now().UnixNano())
				mu.Lock()
				written.WriteString(line)
				mu.Unlock()
				_, _ = io.WriteString(executor.Log(ctx), line)
				time.Sleep(20 * time.Millisecond)
			}
			return "", errors.New("failed after writing 300 lines")
		})
		j := s.createJob(t, map[string]any{"name": "chatty", "schedule": map[string]any{"in": "1s"},
			"handler": map[string]any{"type": "custom", "name": "ui-logs"},
			"retry":   map[string]any{"max_attempts": 2, "initial_backoff": "1s", "jitter": "none"}})
		var x models.Execution
		nodetest.WaitFor(t, 30*time.Second, "the execution running", func() bool {
			var l models.ExecutionList
			s.call(t, s.admin, "GET", "/v1/executions?job_id="+j.Id.String(), nil, &l)
			if len(l.Items) > 0 && l.Items[0].State == "running" {
				x = l.Items[0]
				return true
			}
			return false
		})
		b.open("/executions/" + x.Id.String())
		b.waitFor("the log followed", `document.querySelector("[data-log-state=following]") && document.querySelector("pre.log").textContent.length > 0`, 15*time.Second)
		// How old is the newest line on the page, sampled while the
		// handler writes: the time from a line written to a line seen.
		var ages []time.Duration
		for range 30 {
			var last string
			_ = b.eval(`(t => t.slice(t.lastIndexOf("\n", t.length - 2) + 1))(document.querySelector("pre.log").textContent)`, &last)
			if f := strings.Fields(last); len(f) >= 2 {
				if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					ages = append(ages, time.Since(time.Unix(0, ns)))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		slices.Sort(ages)
		if len(ages) < 10 {
			t.Fatalf("only %d samples of the followed log", len(ages))
		}
		p50, worst := ages[len(ages)/2], ages[len(ages)-1]
		t.Logf("the newest line on the page was written %s ago (median), %s at worst", p50.Round(time.Millisecond), worst.Round(time.Millisecond))
		if p50 > time.Second || worst > 5*time.Second {
			t.Errorf("the followed log lags %s (median), %s at worst; want within 1 s", p50, worst)
		}
		// Attempt 2 begins: the page moves to it; attempt 1 is whole.
		b.waitFor("attempt 2's log", `document.querySelector("pre.log").textContent.includes("second attempt, all good")`, 30*time.Second)
		b.choose("log-attempt", "1")
		mu.Lock()
		want := written.String()
		mu.Unlock()
		b.waitFor("attempt 1's whole log", fmt.Sprintf(`document.querySelector("pre.log").textContent === %q`, want), 15*time.Second)
		b.fill("log-search", "000042")
		b.click("Search")
		b.waitFor("the lines found", `/^000042 \d+ writing\n$/.test(document.querySelector("pre.log").textContent)`, 15*time.Second)
		if !b.offers("Download") {
			t.Error("no Download button")
		}
		b.axe("execution log")
		b.checkClean()
	})

	step("re-drive a dead execution", func(t *testing.T) {
		b.t = t
		j := s.createJob(t, map[string]any{"name": "always-fails", "schedule": map[string]any{},
			"handler": map[string]any{"type": "custom", "name": "ui-fail"}, "retry": map[string]any{"max_attempts": 1}})
		var dead models.Execution
		nodetest.WaitFor(t, 20*time.Second, "a dead execution", func() bool {
			var l models.ExecutionList
			s.call(t, s.admin, "GET", "/v1/executions?state=dead&job_id="+j.Id.String(), nil, &l)
			if len(l.Items) > 0 {
				dead = l.Items[0]
			}
			return len(l.Items) > 0
		})
		b.open("/executions?state=dead")
		b.waitFor("the dead execution listed", fmt.Sprintf(`document.querySelector('tr[data-execution=%q] input[type=checkbox]')`, dead.Id.String()), 15*time.Second)
		if err := b.eval(fmt.Sprintf(`document.querySelector('tr[data-execution=%q] input[type=checkbox]').click()`, dead.Id.String()), nil); err != nil {
			t.Fatal(err)
		}
		b.click("Re-drive 1 selected")
		b.waitText(`[role="status"]`, "Re-drove 1 execution")
		nodetest.WaitFor(t, 20*time.Second, "a second attempt", func() bool { return s.execution(t, dead.Id.String()).Attempts >= 2 })
		b.checkClean()
	})

	step("edit a job, run it now, pause live updates", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + jobID)
		b.click("Edit")
		b.waitText("main h1", "Edit default/every-second")
		// Someone changes the job after the form loaded it: the form's
		// save is refused (412), not written over theirs.
		if code := s.call(t, s.admin, "PATCH", "/v1/jobs/"+jobID, map[string]any{"description": "changed elsewhere"}, nil); code != 200 {
			t.Fatalf("the other change: %d", code)
		}
		b.fill("f-schedule.cron", "*/3 * * * * *")
		b.click("Save")
		b.waitText("main", "changed since the ETag sent as If-Match was read")
		if j := s.job(t, jobID); nodetest.Str(j.Description) != "changed elsewhere" || nodetest.Str(j.Schedule.Cron) == "*/3 * * * * *" {
			t.Fatalf("a stale form overwrote the job: %+v", j)
		}
		b.open("/jobs/" + jobID + "/edit") // read again
		b.waitText("main h1", "Edit default/every-second")
		b.fill("f-schedule.cron", "*/2 * * * * *")
		b.fill("f-labels", "team=ui, tier=gold")
		b.waitText(".preview .words", "Every 2 seconds")
		b.click("Save")
		b.waitFor("the job's page", fmt.Sprintf(`location.pathname === %q`, "/ui/jobs/"+jobID), 15*time.Second)
		j := s.job(t, jobID)
		if nodetest.Str(j.Schedule.Cron) != "*/2 * * * * *" || j.Labels == nil || (*j.Labels)["tier"] != "gold" {
			t.Fatalf("after the edit the job is %+v", j)
		}
		if j.Handler.Type != "custom" || nodetest.Str(j.Handler.Name) != "ui-live" {
			t.Errorf("the edit changed the handler to %+v", j.Handler)
		}
		// Run now: a manual execution, shown on its own page.
		b.click("Run now")
		b.waitText("main h1", "Execution")
		b.waitText("main", "manual")
		b.waitFor("the manual run succeeded", `document.querySelector("main h1 .state").innerText === "succeeded"`, 15*time.Second)

		// With Live off, the job's list stands still; on again, it reloads.
		if s.call(t, s.admin, "POST", "/v1/jobs/"+jobID+"/resume", map[string]any{"catch_up": false}, nil) != http.StatusOK {
			t.Fatal("resume")
		}
		b.open("/jobs/" + jobID)
		b.waitText("main h1", "active")
		// The list's first load is not a live change: it must be in first.
		b.waitFor("the executions listed", `document.querySelector("tr[data-execution]")`, 15*time.Second)
		b.run("switch Live off", chromedp.Click(chromedp.CSS(`header .switch input`)))
		var first string
		_ = b.eval(`document.querySelector("tr[data-execution]").dataset.execution`, &first)
		time.Sleep(4 * time.Second) // two runs, at least, while paused
		var still string
		_ = b.eval(`document.querySelector("tr[data-execution]").dataset.execution`, &still)
		if still != first {
			t.Errorf("with Live off the list changed: %s on top, then %s", first, still)
		}
		b.run("switch Live on", chromedp.Click(chromedp.CSS(`header .switch input`)))
		b.waitFor("the list reloaded", fmt.Sprintf(`document.querySelector("tr[data-execution]").dataset.execution !== %q`, first), 15*time.Second)
		if s.call(t, s.admin, "POST", "/v1/jobs/"+jobID+"/pause", nil, nil) != http.StatusOK {
			t.Fatal("pause")
		}
		b.checkClean()
	})

	step("a job of a locked apply set says so and offers no edit", func(t *testing.T) {
		b.t = t
		body := map[string]any{"jobs": []any{map[string]any{"name": "from-git", "schedule": map[string]any{"cron": "0 0 * * * *"},
			"handler": map[string]any{"type": "custom", "name": "ui-live"}}}, "lock": true}
		var plan models.ApplySetPlan
		if code := s.call(t, s.admin, "POST", "/v1/applysets/ui-files:plan", body, &plan); code != http.StatusOK {
			t.Fatalf("plan: %d", code)
		}
		body["plan_hash"] = plan.PlanHash
		if code := s.call(t, s.admin, "POST", "/v1/applysets/ui-files:apply", body, &plan); code != http.StatusOK || plan.Changes[0].JobId == nil {
			t.Fatalf("apply: %d %+v", code, plan)
		}
		b.open("/jobs/" + plan.Changes[0].JobId.String())
		b.waitText(".notice", "apply set ui-files")
		b.waitText(".notice", "locked")
		if b.offers("Edit") || b.offers("Delete") || !b.offers("Pause") {
			t.Fatal("a locked set's job offers Edit or Delete, or no Pause")
		}
		b.checkClean()
	})

	step("calendars: listed, and what one does not allow next", func(t *testing.T) {
		b.t = t
		day := time.Now().UTC().AddDate(0, 0, 3).Format(time.DateOnly)
		if code := s.call(t, s.admin, "POST", "/v1/calendars", map[string]any{"name": "ui-holidays", "timezone": "UTC", "dates": []string{day},
			"weekly": []any{map[string]any{"days": []string{"SAT"}, "start": "22:00", "end": "02:00"}}}, nil); code != http.StatusCreated {
			t.Fatalf("create calendar: %d", code)
		}
		b.open("/calendars?namespace=default")
		b.waitText(`tr[data-calendar="ui-holidays"]`, "1 dates, 1 weekly")
		if err := b.eval(`document.querySelector('tr[data-calendar="ui-holidays"] a').click()`, nil); err != nil && !strings.Contains(err.Error(), "undefined") {
			t.Fatal(err)
		}
		b.waitText("main h1", "Calendar default/ui-holidays")
		b.waitText("main table", "date "+day)
		b.checkClean()
		// A job that names it: its page links the calendar and marks the
		// upcoming run it excludes.
		j := s.createJob(t, map[string]any{"name": "ui-cal-job", "schedule": map[string]any{"cron": "0 0 12 * * *"},
			"handler": map[string]any{"type": "custom", "name": "ui"}, "calendars": []string{"ui-holidays"}})
		b.open("/jobs/" + j.Id.String())
		b.waitText(`a.calendar[href$="/calendars/ui-holidays?namespace=default"]`, "ui-holidays")
		b.waitText(".fires", "excluded by ui-holidays: date "+day)
		b.checkClean()
	})

	step("waiting on: a concurrency key's holder and queue, and why an execution waits", func(t *testing.T) {
		b.t = t
		j := s.createJob(t, map[string]any{"name": "ui-slots", "labels": map[string]string{"customer": "ui-acme"},
			"schedule": map[string]any{"cron": "0 0 3 * * *"}, "handler": map[string]any{"type": "custom", "name": "ui-nobody"},
			"concurrency": map[string]any{"key": "{{ .labels.customer }}", "limit": 1}})
		var runs []models.Execution
		for range 3 {
			var x models.Execution
			if code := s.call(t, s.admin, "POST", "/v1/jobs/"+j.Id.String()+"/run", nil, &x); code != http.StatusAccepted {
				t.Fatalf("run now: %d", code)
			}
			runs = append(runs, x)
		}
		b.open("/concurrency?namespace=default")
		b.waitText(`tr[data-key="ui-acme"]`, "ui-acme")
		b.waitFor("1 held and 2 waiting", `(() => { const c = [...document.querySelectorAll('tr[data-key="ui-acme"] td')].map(td => td.innerText); return c[2] === "1" && c[3] === "2"; })()`, 10*time.Second)
		if err := b.eval(`document.querySelector('tr[data-key="ui-acme"] a').click()`, nil); err != nil && !strings.Contains(err.Error(), "undefined") {
			t.Fatal(err)
		}
		b.waitText("main h1", "Waiting on ui-acme")
		b.waitFor("the queue in order", fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("section:nth-of-type(2) tr[data-execution]")].map(e => e.dataset.execution); return r.join() === %q; })()`,
			runs[1].Id.String()+","+runs[2].Id.String()), 10*time.Second)
		b.open("/executions/" + runs[2].Id.String())
		b.waitText("main", "waiting for a slot of concurrency key ns:default:ui-acme")
		b.checkClean()
	})

	step("create a key, its secret shown once", func(t *testing.T) {
		b.t = t
		b.open("/keys")
		b.waitText("main h1", "API keys")
		b.fill("f-namespace", "shop")
		b.choose("f-role", "operator")
		b.fill("f-name", "deploy bot")
		b.click("Create key")
		b.waitText(".notice", "not shown again")
		secret := strings.TrimSpace(b.text(".notice pre"))
		var who models.Whoami
		if code := s.call(t, secret, "GET", "/v1/whoami", nil, &who); code != http.StatusOK || len(who.Grants) != 1 ||
			who.Grants[0].Namespace != "shop" || who.Grants[0].Role != "operator" {
			t.Fatalf("the key the page showed: %d %+v", code, who)
		}
		b.waitText("tbody", "deploy bot")
		b.checkClean()
	})

	step("bulk pause by a label selector", func(t *testing.T) {
		b.t = t
		var ids []string
		for i, team := range []string{"checkout", "checkout", "checkout", "search"} {
			j := s.createJob(t, map[string]any{"name": fmt.Sprintf("nightly-%d", i), "namespace": "shop",
				"schedule": map[string]any{"cron": "0 0 3 * * *"}, "labels": map[string]string{"team": team},
				"handler": map[string]any{"type": "custom", "name": "ui-live"}})
			ids = append(ids, j.Id.String())
		}
		b.open("/jobs?namespace=shop&selector=team%3Dcheckout")
		b.waitFor("three jobs listed", `document.querySelectorAll("tbody tr").length === 3 && document.body.innerText.includes("nightly-2")`, 15*time.Second)
		b.click("Pause matching")
		b.waitText(`[role="status"]`, "Paused 3 of 3 matching jobs")
		for i, id := range ids {
			want := models.JobStatePaused
			if i == 3 {
				want = models.JobStateActive
			}
			if got := s.job(t, id).State; got != want {
				t.Errorf("job nightly-%d is %s, want %s", i, got, want)
			}
		}
		b.waitFor("the list shows them paused", `[...document.querySelectorAll("tbody .state")].every(e => e.innerText === "paused")`, 15*time.Second)
		b.checkClean()
	})

	step("every page passes the accessibility check", func(t *testing.T) {
		b.t = t
		var l models.ExecutionList
		s.call(t, s.admin, "GET", "/v1/executions?limit=1", nil, &l)
		if len(l.Items) == 0 || jobID == "" {
			t.Fatal("no execution to show")
		}
		pages := map[string]string{
			"overview": "/", "jobs": "/jobs", "new job": "/jobs/new", "job": "/jobs/" + jobID,
			"executions": "/executions", "execution": "/executions/" + l.Items[0].Id.String(),
			"cluster": "/cluster", "keys": "/keys", "audit": "/audit",
			"calendars": "/calendars", "calendar": "/calendars/ui-holidays?namespace=default",
			"waiting on": "/concurrency?namespace=default", "waiting on a key": "/concurrency?namespace=default&key=ui-acme",
		}
		shots := os.Getenv("TOCK_UI_SCREENSHOTS")
		for name, path := range pages {
			b.open(path)
			b.waitFor(name+" loaded", `document.querySelector("main h1") && !document.querySelector('[aria-busy="true"]')`, 15*time.Second)
			b.axe(name)
			if shots != "" {
				b.screenshot(filepath.Join(shots, strings.ReplaceAll(name, " ", "-")+".png"))
			}
		}
		b.checkClean()
	})

	step("a reader sees no write action", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.click("Sign out")
		b.waitText("main h1", "Sign in")
		b.axe("sign-in")
		b.fill("key", s.reader)
		b.click("Sign in")
		b.waitText("main h1", "Overview")
		for _, link := range []string{"Keys", "Cluster", "Audit"} {
			if strings.Contains(b.text("header nav"), link) {
				t.Errorf("a reader's navigation offers %s", link)
			}
		}
		b.open("/jobs?namespace=shop")
		b.waitText("tbody", "nightly-0")
		for _, action := range []string{"New job", "Pause matching", "Resume matching"} {
			if b.offers(action) {
				t.Errorf("a reader is offered %q on the jobs page", action)
			}
		}
		b.open("/jobs/" + jobID)
		b.waitText("main h1", "every-second")
		for _, action := range []string{"Run now", "Pause", "Resume", "Edit", "Delete", "Start backfill"} {
			if b.offers(action) {
				t.Errorf("a reader is offered %q on the job page", action)
			}
		}
		b.open("/executions?state=dead")
		b.waitFor("the dead executions listed", `document.querySelector("tr[data-execution]")`, 15*time.Second)
		if b.has(`tr[data-execution] input[type=checkbox]`) || strings.Contains(b.text("main"), "Re-drive") {
			t.Error("a reader is offered re-drive")
		}
		// A page the role may not see: the API's 403, shown as such.
		b.open("/keys")
		b.waitText(".error.forbidden", "Not allowed")
		b.checkClean()
	})
}

// TestDashboardOpen: with the API open (tockd dev), the dashboard needs no
// key; tockd sends a browser from / to it, serves it with its security
// headers, and not at all with --no-ui.
func TestDashboardOpen(t *testing.T) {
	env := nodetest.New(t)
	n := env.Start(t, "open")
	noClient := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noClient.Get(n.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET / = %d to %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/ui/", "/ui/executions?state=dead", "/ui/app.js"} {
		resp, err := http.Get(n.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != ui.CSP ||
			resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s = %d, CSP %q, X-Frame-Options %q", path, resp.StatusCode,
				resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Frame-Options"))
		}
	}
	if resp, err := http.Get(n.URL + "/ui/missing.js"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/missing.js: %v %v, want 404", resp.StatusCode, err)
	}

	b := newBrowser(t, n.URL)
	b.open("/")
	b.waitText("main h1", "Overview")
	b.waitText("header .who", "open (no keys)")
	b.checkClean()

	off := env.StartWith(t, "no-ui", func(c *node.Config) { c.NoUI = true })
	resp, err = http.Get(off.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("with --no-ui, GET /ui/ = %d, want 404", resp.StatusCode)
	}
}
