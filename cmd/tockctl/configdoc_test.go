package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/tock-sched/tock/client"
)

// docFlagRow is a row of docs/configuration.md's tockctl table:
// "| `--server` | `TOCK_SERVER` | `http://...` | what |"; its first
// three cells.
var docFlagRow = regexp.MustCompile(`^\|([^|]*)\|([^|]*)\|([^|]*)\|`)

// docNames are the backquoted flags of a cell: "`--client-cert`,
// `--client-key`" gives client-cert and client-key; "`-o`" gives the
// short flag o.
var docNames = regexp.MustCompile("`-{1,2}([a-z][a-z-]*)`")

// The global flags of tockctl (every command takes them) are documented
// by hand in docs/configuration.md, under "## tockctl". Each flag kong
// parses has its row, with its environment variable and its default, and
// the table names no flag tockctl lacks.
func TestConfigDocTockctlFlags(t *testing.T) {
	var grammar cli
	k, err := kong.New(&grammar, kong.Name("tockctl"), kong.Exit(func(int) { t.Fatal("kong exited") }),
		kong.Vars{"max_batch": strconv.Itoa(client.MaxBatchJobs)})
	if err != nil {
		t.Fatalf("kong: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## tockctl\n")
	if !ok {
		t.Fatal(`docs/configuration.md: no "## tockctl" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type row struct{ envs, deflt string }
	rows := map[string]row{} // flag name → its row's env and default cells
	for _, line := range strings.Split(section, "\n") {
		m := docFlagRow.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[1], "---") || strings.TrimSpace(m[1]) == "flag" {
			continue
		}
		for _, n := range docNames.FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = row{envs: m[2], deflt: m[3]}
		}
	}
	flags := map[string]bool{}
	for _, f := range k.Model.Node.Flags {
		if f.Name == "help" {
			continue
		}
		flags[f.Name] = true
		if f.Short != 0 {
			flags[string(f.Short)] = true
			if _, ok := rows[string(f.Short)]; !ok {
				t.Errorf("docs/configuration.md: tockctl's -%c (--%s) has no row", f.Short, f.Name)
			}
		}
		r, ok := rows[f.Name]
		if !ok {
			t.Errorf("docs/configuration.md: tockctl's --%s has no row", f.Name)
			continue
		}
		for _, e := range f.Envs {
			if !strings.Contains(r.envs, "`"+e+"`") {
				t.Errorf("docs/configuration.md: tockctl's --%s: env %s not in its row (%q)", f.Name, e, strings.TrimSpace(r.envs))
			}
		}
		if f.HasDefault && f.Default != "" && !strings.Contains(r.deflt, "`"+f.Default+"`") {
			t.Errorf("docs/configuration.md: tockctl's --%s: default %s not in its row (%q)", f.Name, f.Default, strings.TrimSpace(r.deflt))
		}
	}
	for name := range rows {
		if !flags[name] {
			t.Errorf("docs/configuration.md: the tockctl table documents %s, which tockctl does not have", name)
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/configuration.md: no rows read from the tockctl table")
	}
	names := slices.Sorted(maps.Keys(rows))
	t.Logf("documented: %s", strings.Join(names, ", "))
}
