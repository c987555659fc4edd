package scanner_test

// Schedule windows, max_runs, jitter, resume with and without catch-up
// and bulk pause by selector, end to end on one node.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/schedule"
)

// jobState reads a job's state and run count through the API.
func jobState(t *testing.T, n *nodetest.Node, id uuid.UUID) (string, int64) {
	t.Helper()
	j := n.Job(t, id)
	var runs int64
	if j.Runs != nil {
		runs = *j.Runs
	}
	return string(j.State), runs
}

func TestWindowsMaxRunsJitterResumeBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	e.Echo(t, "win")
	every := func(name string, extra map[string]any) map[string]any {
		body := map[string]any{
			"name":     name,
			"schedule": map[string]any{"cron": "* * * * * *"},
			"handler":  map[string]any{"type": "custom", "name": "win"},
		}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}

	t.Run("max_runs", func(t *testing.T) {
		t.Parallel()
		j := n.CreateJob(t, every("max3", map[string]any{"schedule": map[string]any{"cron": "* * * * * *", "max_runs": 3}}))
		nodetest.WaitFor(t, 15*time.Second, "the job to complete", func() bool { s, _ := jobState(t, n, j.Id); return s == "completed" })
		time.Sleep(2 * time.Second)
		if n := nodetest.CountExecutions(t, e.PG, j.Id); n != 3 {
			t.Errorf("max_runs 3: %d executions", n)
		}
		if _, runs := jobState(t, n, j.Id); runs != 3 {
			t.Errorf("max_runs 3: runs %d", runs)
		}
	})

	t.Run("window", func(t *testing.T) {
		t.Parallel()
		start := time.Now().Add(3 * time.Second).Truncate(time.Second)
		end := start.Add(3 * time.Second)
		j := n.CreateJob(t, every("window", map[string]any{"schedule": map[string]any{"cron": "* * * * * *",
			"start_at": start.Format(time.RFC3339), "end_at": end.Format(time.RFC3339)}}))
		nodetest.WaitFor(t, 20*time.Second, "the window's job to complete", func() bool { s, _ := jobState(t, n, j.Id); return s == "completed" })
		xs := n.Executions(t, j.Id)
		if len(xs) != 4 {
			t.Errorf("window [%s, %s]: %d executions, want 4", start.Format(time.TimeOnly), end.Format(time.TimeOnly), len(xs))
		}
		for _, x := range xs {
			if x.ScheduledFor.Before(start) || x.ScheduledFor.After(end) {
				t.Errorf("an execution at %s, outside the window", x.ScheduledFor.Format(time.TimeOnly))
			}
		}
	})

	t.Run("jitter", func(t *testing.T) {
		t.Parallel()
		j := n.CreateJob(t, every("jitter", map[string]any{"schedule": map[string]any{"cron": "* * * * * *", "jitter": "1500ms"}}))
		nodetest.WaitFor(t, 20*time.Second, "5 jittered runs to succeed", func() bool { return len(nodetest.Succeeded(n.Executions(t, j.Id))) >= 5 })
		sch, err := schedule.Compile(schedule.Spec{Cron: "* * * * * *", Jitter: "1500ms"})
		if err != nil {
			t.Fatal(err)
		}
		items := n.Executions(t, j.Id)
		id := j.Id
		distinct := map[time.Duration]bool{}
		for _, x := range items {
			if x.DueAt == nil {
				t.Errorf("run %s has no due_at", x.ScheduledFor.Format(time.TimeOnly))
				continue
			}
			off := x.DueAt.Sub(x.ScheduledFor)
			distinct[off] = true
			if off < 0 || off >= 1500*time.Millisecond {
				t.Errorf("run %s: offset %s outside [0, 1.5s)", x.ScheduledFor.Format(time.TimeOnly), off)
			}
			if want := sch.Offset(id, x.ScheduledFor); off != want {
				t.Errorf("run %s: offset %s, but (job, time) gives %s", x.ScheduledFor.Format(time.TimeOnly), off, want)
			}
			if x.State == "succeeded" && x.DispatchedAt != nil && x.DispatchedAt.Before(x.DueAt.Add(-50*time.Millisecond)) {
				t.Errorf("run %s published at %s, before it was due at %s", x.ScheduledFor.Format(time.TimeOnly),
					x.DispatchedAt.Format("15:04:05.000"), x.DueAt.Format("15:04:05.000"))
			}
		}
		if len(distinct) < 2 {
			t.Errorf("every run got the same offset: %v", distinct)
		}
	})

	resume := func(t *testing.T, name string, catchUp bool) {
		j := n.CreateJob(t, every(name, map[string]any{"missed": map[string]any{"policy": "all", "grace": "1s"}}))
		nodetest.WaitFor(t, 15*time.Second, "the job to fire", func() bool { return nodetest.CountExecutions(t, e.PG, j.Id) >= 2 })
		from := time.Now().Add(time.Second)
		if resp, err := n.Client.PauseJobWithResponse(ctx, j.Id); err != nil || resp.StatusCode() != http.StatusOK {
			t.Fatalf("pause: %v %v", err, resp.Status())
		}
		time.Sleep(5 * time.Second)
		if resp, err := n.Client.ResumeJobWithResponse(ctx, j.Id, models.ResumeOptions{CatchUp: &catchUp}); err != nil || resp.StatusCode() != http.StatusOK {
			t.Fatalf("resume: %v %v", err, resp.Status())
		}
		time.Sleep(4 * time.Second)
		acc := account(t, e.PG, j.Id, from, time.Now().Add(-2*time.Second))
		for _, b := range acc.bad {
			t.Error(b)
		}
		st := nodetest.OpenStore(t, e.PG)
		paused := skippedFor(t, st, j.Id, "paused")
		if catchUp && paused != 0 {
			t.Errorf("resumed with catch-up: %d runs skipped as paused, want 0 (policy all fires them)", paused)
		}
		if !catchUp && paused < 3 {
			t.Errorf("resumed without catch-up: %d runs skipped as paused, want the 5 s of the pause", paused)
		}
		t.Logf("catch_up %v: %d runs of the pause skipped", catchUp, paused)
	}
	t.Run("resume", func(t *testing.T) { t.Parallel(); resume(t, "resume", false) })
	t.Run("resume catch_up", func(t *testing.T) { t.Parallel(); resume(t, "catchup", true) })

	t.Run("bulk pause by selector", func(t *testing.T) {
		t.Parallel()
		a := n.CreateJob(t, every("team-a", map[string]any{"namespace": "bulk", "labels": map[string]any{"team": "a"}}))
		b := n.CreateJob(t, every("team-b", map[string]any{"namespace": "bulk", "labels": map[string]any{"team": "b"}}))
		nodetest.WaitFor(t, 15*time.Second, "both jobs to fire", func() bool {
			return nodetest.CountExecutions(t, e.PG, a.Id) >= 1 && nodetest.CountExecutions(t, e.PG, b.Id) >= 1
		})
		sel := "team=a"
		res, err := n.Client.PauseJobsWithResponse(ctx, models.JobSelection{Namespace: "bulk", Selector: &sel})
		if err != nil || res.StatusCode() != http.StatusOK || res.JSON200.Changed != 1 {
			t.Fatalf("bulk pause: %v %v %s", err, res.Status(), res.Body)
		}
		time.Sleep(1500 * time.Millisecond)
		na, nb := nodetest.CountExecutions(t, e.PG, a.Id), nodetest.CountExecutions(t, e.PG, b.Id)
		time.Sleep(3 * time.Second)
		if got := nodetest.CountExecutions(t, e.PG, a.Id); got != na {
			t.Errorf("paused team=a job fired %d more times", got-na)
		}
		if got := nodetest.CountExecutions(t, e.PG, b.Id); got < nb+2 {
			t.Errorf("team=b job fired %d times in 3 s, want it left running", got-nb)
		}
	})
}
