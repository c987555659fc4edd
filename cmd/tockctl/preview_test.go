package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

const previewHeader = "UTC LOCAL"

func TestSchedulesPreview(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL

	// New York's 2026 spring-forward day: 02:30 does not exist.
	out := ok(t, u, "schedules", "preview", "--cron", "0 30 2 * * *", "--timezone", "America/New_York",
		"--from", "2026-03-07T12:00:00-05:00", "--count", "2")
	r := rows(t, out, previewHeader+" (America/New_York) DST")
	if len(r) != 2 ||
		!strings.HasPrefix(r[0], "2026-03-08T07:00:00Z  2026-03-08T03:00:00-04:00 EDT  moved: 02:30 did not exist") ||
		strings.Join(strings.Fields(r[1]), " ") != "2026-03-09T06:30:00Z 2026-03-09T02:30:00-04:00 EDT -" {
		t.Fatalf("preview:\n%s", out)
	}

	// Lord Howe falls back half an hour: 01:30-01:59 happens twice; --tz
	// is --timezone's short name, and -o json is the API's answer.
	out = ok(t, u, "-o", "json", "schedules", "preview", "--every", "30m", "--tz", "Australia/Lord_Howe",
		"--from", "2026-04-04T14:20:00Z", "--count", "3")
	var p models.Preview
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Fires) != 3 || p.Timezone != "Australia/Lord_Howe" || p.Schedule.Cron == nil || *p.Schedule.Cron != "@every 30m" ||
		p.Fires[0].Occurrence == nil || *p.Fires[0].Occurrence != 1 || p.Fires[1].Occurrence == nil || *p.Fires[1].Occurrence != 2 ||
		p.Fires[2].Dst != nil {
		t.Errorf("json preview:\n%s", out)
	}

	// Faults: the server's, by field, and the command line's.
	tockctl(t, u, "schedules", "preview", "--cron", "0 0 25 * * *").failed(t, 1, "schedule.cron:")
	tockctl(t, u, "schedules", "preview", "--cron", "@daily", "--count", "5000").failed(t, 1, "count: must be between 1 and 1000")
	tockctl(t, u, "schedules", "preview", "--cron", "@daily", "--from", "soon").failed(t, 1, "--from \"soon\" is not an RFC 3339 time")
	tockctl(t, u, "schedules", "preview").failed(t, 1, "give a schedule")
	tockctl(t, u, "schedules", "preview", "--cron", "@daily", "--every", "1h").failed(t, 2, "--cron and --every can't be used together")
}

func TestJobsPreview(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	id := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "berlin", "--cron", "0 30 2 * * *", "--tz", "Europe/Berlin",
		"--http", "https://example.com/hook"))

	// Berlin's 2026 fall-back day: 02:30 happens twice, the job runs on
	// the first pass. The from's offset survives the query string.
	out := ok(t, u, "jobs", "preview", id, "--from", "2026-10-24T12:00:00+02:00", "--count", "2")
	r := rows(t, out, previewHeader+" (Europe/Berlin) DST")
	if len(r) != 2 || !strings.HasPrefix(r[0], "2026-10-25T00:30:00Z  2026-10-25T02:30:00+02:00 CEST  repeated: 02:30 happens twice") ||
		!strings.Contains(r[0], "first occurrence only") || !strings.HasPrefix(r[1], "2026-10-26T01:30:00Z  2026-10-26T02:30:00+01:00 CET") {
		t.Fatalf("preview:\n%s", out)
	}

	// The default: ten runs from now. Paused, it says so on stderr.
	if r := rows(t, ok(t, u, "jobs", "preview", id), previewHeader); len(r) != 10 {
		t.Errorf("default preview: %d rows", len(r))
	}
	ok(t, u, "jobs", "pause", id)
	res := tockctl(t, u, "jobs", "preview", id, "--count", "1")
	if res.code != 0 || len(rows(t, res.stdout, previewHeader)) != 1 || !strings.Contains(res.stderr, "the job is paused") {
		t.Errorf("paused job's preview: %+v", res)
	}

	tockctl(t, u, "jobs", "preview", "00000000-0000-4000-8000-000000000000").failed(t, 1, "No job with id")
	tockctl(t, u, "jobs", "preview", id, "--count=-1").failed(t, 1, "count: must be between 1 and 1000")
}
