package ui_test

import (
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node/nodetest"
)

// BenchmarkFirstRender measures, in Chromium, how long each page of the
// dashboard takes from navigation to its content (its heading, its
// lists filled, nothing loading) against a database that
// TOCK_UI_BENCH_PG names, which scripts/seed-scale.sh fills with
// 1,000,000 jobs and 30 days of history (docs/bench.md). A tockd with
// every role runs against it in this process.
//
//	scripts/seed-scale.sh tock_scale
//	TOCK_UI_BENCH_PG=postgres://postgres@127.0.0.1:5432/tock_scale go test -run '^$' -bench FirstRender -benchtime 5x ./ui/
func BenchmarkFirstRender(b *testing.B) {
	pg := os.Getenv("TOCK_UI_BENCH_PG")
	if pg == "" {
		b.Skip("set TOCK_UI_BENCH_PG to a database seeded by scripts/seed-scale.sh")
	}
	u, err := url.Parse(pg)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "16")
	u.RawQuery = q.Encode()
	env := &nodetest.Env{PG: u.String(), Etcd: testenv.Etcd(b), NATS: testenv.NATS(b)}
	n := env.Start(b, "bench")
	pages := pagesAtScale(b, n.URL)
	br := newBrowser(b, n.URL)
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			var took []float64
			for i := 0; i < b.N; i++ {
				took = append(took, br.firstRender(p.path))
			}
			slices.Sort(took)
			b.ReportMetric(took[len(took)/2], "ms-median")
			b.ReportMetric(took[len(took)-1], "ms-max")
			b.ReportMetric(0, "ns/op")
		})
	}
}

type benchPage struct{ name, path string }

// pagesAtScale are the pages measured, with a job and an execution of the
// seeded data for the detail pages.
func pagesAtScale(b *testing.B, base string) []benchPage {
	var jobs struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	var xs struct {
		Items []struct {
			ID    string `json:"id"`
			JobID string `json:"job_id"`
		} `json:"items"`
	}
	getJSON(b, base+"/v1/executions?limit=1&state=dead", &xs)
	getJSON(b, base+"/v1/jobs?limit=1", &jobs)
	if len(xs.Items) == 0 || len(jobs.Items) == 0 {
		b.Fatal("the database holds no job or no dead execution: seed it with scripts/seed-scale.sh")
	}
	return []benchPage{
		{"overview", "/"},
		{"jobs", "/jobs"},
		{"jobs-by-label", "/jobs?namespace=billing&selector=team%3Dpayments"},
		{"new-job", "/jobs/new"},
		{"job", "/jobs/" + xs.Items[0].JobID},
		{"executions", "/executions"},
		{"executions-dead-7d", "/executions?state=dead&since=168h"},
		{"executions-error-text", "/executions?error=needle"},
		{"executions-by-handler", "/executions?handler=invoice-run"},
		{"executions-by-job-prefix", "/executions?job=job-0001"},
		{"execution", "/executions/" + xs.Items[0].ID},
		{"cluster", "/cluster"},
		{"keys", "/keys"},
		{"audit", "/audit"},
	}
}

// firstRender loads path and returns the milliseconds from navigation
// start until the page shows its content.
func (b *browser) firstRender(path string) float64 {
	b.t.Helper()
	b.open(path)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var ms float64
		if err := b.eval(`document.querySelector("main h1") && !document.querySelector('[aria-busy="true"]') ? performance.now() : 0`, &ms); err == nil && ms > 0 {
			return ms
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.t.Fatalf("%s did not render within 30 s: %s", path, b.text("main"))
	return 0
}

func getJSON(b *testing.B, u string, out any) {
	b.Helper()
	if code := nodetest.Call(b, "GET", u, nil, out); code != 200 {
		b.Fatalf("GET %s: %d", u, code)
	}
}
