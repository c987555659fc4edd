package scanner_test

// Jobs that name calendars, end to end with the real scanner: the runs a
// calendar excludes do not fire and are recorded as one skipped range
// naming the calendar; next_allowed fires once at the first allowed
// instant; a calendar's edit reaches a job within 2 s.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/store"
)

// wall is t as a calendar window writes it, in UTC.
func wall(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }

// putCalendar creates (put false) or replaces a calendar of the default
// namespace.
func putCalendar(t *testing.T, n *nodetest.Node, put bool, body map[string]any) {
	t.Helper()
	method, url, want := http.MethodPost, n.URL+"/v1/calendars", http.StatusCreated
	if put {
		method, url, want = http.MethodPut, n.URL+"/v1/calendars/"+body["name"].(string), http.StatusOK
	}
	if got := nodetest.Call(t, method, url, body, nil); got != want {
		t.Fatalf("%s %s: %d, want %d", method, url, got, want)
	}
}

// firedAt lists the scheduled times of job's executions.
func firedAt(t *testing.T, st *store.Store, job uuid.UUID) []time.Time {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT scheduled_for FROM executions WHERE job_id = $1 ORDER BY 1`, job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		out = append(out, at.UTC())
	}
	return out
}

func TestCalendarJobs(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	st := nodetest.OpenStore(t, e.PG)
	ctx := context.Background()

	// An every-2-seconds job; a calendar excludes 6 seconds of it, from a
	// run time a few seconds ahead.
	now := time.Now().UTC().Truncate(time.Second)
	from := now.Add(4 * time.Second)
	if from.Unix()%2 == 1 {
		from = from.Add(time.Second)
	}
	to := from.Add(6 * time.Second)
	putCalendar(t, n, false, map[string]any{"name": "quiet", "windows": []map[string]string{{"start": wall(from), "end": wall(to)}}})
	skip := n.CreateJob(t, map[string]any{
		"name": "cal-skip", "schedule": map[string]any{"cron": "*/2 * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "cal"}, "calendars": []string{"quiet"},
	})
	if skip.Calendars == nil || len(*skip.Calendars) != 1 || skip.OnExcluded == nil || *skip.OnExcluded != "skip" {
		t.Fatalf("created job's calendars %v, on_excluded %v", skip.Calendars, skip.OnExcluded)
	}

	// An every-10-seconds job; a calendar excludes 3 seconds from one of
	// its runs: next_allowed fires it once, at the window's end.
	run := now.Truncate(10 * time.Second).Add(20 * time.Second)
	putCalendar(t, n, false, map[string]any{"name": "blip", "windows": []map[string]string{{"start": wall(run), "end": wall(run.Add(3 * time.Second))}}})
	next := n.CreateJob(t, map[string]any{
		"name": "cal-next", "schedule": map[string]any{"cron": "*/10 * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "cal"}, "calendars": []string{"blip"}, "on_excluded": "next_allowed",
	})

	nodetest.WaitFor(t, 40*time.Second, "both jobs to fire after their excluded stretches", func() bool {
		a, b := firedAt(t, st, skip.Id), firedAt(t, st, next.Id)
		return len(a) > 0 && a[len(a)-1].After(to) && len(b) > 0 && b[len(b)-1].After(run.Add(3*time.Second))
	})
	for _, at := range firedAt(t, st, skip.Id) {
		if !at.Before(from) && at.Before(to) {
			t.Errorf("cal-skip fired at %s, inside the excluded %s-%s", at.Format(time.TimeOnly), from.Format(time.TimeOnly), to.Format(time.TimeOnly))
		}
	}
	var (
		first, last time.Time
		runs        int64
		detail      string
	)
	if err := st.Pool().QueryRow(ctx, `SELECT first_at, last_at, runs, detail FROM skipped_runs WHERE job_id = $1 AND reason = 'calendar'`,
		skip.Id).Scan(&first, &last, &runs, &detail); err != nil {
		t.Fatalf("cal-skip's calendar skip (one range): %v", err)
	}
	if !first.Equal(from) || !last.Equal(to.Add(-2*time.Second)) || runs != 3 || !strings.HasPrefix(detail, "quiet: window ") {
		t.Errorf("skipped %s-%s (%d runs, %q), want %s-%s (3 runs, the calendar quiet's window)", first.UTC().Format(time.TimeOnly),
			last.UTC().Format(time.TimeOnly), runs, detail, from.Format(time.TimeOnly), to.Add(-2*time.Second).Format(time.TimeOnly))
	}
	// The metric counts them by calendar (at least: the next_allowed
	// job's excluded runs count too).
	if got := n.Metric(t, `tock_calendar_excluded_total{calendar="default/quiet"}`); got < 3 {
		t.Errorf("tock_calendar_excluded_total of default/quiet = %v, want at least 3", got)
	}
	// The API lists the range with its reason and detail.
	var skips struct {
		Items []struct{ Reason, Detail string } `json:"items"`
	}
	if code := nodetest.Call(t, http.MethodGet, n.URL+"/v1/jobs/"+skip.Id.String()+"/skips", nil, &skips); code != http.StatusOK ||
		len(skips.Items) != 1 || skips.Items[0].Reason != "calendar" || skips.Items[0].Detail != detail {
		t.Errorf("GET skips: %d %+v", code, skips.Items)
	}

	fired := firedAt(t, st, next.Id)
	var atRun, atEnd int
	for _, at := range fired {
		switch {
		case at.Equal(run):
			atRun++
		case at.Equal(run.Add(3 * time.Second)):
			atEnd++
		}
	}
	if atRun != 0 || atEnd != 1 {
		t.Errorf("cal-next fired %v: want none at %s and one at %s", fired, run.Format(time.TimeOnly), run.Add(3*time.Second).Format(time.TimeOnly))
	}

	// A calendar that excludes the next hour: the job's next run jumps
	// past it. The edit that removes the window makes it fire within 2 s.
	putCalendar(t, n, false, map[string]any{"name": "hour", "windows": []map[string]string{{"start": wall(time.Now()), "end": wall(time.Now().Add(time.Hour))}}})
	edited := n.CreateJob(t, map[string]any{
		"name": "cal-edit", "schedule": map[string]any{"cron": "* * * * * *"},
		"handler": map[string]any{"type": "custom", "name": "cal"}, "calendars": []string{"hour"},
	})
	nodetest.WaitFor(t, 10*time.Second, "cal-edit's next run to jump past the hour", func() bool {
		j := n.Job(t, edited.Id)
		return j.NextRunAt != nil && j.NextRunAt.After(time.Now().Add(50*time.Minute))
	})
	edit := time.Now()
	putCalendar(t, n, true, map[string]any{"name": "hour", "dates": []string{"2000-01-01"}})
	nodetest.WaitFor(t, 5*time.Second, "cal-edit to fire after the edit", func() bool {
		return len(firedAt(t, st, edited.Id)) > 0
	})
	took := time.Since(edit)
	t.Logf("cal-edit fired %v after the calendar's edit", took)
	if took > 2*time.Second {
		t.Errorf("cal-edit fired %v after the calendar's edit, want within 2s", took)
	}
}
