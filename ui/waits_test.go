package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// TestDashboardSaysWhyExecutionsWait: the new user. An http job
// whose target fails opens the handler's circuit breaker; within 2 s of
// the breaker opening (as GET /v1/handlers first says it), the job's page,
// an execution's page and the handlers page say why its executions wait;
// once the target recovers and the breaker closes, the reason is gone. A
// job on a handler no executor serves says that. No breaker is faked: the
// site's own executor calls the target.
func TestDashboardSaysWhyExecutionsWait(t *testing.T) {
	s := startSite(t, func(c *node.Config) {
		c.Breaker = executor.BreakerConfig{FailureRate: 0.5, MinRequests: 3, Window: 30 * time.Second, OpenFor: 4 * time.Second}
	})
	b := newBrowser(t, s.node.URL)
	var down atomic.Bool
	down.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer target.Close()
	key := "http:" + target.Listener.Addr().String()
	step := func(name string, f func(t *testing.T)) { b.step(t, name, f) }
	shot := b.shot

	// Every second, one attempt each: three dead runs open the breaker.
	job := s.createJob(t, map[string]any{"name": "call-partner", "schedule": map[string]any{"cron": "* * * * * *"},
		"retry": map[string]any{"max_attempts": 1}, "handler": map[string]any{"type": "http", "url": target.URL}})
	jobID := job.Id.String()
	nobody := s.createJob(t, map[string]any{"name": "orphan", "handler": map[string]any{"type": "custom", "name": "nobody-serves-this"}})

	step("sign in on the job's page", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + jobID)
		b.waitText("main h1", "Sign in")
		b.fill("key", s.admin)
		b.click("Sign in")
		b.waitText("main h1", "default/call-partner")
	})

	breakerOpen := func() bool {
		var hs models.HandlerList
		s.call(t, s.admin, "GET", "/v1/handlers", nil, &hs)
		for _, h := range hs.Items {
			if h.Handler == key {
				return h.Breaker == models.BreakerStateOpen
			}
		}
		return false
	}
	var opened time.Time
	step("the job's page says the breaker is open within 2 s", func(t *testing.T) {
		b.t = t
		nodetest.WaitFor(t, 30*time.Second, "the breaker open", breakerOpen)
		opened = time.Now()
		b.waitFor("the job's page saying the breaker is open",
			`[...document.querySelectorAll(".wait-why[data-reason=breaker_open]")].some(e => e.innerText.includes("is open on every executor serving it"))`,
			3*time.Second)
		took := time.Since(opened)
		t.Logf("the job's page said so %s after the API", took.Round(10*time.Millisecond))
		if took > 2*time.Second+500*time.Millisecond { // 2 s, and the browser's own polling of the page
			t.Errorf("the job's page said so %s after the breaker opened, want within 2 s", took)
		}
		shot("waiting-job")
	})

	var waitingID string
	step("an execution's page says why, with the next probe", func(t *testing.T) {
		b.t = t
		nodetest.WaitFor(t, 10*time.Second, "an execution waiting on the breaker", func() bool {
			var l models.ExecutionList
			s.call(t, s.admin, "GET", "/v1/jobs/"+jobID+"/executions?state=queued", nil, &l)
			for _, x := range l.Items {
				if x.Wait != nil && x.Wait.Reason == models.ExecutionWaitReasonBreakerOpen {
					waitingID = x.Id.String()
					return true
				}
			}
			return false
		})
		b.open("/executions/" + waitingID)
		b.waitFor("the reason", `document.querySelector("p.wait-why[data-reason=breaker_open]")`, 3*time.Second)
		text := b.text("p.wait-why")
		for _, want := range []string{"Why it waits:", "circuit breaker of " + key, "attempts failed within 30s", "next probe at"} {
			if !strings.Contains(text, want) {
				t.Errorf("the execution's reason does not say %q: %s", want, text)
			}
		}
		var x models.Execution
		s.call(t, s.admin, "GET", "/v1/executions/"+waitingID, nil, &x)
		if x.Wait == nil || !strings.Contains(text, x.Wait.Message) {
			t.Errorf("the page says %q, the API %+v", text, x.Wait)
		}
		b.axe("an execution waiting")
		shot("waiting-execution")
	})

	step("the handlers page shows the breaker, why and its history", func(t *testing.T) {
		b.t = t
		b.open("/handlers?h=" + key)
		b.waitText("main h1", "Handlers")
		row := fmt.Sprintf(`tr[data-handler=%q][data-breaker=open]`, key)
		b.waitFor("the handler open", `document.querySelector('`+row+`')`, 3*time.Second)
		// Its executor's why: the trip, or a failed probe since (the target
		// is still down).
		b.waitFor("its executor's why", `[...document.querySelectorAll("[data-detail] tr[data-executor]")].some(e => /attempts failed within 30s|a probe attempt failed|probing/.test(e.innerText))`, 5*time.Second)
		b.waitFor("the history", `document.querySelector("ol.history") && document.querySelector("ol.history").innerText.includes("open on ui — 3 of 3 attempts failed within 30s")`, 10*time.Second)
		b.waitFor("waiting executions with why", `document.querySelector("[data-detail] .wait-why")`, 5*time.Second)
		// The queue's history, drawn: its dead executions among them.
		b.waitFor("the queue's chart", `document.querySelector("[data-detail] section.history svg")`, 10*time.Second)
		b.axe("handlers")
		shot("handlers")
	})

	step("the reason clears when the target recovers and the breaker closes", func(t *testing.T) {
		b.t = t
		down.Store(false)
		b.open("/executions/" + waitingID)
		b.waitFor("the execution run", `document.querySelector(".state.s-succeeded") && !document.querySelector("p.wait-why")`, 30*time.Second)
		b.open("/jobs/" + jobID)
		b.waitText("main h1", "default/call-partner")
		b.waitFor("no run waiting on the breaker", `document.querySelector("table.executions tbody tr") && !document.querySelector(".wait-why[data-reason=breaker_open]")`, 15*time.Second)
	})

	step("a job on a handler no executor serves says so", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + nobody.Id.String())
		b.waitFor("the reason", `[...document.querySelectorAll(".wait-why[data-reason=no_executor]")].some(e => e.innerText.includes("no executor has ever served the queue nobody-serves-this"))`, 15*time.Second)
		b.checkClean()
	})
}
