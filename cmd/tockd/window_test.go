package main

// Schedule windows, max_runs, jitter, resume with and without catch-up
// and bulk pause by selector, end to end on one node.

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
)

// jobState reads a job's state and run count through the API.
func jobState(t *testing.T, base, id string) (string, int64) {
	t.Helper()
	var j struct {
		State string `json:"state"`
		Runs  int64  `json:"runs"`
	}
	if code := call(t, "GET", base+"/v1/jobs/"+id, nil, &j); code != http.StatusOK {
		t.Fatalf("get job %s: %d", id, code)
	}
	return j.State, j.Runs
}

func TestWindowsMaxRunsJitterResumeBulk(t *testing.T) {
	e := newEnv(t)
	base := e.startNode(t, "n1")
	e.runExecutor(t, "win")
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
		j := createJob(t, base, every("max3", map[string]any{"schedule": map[string]any{"cron": "* * * * * *", "max_runs": 3}}))
		testenv.WaitFor(t, 15*time.Second, "the job to complete", func() bool { s, _ := jobState(t, base, j.ID); return s == "completed" })
		time.Sleep(2 * time.Second)
		if n := countExecutions(t, e.pg, j.ID); n != 3 {
			t.Errorf("max_runs 3: %d executions", n)
		}
		if _, runs := jobState(t, base, j.ID); runs != 3 {
			t.Errorf("max_runs 3: runs %d", runs)
		}
	})

	t.Run("window", func(t *testing.T) {
		t.Parallel()
		start := time.Now().Add(3 * time.Second).Truncate(time.Second)
		end := start.Add(3 * time.Second)
		j := createJob(t, base, every("window", map[string]any{"schedule": map[string]any{"cron": "* * * * * *",
			"start_at": start.Format(time.RFC3339), "end_at": end.Format(time.RFC3339)}}))
		testenv.WaitFor(t, 20*time.Second, "the window's job to complete", func() bool { s, _ := jobState(t, base, j.ID); return s == "completed" })
		xs := executions(t, base, j.ID)
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
		j := createJob(t, base, every("jitter", map[string]any{"schedule": map[string]any{"cron": "* * * * * *", "jitter": "1500ms"}}))
		testenv.WaitFor(t, 20*time.Second, "5 jittered runs to succeed", func() bool { return len(succeeded(executions(t, base, j.ID))) >= 5 })
		sch, err := schedule.Compile(schedule.Spec{Cron: "* * * * * *", Jitter: "1500ms"})
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items []struct {
				ScheduledFor time.Time  `json:"scheduled_for"`
				DueAt        *time.Time `json:"due_at"`
				DispatchedAt *time.Time `json:"dispatched_at"`
				State        string     `json:"state"`
			} `json:"items"`
		}
		call(t, "GET", base+"/v1/jobs/"+j.ID+"/executions?limit=500", nil, &page)
		id := uuid.MustParse(j.ID)
		distinct := map[time.Duration]bool{}
		for _, x := range page.Items {
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
		j := createJob(t, base, every(name, map[string]any{"missed": map[string]any{"policy": "all", "grace": "1s"}}))
		testenv.WaitFor(t, 15*time.Second, "the job to fire", func() bool { return countExecutions(t, e.pg, j.ID) >= 2 })
		from := time.Now().Add(time.Second)
		if code := call(t, "POST", base+"/v1/jobs/"+j.ID+"/pause", nil, nil); code != http.StatusOK {
			t.Fatalf("pause: %d", code)
		}
		time.Sleep(5 * time.Second)
		if code := call(t, "POST", base+"/v1/jobs/"+j.ID+"/resume", map[string]any{"catch_up": catchUp}, nil); code != http.StatusOK {
			t.Fatalf("resume: %d", code)
		}
		time.Sleep(4 * time.Second)
		acc := account(t, e.pg, j.ID, from, time.Now().Add(-2*time.Second))
		for _, b := range acc.bad {
			t.Error(b)
		}
		st := openStore(t, e.pg)
		paused := skippedFor(t, st, j.ID, "paused")
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
		a := createJob(t, base, every("team-a", map[string]any{"namespace": "bulk", "labels": map[string]any{"team": "a"}}))
		b := createJob(t, base, every("team-b", map[string]any{"namespace": "bulk", "labels": map[string]any{"team": "b"}}))
		testenv.WaitFor(t, 15*time.Second, "both jobs to fire", func() bool {
			return countExecutions(t, e.pg, a.ID) >= 1 && countExecutions(t, e.pg, b.ID) >= 1
		})
		var res struct{ Matched, Changed int }
		if code := call(t, "POST", base+"/v1/jobs:pause", map[string]any{"namespace": "bulk", "selector": "team=a"}, &res); code != http.StatusOK || res.Changed != 1 {
			t.Fatalf("bulk pause: %d %+v", code, res)
		}
		time.Sleep(1500 * time.Millisecond)
		na, nb := countExecutions(t, e.pg, a.ID), countExecutions(t, e.pg, b.ID)
		time.Sleep(3 * time.Second)
		if got := countExecutions(t, e.pg, a.ID); got != na {
			t.Errorf("paused team=a job fired %d more times", got-na)
		}
		if got := countExecutions(t, e.pg, b.ID); got < nb+2 {
			t.Errorf("team=b job fired %d times in 3 s, want it left running", got-nb)
		}
	})
}
