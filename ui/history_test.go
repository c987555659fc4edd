package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/node/nodetest"
)

// The history chart shows the numbers of the statistics series, on the
// overview and on a job's page; a dead mark leads to the dead executions
// of its interval; the pages stay axe clean.
func TestHistoryCharts(t *testing.T) {
	s := startSite(t)
	b := newBrowser(t, s.node.URL)
	st := nodetest.OpenStore(t, s.env.PG)
	ctx := context.Background()
	j := s.createJob(t, map[string]any{"name": "charted", "handler": map[string]any{"type": "custom", "name": "ui-chart"},
		"schedule": map[string]any{"cron": "0 0 0 1 1 *"}})
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two succeeded and a dead one 20 minutes ago (start lags 100, 300
	// and 900 ms), a failed one 10 minutes ago.
	m20 := now.Add(-20 * time.Minute).Truncate(time.Minute)
	seed := []struct {
		at    time.Time
		state domain.ExecState
		lag   time.Duration
	}{
		{m20.Add(5 * time.Second), domain.ExecSucceeded, 100 * time.Millisecond},
		{m20.Add(15 * time.Second), domain.ExecSucceeded, 300 * time.Millisecond},
		{m20.Add(25 * time.Second), domain.ExecDead, 900 * time.Millisecond},
		{now.Add(-10 * time.Minute), domain.ExecFailed, 50 * time.Millisecond},
	}
	for _, x := range seed {
		at := x.at.Truncate(time.Millisecond)
		if _, err := st.Pool().Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, state,
			handler, created_at, started_at, finished_at, attempts, error)
			VALUES ($1, $2, 0, $3, 'charted', $4, $5, '{"type":"custom","name":"ui-chart"}', $4, $6, $7, 1, 'boom')`,
			domain.ExecutionID(j.Id, at), j.Id, j.Namespace, at, x.state, at.Add(x.lag), at.Add(x.lag+time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	b.open("/")
	if err := b.eval(fmt.Sprintf(`sessionStorage.setItem("tock.key", %q)`, s.admin), nil); err != nil {
		t.Fatal(err)
	}
	type row struct {
		At    string            `json:"at"`
		Cells map[string]string `json:"cells"`
	}
	tableRows := func() []row {
		var rows []row
		if err := b.eval(`[...document.querySelectorAll("table.chart-data tbody tr")].map((tr) => ({at: tr.dataset.at,
			cells: Object.fromEntries([...tr.querySelectorAll("td")].map((td, i) => [td.dataset.key ?? "total", td.textContent]))}))`, &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	check := func(page, query string) {
		t.Helper()
		// The last hour's series (per minute), not the day's it replaces.
		b.waitFor(page+" chart", `document.querySelector("table.chart-data tbody tr") &&
			document.querySelector(".chart-summary").textContent.includes("per 1m")`, 20*time.Second)
		var api models.StatsSeries
		s.call(t, s.admin, "GET", "/v1/stats/series?since=1h&interval=1m"+query, nil, &api)
		want := map[string]models.StatsPoint{}
		for _, p := range api.Points {
			if p.Total > 0 {
				want[p.At.UTC().Format(time.RFC3339)] = p
			}
		}
		rows := tableRows()
		if len(rows) != len(want) || len(rows) != 2 {
			t.Fatalf("%s: %d rows in the chart's table, %d points in the API's series (want 2)", page, len(rows), len(want))
		}
		for _, r := range rows {
			at, _ := time.Parse(time.RFC3339, r.At)
			p, ok := want[at.UTC().Format(time.RFC3339)]
			if !ok {
				t.Fatalf("%s: the chart has %s, the API not", page, r.At)
			}
			f := func(v *float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", *v), ".0") }
			exp := map[string]string{"total": fmt.Sprint(p.Total), "succeeded": fmt.Sprint(p.Counts["succeeded"]),
				"failed": fmt.Sprint(p.Counts["failed"]), "dead": fmt.Sprint(p.Counts["dead"]),
				"start50": f(p.StartLagMs.P50), "start99": f(p.StartLagMs.P99)}
			for k, v := range exp {
				if r.Cells[k] != v {
					t.Errorf("%s at %s: %s is %q in the chart, %q in the API", page, r.At, k, r.Cells[k], v)
				}
			}
		}
		if sum := b.text(".chart-summary"); !strings.Contains(sum, "4 executions") || !strings.Contains(sum, "1 dead") {
			t.Errorf("%s: summary %q", page, sum)
		}
		b.axe(page + " with its chart")
	}
	b.open("/")
	b.waitFor("the overview", `document.querySelector(".range-switch")`, 20*time.Second)
	b.click("Last hour")
	check("overview", "")
	if shots := os.Getenv("TOCK_UI_SCREENSHOTS"); shots != "" {
		b.screenshot(filepath.Join(shots, "overview.png"))
	}
	b.open("/jobs/" + j.Id.String())
	b.waitFor("the job page", `document.querySelector(".range-switch")`, 20*time.Second)
	b.click("Last hour")
	check("job", "&job_id="+j.Id.String())

	// The dead mark leads to the dead executions of its minute.
	var link string
	if err := b.eval(`document.querySelector("a.mark.dead")?.getAttribute("href")`, &link); err != nil || link == "" {
		t.Fatalf("no dead mark (%v)", err)
	}
	want := fmt.Sprintf("state=dead&since=%s&until=%s", m20.UTC().Format("2006-01-02T15:04:05.000Z"),
		m20.Add(time.Minute).UTC().Format("2006-01-02T15:04:05.000Z"))
	if !strings.Contains(strings.ReplaceAll(link, "%3A", ":"), want) {
		t.Fatalf("dead mark links to %s, want %s", link, want)
	}
	b.open(strings.TrimPrefix(link, "/ui"))
	b.waitFor("the dead execution listed", `document.querySelectorAll("table.executions tbody tr").length === 1 &&
		document.querySelector("table.executions tbody").textContent.includes("dead")`, 20*time.Second)
	b.axe("executions from a dead mark")
	b.checkClean()
}
