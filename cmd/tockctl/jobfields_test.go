package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// jobs create --label and --description set them; jobs list --selector
// (-l) lists the jobs whose labels match, and a bad selector is the
// server's 400, exit code 1.
func TestLabelsAndSelector(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	var created models.Job
	out := ok(t, u, "-o", "json", "jobs", "create", "--name", "pay", "--in", "1h", "--custom", "w",
		"--label", "team=payments", "--label", "tier=web", "--description", "charges cards")
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	if created.Labels == nil || (*created.Labels)["team"] != "payments" || (*created.Labels)["tier"] != "web" ||
		created.Description == nil || *created.Description != "charges cards" {
		t.Fatalf("created %s", out)
	}
	ok(t, u, "jobs", "create", "--name", "batch", "--in", "1h", "--custom", "w", "--label", "team=payments", "--label", "tier=batch")
	ok(t, u, "jobs", "create", "--name", "plain", "--in", "1h", "--custom", "w")

	names := func(args ...string) string {
		var list models.JobList
		if err := json.Unmarshal([]byte(ok(t, u, append([]string{"-o", "json", "jobs", "list"}, args...)...)), &list); err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, j := range list.Items {
			n = append(n, j.Name)
		}
		return strings.Join(n, " ")
	}
	if got := names("--selector", "team=payments,tier!=batch"); got != "pay" {
		t.Errorf("--selector team=payments,tier!=batch: %q", got)
	}
	if got := names("-l", "!tier"); got != "plain" {
		t.Errorf("-l !tier: %q", got)
	}
	if got := names("-l", "tier in (web,batch)", "--handler", "w"); got != "batch pay" {
		t.Errorf("-l tier in (web,batch) --handler w: %q", got)
	}
	if got := names("-l", "tier notin (web)", "--next-run-after", "2000-01-01T00:00:00Z"); got != "batch plain" {
		t.Errorf("-l tier notin (web) --next-run-after: %q", got)
	}
	if got := names("--handler", "http"); got != "" {
		t.Errorf("--handler http: %q", got)
	}
	if res := tockctl(t, u, "jobs", "list", "--count", "-l", "team", "--limit", "1"); res.code != 0 || !strings.Contains(res.stderr, "2 jobs match") {
		t.Errorf("--count: %+v", res)
	}
	res := tockctl(t, u, "jobs", "list", "--selector", "team in ()")
	if res.code != 1 || !strings.Contains(res.stderr, "selector") {
		t.Errorf("a bad selector: %+v", res)
	}
	res = tockctl(t, u, "jobs", "list", "--next-run-before", "soon")
	if res.code != 1 || !strings.Contains(res.stderr, "next_run_before") {
		t.Errorf("a bad time: %+v", res)
	}
}

// jobs pause and resume with --namespace and --selector change the
// matching jobs; an id with --namespace, or neither, is a usage error.
func TestBulkPauseResume(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	for _, name := range []string{"a", "b"} {
		ok(t, u, "jobs", "create", "--name", name, "--namespace", "maint", "--in", "1h", "--custom", "w", "--label", "team=payments")
	}
	ok(t, u, "jobs", "create", "--name", "c", "--namespace", "maint", "--in", "1h", "--custom", "w")
	if out := ok(t, u, "jobs", "pause", "--namespace", "maint", "-l", "team=payments"); !strings.Contains(out, "paused 2 of 2 matching jobs") {
		t.Errorf("pause: %q", out)
	}
	var list models.JobList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "list", "--namespace", "maint", "--state", "paused")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d paused jobs, want 2", len(list.Items))
	}
	var res models.BulkChange
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "resume", "--namespace", "maint")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Matched != 2 || res.Changed != 2 {
		t.Errorf("resume: %+v", res)
	}
	for _, args := range [][]string{
		{"jobs", "pause"},
		{"jobs", "pause", list.Items[0].Id.String(), "--namespace", "maint"},
	} {
		if r := tockctl(t, u, args...); r.code == 0 {
			t.Errorf("%v: exit 0 (%+v)", args, r)
		}
	}
}

// --anchor gives an @every schedule its phase; without --cron it is a
// usage error.
func TestCreateWithAnchor(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	var j models.Job
	out := ok(t, u, "-o", "json", "jobs", "create", "--name", "phased", "--cron", "@every 36h",
		"--anchor", "2036-07-01T09:00:00+02:00", "--custom", "w")
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Schedule.Anchor == nil || !j.Schedule.Anchor.Equal(mustTime(t, "2036-07-01T07:00:00Z")) ||
		j.NextRunAt == nil || !j.NextRunAt.Equal(mustTime(t, "2036-07-01T07:00:00Z")) {
		t.Errorf("anchored job: %s", out)
	}
	if r := tockctl(t, u, "jobs", "create", "--name", "x", "--in", "1h", "--anchor", "2036-07-01T09:00:00Z", "--custom", "w"); r.code == 0 {
		t.Errorf("--anchor without --cron: %+v", r)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// jobs get shows when the job last succeeded, once it has.
func TestLastSuccess(t *testing.T) {
	t.Parallel()
	hs, st := server(t)
	u := hs.URL
	ctx := context.Background()
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "nightly", "--cron", "0 0 3 * * *", "--custom", "w"))
	if out := ok(t, u, "jobs", "get", id); strings.Contains(out, "last success") {
		t.Errorf("before a success:\n%s", out)
	}
	x, err := st.CreateManualExecution(ctx, uuid.MustParse(id), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	storetest.Record(t, st, model.AttemptEvent{ID: x.ID, Attempt: 1, Executor: "x", At: end, Type: domain.EventSucceeded})
	if out := ok(t, u, "jobs", "get", id); !strings.Contains(out, "\nlast success:  2031-05-06T07:08:09Z\n") {
		t.Errorf("after a success:\n%s", out)
	}
}

// jobs create --log-cap and --log-policy set the handler's log policy; a
// cap below the least, or an unknown policy, is the server's 400 naming
// the field.
func TestLogPolicyFlags(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	var created models.Job
	out := ok(t, u, "-o", "json", "jobs", "create", "--name", "etl", "--in", "1h", "--custom", "w", "--log-cap", "4194304", "--log-policy", "head")
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	if l := created.Handler.Log; l == nil || l.CapBytes == nil || *l.CapBytes != 4<<20 || l.Policy == nil || *l.Policy != "head" {
		t.Fatalf("created %s", out)
	}
	res := tockctl(t, u, "jobs", "create", "--name", "tiny", "--in", "1h", "--custom", "w", "--log-cap", "100")
	if res.code != 1 || !strings.Contains(res.stderr, "handler.log.cap_bytes") {
		t.Errorf("a cap of 100 bytes: %+v", res)
	}
	res = tockctl(t, u, "jobs", "create", "--name", "odd", "--in", "1h", "--custom", "w", "--log-policy", "tail")
	if res.code != 1 || !strings.Contains(res.stderr, "handler.log.policy") {
		t.Errorf("policy tail: %+v", res)
	}
}
