package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// The configuration reference (docs/configuration.md) is written by hand,
// for its explanations and links, and checked here against the flags
// tockd parses. The check reads kong's own model of the command line
// rather than walking the structs with reflect again: kong applies its
// own rules (embedded flag groups, names, env tags, defaults), so a flag
// the binary accepts cannot escape the check.

// cliFlag is a flag as kong parses it: its env variables, its default,
// and the commands that take it.
type cliFlag struct {
	envs     []string
	defaults []string
	commands []string
}

// cliFlags walks tockd's command tree and returns every flag of every
// command ("serve", "keys create", ...) by name, --help left out.
func cliFlags(t *testing.T) map[string]*cliFlag {
	t.Helper()
	var grammar = cli // a copy: the parser points into it
	k, err := kong.New(&grammar, kong.Name("tockd"), kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatalf("kong: %v", err)
	}
	flags := map[string]*cliFlag{}
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		if n.Type == kong.CommandNode {
			path = append(slices.Clone(path), n.Name)
		}
		for _, f := range n.Flags {
			if f.Name == "help" {
				continue
			}
			cf := flags[f.Name]
			if cf == nil {
				cf = &cliFlag{}
				flags[f.Name] = cf
			}
			for _, e := range f.Envs {
				if !slices.Contains(cf.envs, e) {
					cf.envs = append(cf.envs, e)
				}
			}
			if f.HasDefault && f.Default != "" && !slices.Contains(cf.defaults, f.Default) {
				cf.defaults = append(cf.defaults, f.Default)
			}
			cf.commands = append(cf.commands, strings.Join(path, " "))
		}
		for _, c := range n.Children {
			walk(c, path)
		}
	}
	walk(k.Model.Node, nil)
	if len(flags) < 10 {
		t.Fatalf("only %d flags found in tockd's command line: the walk is broken", len(flags))
	}
	return flags
}

// docRow is a row of the flag table: flags, env variables, default,
// commands.
type docRow struct {
	line     int
	flags    []string
	envs     []string
	def      string
	commands []string
}

var (
	flagName = regexp.MustCompile("`--([a-z0-9-]+)`")
	envName  = regexp.MustCompile("`(TOCK_[A-Z0-9_]+)`")
)

// flagTableHeader opens the table the test reads.
const flagTableHeader = "| flag | env | default | commands | what |"

// docFlagRows reads the flag table of docs/configuration.md.
func docFlagRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == flagTableHeader {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Fatalf("docs/configuration.md:%d: a flag row needs 5 cells: %s", i+1, line)
		}
		r := docRow{line: i + 1, def: cells[2]}
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			r.flags = append(r.flags, m[1])
		}
		for _, m := range envName.FindAllStringSubmatch(cells[1], -1) {
			r.envs = append(r.envs, m[1])
		}
		for _, c := range strings.Split(cells[3], ",") {
			if c = strings.Trim(strings.TrimSpace(c), "`"); c != "" {
				r.commands = append(r.commands, c)
			}
		}
		if len(r.flags) == 0 {
			t.Errorf("docs/configuration.md:%d: a flag row names no `--flag`", r.line)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("docs/configuration.md has no flag table (%q)", flagTableHeader)
	}
	return rows
}

// TestConfigDocMatchesFlags checks docs/configuration.md's flag table
// against the command line: every flag has a row, and no row names a
// flag tockd does not have; each row's env variables, commands and
// defaults are the flags' own.
func TestConfigDocMatchesFlags(t *testing.T) {
	flags := cliFlags(t)
	documented := map[string]bool{}
	for _, r := range docFlagRows(t) {
		var envs, commands []string
		for _, name := range r.flags {
			if documented[name] {
				t.Errorf("docs/configuration.md:%d: --%s has a second row", r.line, name)
			}
			documented[name] = true
			f := flags[name]
			if f == nil {
				t.Errorf("docs/configuration.md:%d: --%s is documented, but no tockd command has it", r.line, name)
				continue
			}
			envs = append(envs, f.envs...)
			commands = append(commands, f.commands...)
			for _, d := range f.defaults {
				if !strings.Contains(r.def, "`"+d+"`") {
					t.Errorf("docs/configuration.md:%d: --%s defaults to %q; the row's default cell says %q", r.line, name, d, strings.TrimSpace(r.def))
				}
			}
		}
		if want, got := uniqSorted(envs), uniqSorted(r.envs); !slices.Equal(want, got) {
			t.Errorf("docs/configuration.md:%d: %v read the env variables %v; the row says %v", r.line, r.flags, want, got)
		}
		if want, got := uniqSorted(commands), uniqSorted(r.commands); !slices.Equal(want, got) {
			t.Errorf("docs/configuration.md:%d: %v belong to the commands %v; the row says %v", r.line, r.flags, want, got)
		}
	}
	for name, f := range flags {
		if !documented[name] {
			t.Errorf("docs/configuration.md: --%s (%v, commands %v) has no row in the flag table", name, f.envs, f.commands)
		}
	}
}

func uniqSorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}
