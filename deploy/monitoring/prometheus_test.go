package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/node/nodetest"
)

// rateInterval stands for Grafana's $__rate_interval in the dashboard's
// queries: with the test's 1 s scrapes, 30 s holds many samples.
const rateInterval = "30s"

// TestDashboardAndRulesOnRealPrometheus runs a real Prometheus scraping a
// real tockd on loopback while tockd runs jobs that succeed, fail, die,
// overlap and open a handler's breaker, and evaluates every query of the
// dashboard and every recording rule through Prometheus's HTTP API: each
// must be valid and return at least one series. Every rule, alerts
// included, must be evaluated without error.
func TestDashboardAndRulesOnRealPrometheus(t *testing.T) {
	t.Parallel()
	promBin := tool(t, "prometheus")
	start := time.Now()

	// The handlers' targets: one that succeeds, one that fails (each
	// execution dies after 2 attempts, and the breaker of its host opens),
	// and one slower than its job's second (runs skipped for overlap).
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for the test", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)

	e := nodetest.New(t)
	n := e.StartProcess(t, "mon", "--breaker-min-requests", "4")
	t.Logf("tockd ready after %s", time.Since(start).Round(time.Millisecond))
	prom := startPrometheus(t, promBin, strings.TrimPrefix(n.URL, "http://"))
	t.Logf("prometheus ready after %s", time.Since(start).Round(time.Millisecond))

	every := map[string]any{"cron": "* * * * * *"}
	alerted := map[string]string{"tock.io/alert": "true"}
	n.CreateJob(t, map[string]any{"name": "ok", "schedule": every, "labels": alerted,
		"handler": map[string]any{"type": "http", "url": ok.URL, "method": "GET"}})
	n.CreateJob(t, map[string]any{"name": "failing", "schedule": every, "labels": alerted,
		"retry":   map[string]any{"max_attempts": 2, "initial_backoff": "1s", "jitter": "none"},
		"handler": map[string]any{"type": "http", "url": failing.URL, "method": "GET"}})
	n.CreateJob(t, map[string]any{"name": "slow", "schedule": every, "overlap": "skip",
		"handler": map[string]any{"type": "http", "url": slow.URL, "method": "GET"}})
	// An API error for the errors panel.
	if code := nodetest.Call(t, http.MethodGet, n.URL+"/v1/jobs/"+uuid.NewString(), nil, nil); code != http.StatusNotFound {
		t.Fatalf("GET an unknown job: %d, want 404", code)
	}

	// Every query: the dashboard's, and each recording rule's expression
	// and recorded series.
	type query struct{ what, expr string }
	var queries []query
	_, panels := readDashboard(t)
	for _, p := range panels {
		for _, q := range p.Targets {
			expr := strings.ReplaceAll(q.Expr, "$__rate_interval", rateInterval)
			if strings.Contains(expr, "$") {
				t.Fatalf("panel %q query %s: a variable this test does not know: %s", p.Title, q.RefID, q.Expr)
			}
			queries = append(queries, query{fmt.Sprintf("panel %q query %s", p.Title, q.RefID), expr})
		}
	}
	var recorded []string
	for _, r := range rules(t, recordingFile) {
		queries = append(queries, query{"recording rule " + r.Record, r.Expr}, query{"recorded series " + r.Record, r.Record})
		recorded = append(recorded, r.Record)
	}

	// Wait until every query answers with a series and every rule has
	// been evaluated without error; then report what still does not.
	var failures []string
	deadline := time.Now().Add(75 * time.Second)
	for {
		failures = failures[:0]
		for _, q := range queries {
			if err := prom.nonEmpty(q.expr); err != nil {
				failures = append(failures, fmt.Sprintf("%s: %s: %v", q.what, q.expr, err))
			}
		}
		failures = append(failures, prom.rulesHealthy(t, recorded)...)
		if len(failures) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d queries and %d recording rules answered with series %s after the start", len(queries), len(recorded),
		time.Since(start).Round(time.Millisecond))
}

// prometheus is a Prometheus server the test started.
type prometheus struct {
	url string
}

// startPrometheus starts Prometheus on a free loopback port, scraping the
// tockd at target every second under the job name "tock" and evaluating
// this directory's rules every second, and waits until it is ready. It
// is stopped at cleanup; its log is shown if the test failed.
func startPrometheus(t *testing.T, bin, target string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	var ruleFiles []string
	for _, f := range []string{recordingFile, alertsFile} {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, abs)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q, %q]
scrape_configs:
  - job_name: tock
    static_configs:
      - targets: [%q]
`, ruleFiles[0], ruleFiles[1], target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// A port found free may be taken before Prometheus listens on it: try
	// another then.
	for try := 1; ; try++ {
		port, err := embedded.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "--config.file="+configFile, "--web.listen-address="+addr,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", try)), "--log.level=warn")
		var log nodetest.SyncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		p := &prometheus{url: "http://" + addr}
		if p.waitReady(exited) {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("prometheus log:\n%s", log.String())
				}
			})
			return p
		}
		_ = cmd.Process.Kill()
		<-exited
		if try == 3 || !strings.Contains(log.String(), "address already in use") {
			t.Fatalf("prometheus did not start (try %d):\n%s", try, log.String())
		}
	}
}

// waitReady waits until Prometheus answers /-/ready, for at most 30 s;
// false if it exited first.
func (p *prometheus) waitReady(exited <-chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// get calls Prometheus's HTTP API at path and decodes its data into out.
func (p *prometheus) get(path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: status %d: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// nonEmpty evaluates expr now and fails unless it is valid and has at
// least one series.
func (p *prometheus) nonEmpty(expr string) error {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return err
	}
	if data.ResultType == "vector" && len(data.Result) == 0 {
		return fmt.Errorf("no series")
	}
	return nil
}

// rulesHealthy reports, as failures, every rule /api/v1/rules does not
// show as evaluated without error, and each recording rule of recorded
// it does not show at all.
func (p *prometheus) rulesHealthy(t *testing.T, recorded []string) []string {
	t.Helper()
	var data struct {
		Groups []struct {
			File  string `json:"file"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", nil, &data); err != nil {
		return []string{"/api/v1/rules: " + err.Error()}
	}
	var failures []string
	seen := map[string]bool{}
	alerts := 0
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			seen[r.Name] = true
			if r.Type == "alerting" {
				alerts++
			}
			if r.Health != "ok" {
				failures = append(failures, fmt.Sprintf("rule %s (%s): health %q %s", r.Name, filepath.Base(g.File), r.Health, r.LastError))
			}
		}
	}
	for _, name := range recorded {
		if !seen[name] {
			failures = append(failures, "recording rule "+name+" not loaded")
		}
	}
	if want := len(rules(t, alertsFile)); alerts != want {
		failures = append(failures, fmt.Sprintf("%d alerting rules loaded, want %d", alerts, want))
	}
	slices.Sort(failures)
	return failures
}
