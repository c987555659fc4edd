package monitoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The files this package's tests check.
const (
	alertsFile    = "alerts.yaml"
	recordingFile = "recording.yaml"
	testsFile     = "alerts_test.yaml"
	dashboardFile = "dashboard.json"
)

// tool is the path of a Prometheus binary (promtool, prometheus). A
// missing one fails the test: make test installs them
// (scripts/ensure-prometheus.sh).
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v): run ./scripts/ensure-prometheus.sh, which make test runs", name, err)
	}
	return path
}

// promtool runs promtool with args in this directory and fails the test,
// with its output, unless it succeeds.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(tool(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesPassPromtoolCheck(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", recordingFile, alertsFile)
}

func TestAlertsPassPromtoolUnitTests(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", testsFile)
}

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

// rule is an alerting or a recording rule.
type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// rules are the rules of file, in order.
func rules(t *testing.T, file string) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, file, &f)
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no rule", file)
	}
	return out
}

// TestEveryAlertTestedBothWays checks that alerts_test.yaml has, for
// every alert, a case where it fires and one where it does not, and
// names no alert that does not exist (promtool passes a case expecting
// no alert of a misspelt name).
func TestEveryAlertTestedBothWays(t *testing.T) {
	t.Parallel()
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name       string `yaml:"name"`
			AlertTests []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, testsFile, &tests)
	if !slices.Contains(tests.RuleFiles, alertsFile) || !slices.Contains(tests.RuleFiles, recordingFile) {
		t.Errorf("%s: rule_files %v; want %s and %s", testsFile, tests.RuleFiles, alertsFile, recordingFile)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				silent[at.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range rules(t, alertsFile) {
		if r.Alert == "" {
			t.Errorf("%s: a rule that is no alert: %q (recording rules go in %s)", alertsFile, r.Record, recordingFile)
			continue
		}
		alerts[r.Alert] = true
		if !fires[r.Alert] {
			t.Errorf("%s: no case where %s fires", testsFile, r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no case where %s does not fire", testsFile, r.Alert)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: %s has no %s annotation", alertsFile, r.Alert, a)
			}
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: %s has severity %q; want warning or critical", alertsFile, r.Alert, s)
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests %s, which %s does not have", testsFile, name, alertsFile)
		}
	}
	for name := range silent {
		if !alerts[name] {
			t.Errorf("%s tests %s, which %s does not have", testsFile, name, alertsFile)
		}
	}
}

// heading is a Markdown heading line.
var heading = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*$`)

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the heading anchors of a Markdown file, and the text of
// its second-level headings.
func anchors(t *testing.T, file string) (map[string]bool, []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var sections []string
	fence := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if m := heading.FindStringSubmatch(line); m != nil && !fence {
			out[slug(m[1])] = true
			if strings.HasPrefix(line, "## ") {
				sections = append(sections, m[1])
			}
		}
	}
	return out, sections
}

// TestRunbooksResolve checks that every alert's runbook is a path in the
// repository (relative to alerts.yaml) with an anchor that file has, and
// that runbooks.md has no section for an alert that does not exist.
func TestRunbooksResolve(t *testing.T) {
	t.Parallel()
	linked := map[string]bool{}
	for _, r := range rules(t, alertsFile) {
		rb := r.Annotations["runbook"]
		if strings.Contains(rb, "://") || strings.HasPrefix(rb, "/") {
			t.Errorf("%s: %s's runbook %q is not a relative path into the repository", alertsFile, r.Alert, rb)
			continue
		}
		file, anchor, ok := strings.Cut(rb, "#")
		if !ok || anchor == "" {
			t.Errorf("%s: %s's runbook %q names no section (#anchor)", alertsFile, r.Alert, rb)
			continue
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s: %s's runbook: %v", alertsFile, r.Alert, err)
			continue
		}
		if a, _ := anchors(t, file); !a[anchor] {
			t.Errorf("%s: %s's runbook %q: %s has no heading #%s", alertsFile, r.Alert, rb, file, anchor)
		}
		linked[filepath.Clean(file)+"#"+anchor] = true
	}
	_, sections := anchors(t, "runbooks.md")
	for _, s := range sections {
		if !linked["runbooks.md#"+slug(s)] {
			t.Errorf("runbooks.md: section %q is no alert's runbook", s)
		}
	}
}

// dashboard is the part of a Grafana dashboard these tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// panel is a dashboard panel (or row).
type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// readDashboard reads dashboard.json and its panels, rows' panels
// included (rows left out).
func readDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var panels []panel
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			panels = append(panels, p)
		}
	}
	walk(d.Panels)
	if len(panels) == 0 {
		t.Fatalf("%s has no panel", dashboardFile)
	}
	return d, panels
}

// uidValue is any "uid" of the JSON document.
var uidValue = regexp.MustCompile(`"uid"\s*:\s*"([^"]*)"`)

// TestDashboardIsImportable checks what importing dashboard.json as is
// needs: its Prometheus is chosen by a datasource variable every panel
// and query uses (no data source's uid written in), panels have unique
// ids and do not overlap on the 24-column grid, and every panel has a
// query.
func TestDashboardIsImportable(t *testing.T) {
	t.Parallel()
	d, panels := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q; want both", dashboardFile, d.UID, d.Title)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasVar = true
		}
	}
	if !hasVar {
		t.Errorf("%s: no templating variable datasource of type datasource, query prometheus", dashboardFile)
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range uidValue.FindAllStringSubmatch(string(b), -1) {
		if m[1] != "${datasource}" && m[1] != d.UID {
			t.Errorf("%s: a uid %q is written in; data sources are ${datasource}", dashboardFile, m[1])
		}
	}
	want := datasource{Type: "prometheus", UID: "${datasource}"}
	ids := map[int]bool{}
	var all []panel
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("%s: panel id %d twice", dashboardFile, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("%s: panel %q has gridPos %+v off the 24-column grid", dashboardFile, p.Title, g)
		}
	}
	for i, p := range all {
		for _, q := range all[i+1:] {
			a, b := p.GridPos, q.GridPos
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("%s: panels %q and %q overlap", dashboardFile, p.Title, q.Title)
			}
		}
	}
	for _, p := range panels {
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("%s: panel %q has data source %v; want %v", dashboardFile, p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" || q.RefID == "" {
				t.Errorf("%s: panel %q has a query without expr or refId", dashboardFile, p.Title)
			}
			if q.Datasource == nil || *q.Datasource != want {
				t.Errorf("%s: panel %q's query %s has data source %v; want %v", dashboardFile, p.Title, q.RefID, q.Datasource, want)
			}
		}
	}
}
