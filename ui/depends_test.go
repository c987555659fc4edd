package ui_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node/nodetest"
)

// TestDashboardDependencies: a job that waits for another (a chain, run
// at its upstream's scheduled time) shows on both jobs' pages, linked
// each way, with what waits for it in turn; its run waits while the
// upstream's runs, listed on its job's page and the executions page, and
// its own page says what it waits for; once the upstream succeeds, the
// run goes and the two runs' pages link to each other, while a chain
// that wanted the upstream to fail is skipped and its page says why; a
// chain saved through the form stays a chain. The pages pass the
// accessibility check. No scheduler is faked: the site's own fires,
// resolves and dispatches.
func TestDashboardDependencies(t *testing.T) {
	s := startSite(t)
	b := newBrowser(t, s.node.URL)
	release := make(chan struct{})
	var once sync.Once
	s.env.Serve(t, "ui-held", func(ctx context.Context, x *executor.Execution) (string, error) {
		select {
		case <-release:
			return "imported", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	s.env.Serve(t, "ui-after", func(ctx context.Context, x *executor.Execution) (string, error) {
		return "reported", nil
	})
	// Before the workers stop (cleanups run last first): a held handler
	// would hold them up.
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	// TOCK_UI_SCREENSHOTS, as for TestDashboard: a directory to save the
	// pages in.
	shot := b.shot
	step := func(name string, f func(t *testing.T)) { b.step(t, name, f) }

	// The upstream fires once, in 3 s: the chain must exist by then, or
	// the firing makes no run of it.
	up := s.createJob(t, map[string]any{"name": "nightly-import", "schedule": map[string]any{"in": "3s"},
		"handler": map[string]any{"type": "custom", "name": "ui-held"}})
	down := s.createJob(t, map[string]any{"name": "after-import",
		"depends_on": []map[string]any{{"job": "nightly-import", "on": "success"}},
		"handler":    map[string]any{"type": "custom", "name": "ui-after"}})
	// And one further down, with a schedule of its own (not due in the test).
	last := s.createJob(t, map[string]any{"name": "publish", "schedule": map[string]any{"cron": "0 0 3 * * *"},
		"depends_on":    []map[string]any{{"job": "after-import", "on": "any"}},
		"depends_match": map[string]any{"latest_within": "6h"}, "on_timeout": "run",
		"handler": map[string]any{"type": "custom", "name": "ui-after"}})
	// And a chain that runs only when the import fails: skipped here.
	alert := s.createJob(t, map[string]any{"name": "import-failed",
		"depends_on": []map[string]any{{"job": "nightly-import", "on": "failure"}},
		"handler":    map[string]any{"type": "custom", "name": "ui-after"}})
	upID, downID, lastID := up.Id.String(), down.Id.String(), last.Id.String()
	if down.Chain == nil || !*down.Chain {
		t.Fatalf("the dependent job without a schedule is not a chain: %+v", down)
	}
	if n := nodetest.CountExecutions(t, s.env.PG, up.Id); n != 0 {
		t.Fatalf("the upstream fired (%d executions) before its chain was created: the test raced", n)
	}

	step("sign in", func(t *testing.T) {
		b.t = t
		b.open("/jobs")
		b.waitText("main h1", "Sign in")
		b.fill("key", s.admin)
		b.click("Sign in")
		b.waitText("main h1", "Jobs")
		b.checkClean()
	})

	deps := `section[aria-labelledby="deps"]`
	step("the jobs' pages show their dependencies, each way", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + downID)
		b.waitText("main h1", "default/after-import")
		b.waitFor("the upstream linked", fmt.Sprintf(`document.querySelector('%s [data-upstream=%q] a[href="/ui/jobs/%s"]')`, deps, upID, upID), 15*time.Second)
		text := b.text(deps)
		for _, want := range []string{"Waits for", "default/nightly-import", "runs when it succeeds", "all: every upstream",
			"at the same scheduled time", "1h, then skip the run", "Chain", "Runs waiting now"} {
			if !strings.Contains(text, want) {
				t.Errorf("the dependent job's Dependencies do not say %q:\n%s", want, text)
			}
		}
		if got := b.text("section[aria-labelledby=sched] dd"); got != "after its upstreams (a chain)" {
			t.Errorf("the chain's schedule reads %q", got)
		}
		b.axe("dependent job")
		shot("job-dependent")

		b.open("/jobs/" + upID)
		b.waitText("main h1", "default/nightly-import")
		b.waitFor("the downstream linked", fmt.Sprintf(`document.querySelector('%s a[href="/ui/jobs/%s"]')`, deps, downID), 15*time.Second)
		text = b.text(deps)
		for _, want := range []string{"Waited for by", "default/after-import", "runs when this job succeeds", "chain",
			"default/publish", "runs whenever default/after-import ends"} {
			if !strings.Contains(text, want) {
				t.Errorf("the upstream job's Dependencies do not say %q:\n%s", want, text)
			}
		}
		// The one further down, nested under the one it waits for.
		b.waitFor("the job further down linked", fmt.Sprintf(`document.querySelector('%s li li a[href="/ui/jobs/%s"]')`, deps, lastID), 15*time.Second)
		shot("job-upstream")
		if strings.Contains(text, "Runs waiting now") {
			t.Errorf("a job that waits for none lists runs waiting:\n%s", text)
		}

		// The last one: what it waits for, and what that waits for.
		b.open("/jobs/" + lastID)
		b.waitText("main h1", "default/publish")
		b.waitFor("the job further up linked", fmt.Sprintf(`document.querySelector('%s [data-upstream=%q] li a[href="/ui/jobs/%s"]')`, deps, downID, upID), 15*time.Second)
		text = b.text(deps)
		for _, want := range []string{"default/after-import — runs whenever it ends", "within 6h", "1h, then run anyway"} {
			if !strings.Contains(text, want) {
				t.Errorf("the last job's Dependencies do not say %q:\n%s", want, text)
			}
		}
		b.axe("job further down")
		b.checkClean()
	})

	// The upstream fires: its run is held running, the chain's waits.
	var waiting, upRun models.Execution
	nodetest.WaitFor(t, 30*time.Second, "the chain's run waiting, the upstream's running", func() bool {
		var l models.ExecutionList
		s.call(t, s.admin, "GET", "/v1/jobs/"+downID+"/executions?state=waiting", nil, &l)
		var u models.ExecutionList
		s.call(t, s.admin, "GET", "/v1/jobs/"+upID+"/executions?state=running", nil, &u)
		if len(l.Items) == 0 || len(u.Items) == 0 {
			return false
		}
		waiting, upRun = l.Items[0], u.Items[0]
		return true
	})
	if !waiting.ScheduledFor.Equal(upRun.ScheduledFor) {
		t.Errorf("the chain's run is scheduled for %s, its upstream's for %s", waiting.ScheduledFor, upRun.ScheduledFor)
	}
	xID, upXID := waiting.Id.String(), upRun.Id.String()

	step("the waiting run, listed", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + downID)
		b.waitFor("the waiting run linked", fmt.Sprintf(`document.querySelector('%s a[href="/ui/executions/%s"]')`, deps, xID), 15*time.Second)
		b.waitFor("its state in the executions", fmt.Sprintf(`document.querySelector('tr[data-execution=%q] .state').innerText === "waiting"`, xID), 15*time.Second)
		b.open("/executions?state=waiting")
		b.waitFor("the waiting run found by its state", fmt.Sprintf(`document.querySelector('tr[data-execution=%q][data-state="waiting"]')`, xID), 15*time.Second)
		var picked string
		if err := b.eval(`document.querySelector("#f-state").value`, &picked); err != nil || picked != "waiting" {
			t.Errorf("the state filter shows %q (%v), want waiting", picked, err)
		}
		b.checkClean()
	})

	wf := `section[aria-labelledby="waiting-for"]`
	step("the waiting run's page says what it waits for", func(t *testing.T) {
		b.t = t
		b.open("/executions/" + xID)
		b.waitFor("the state waiting", `document.querySelector("main h1 .state").innerText === "waiting"`, 15*time.Second)
		b.waitText(wf+" h2", "Waiting for")
		b.waitFor("the upstream linked", fmt.Sprintf(`document.querySelector('%s [data-upstream=%q] a[href="/ui/jobs/%s"]')`, wf, upID, upID), 15*time.Second)
		b.waitFor("the upstream's run linked", fmt.Sprintf(`document.querySelector('%s [data-upstream=%q] a[href="/ui/executions/%s"]')`, wf, upID, upXID), 15*time.Second)
		text := b.text(wf)
		for _, want := range []string{"nightly-import", "pending (not decided yet)", "this run goes when it succeeds", "is running", "Waits until"} {
			if !strings.Contains(text, want) {
				t.Errorf("Waiting for does not say %q:\n%s", want, text)
			}
		}
		if !b.offers("Cancel") {
			t.Error("a waiting run cannot be cancelled from its page")
		}
		b.axe("waiting execution")
		shot("execution-waiting")
		b.checkClean()
	})

	step("the upstream succeeds: the run goes, the two linked", func(t *testing.T) {
		b.t = t
		once.Do(func() { close(release) })
		// The page follows the run live, from waiting to its end.
		b.waitFor("the run succeeded", `document.querySelector("main h1 .state").innerText === "succeeded"`, 30*time.Second)
		if b.has(wf) {
			t.Errorf("a run that went still shows Waiting for:\n%s", b.text(wf))
		}
		b.waitFor("the upstream's run that let it go", fmt.Sprintf(`document.querySelector('section[aria-labelledby="upstreams"] a[href="/ui/executions/%s"]')`, upXID), 15*time.Second)
		if text := b.text(`section[aria-labelledby="upstreams"]`); !strings.Contains(text, "Let run by") || !strings.Contains(text, "default/nightly-import") {
			t.Errorf("Let run by says:\n%s", text)
		}
		shot("execution-let-run")
		b.open("/executions/" + upXID)
		b.waitFor("the run it released", fmt.Sprintf(`document.querySelector('section[aria-labelledby="released"] a[href="/ui/executions/%s"]')`, xID), 15*time.Second)
		if text := b.text(`section[aria-labelledby="released"]`); !strings.Contains(text, "default/after-import") {
			t.Errorf("Released says:\n%s", text)
		}
		b.axe("released execution")
		shot("execution-released")
		b.checkClean()
	})

	step("a run its upstream refused: skipped, and why", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + alert.Id.String())
		b.waitText("main h1", "default/import-failed")
		b.waitText(`section[aria-labelledby="skips"]`, "1 run dependency:")
		if text := b.text(`section[aria-labelledby="skips"]`); !strings.Contains(text, "nightly-import") || !strings.Contains(text, "not failure") {
			t.Errorf("the skip does not say why:\n%s", text)
		}
		shot("job-skipped")
		b.checkClean()
	})

	step("a chain edited in the form stays a chain", func(t *testing.T) {
		b.t = t
		b.open("/jobs/" + downID + "/edit")
		b.waitText("main h1", "Edit default/after-import")
		b.waitText("main form", "A chain: it has no schedule of its own")
		b.fill("f-description", "reports on the import")
		b.click("Save")
		b.waitFor("the job's page", fmt.Sprintf(`location.pathname === %q`, "/ui/jobs/"+downID), 15*time.Second)
		j := s.job(t, downID)
		if j.Chain == nil || !*j.Chain || nodetest.Str(j.Description) != "reports on the import" {
			t.Errorf("after the edit the job is chain %v, description %q", j.Chain, nodetest.Str(j.Description))
		}
		b.checkClean()
	})
}
