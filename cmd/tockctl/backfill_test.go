package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// jobs backfill starts a backfill and prints it with its total; jobs
// backfills lists it; jobs backfill-stop stops it. Bad times are usage
// faults on the client side, a range the server refuses is its 400.
func TestBackfillCommands(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	var j models.Job
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "create", "--name", "minutely", "--cron", "0 * * * * *", "--custom", "w")), &j); err != nil {
		t.Fatal(err)
	}
	id := j.Id.String()
	to := time.Now().UTC().Truncate(time.Minute)
	from := to.Add(-time.Hour)

	out := ok(t, u, "jobs", "backfill", id, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	const header = "ID STATE FROM TO TOTAL FIRED NEXT CREATED FINISHED ERROR"
	r := rows(t, out, header)
	if len(r) != 1 || !strings.Contains(r[0], " running ") || strings.Fields(r[0])[4] != "60" {
		t.Fatalf("backfill printed %q", out)
	}
	bid := uuidRE.FindString(r[0])

	var b models.Backfill
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "backfill", id, "--from", from.Format(time.RFC3339),
		"--to", to.Format(time.RFC3339))), &b); err != nil {
		t.Fatal(err)
	}
	if b.Total != 60 || b.State != models.BackfillStateRunning {
		t.Errorf("-o json: %+v", b)
	}
	if r := rows(t, ok(t, u, "jobs", "backfills", id), header); len(r) != 2 || !strings.HasPrefix(r[1], bid) {
		t.Fatalf("backfills: %q", r)
	}
	if out := ok(t, u, "jobs", "backfill-stop", id, bid); out != "stopped backfill "+bid+"\n" {
		t.Errorf("backfill-stop printed %q", out)
	}
	var list models.BackfillList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "backfills", id, "--all")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[1].State != models.BackfillStateStopped {
		t.Errorf("after stop: %+v", list.Items)
	}

	tockctl(t, u, "jobs", "backfill", id, "--from", "yesterday", "--to", to.Format(time.RFC3339)).failed(t, 1, "--from")
	tockctl(t, u, "jobs", "backfill", id, "--from", from.Format(time.RFC3339)).failed(t, 2, "--to")
	tockctl(t, u, "jobs", "backfill", id, "--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339)).failed(t, 1, "to: must be after from")
	tockctl(t, u, "jobs", "backfill-stop", id, "not-an-id").failed(t, 1, "backfill id")
	tockctl(t, u, "jobs", "backfill-stop", id, id).failed(t, 1, "has no backfill with id")
}
