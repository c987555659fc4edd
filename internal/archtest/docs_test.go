package archtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the most the README may hold: it says what tock is
// and where to read on; the manual is docs/.
const readmeMaxLines = 300

func TestReadmeFits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines; at most %d (move the rest into docs/)", n, readmeMaxLines)
	}
}

// layoutRow is a row of a layout table: "| `scanner/` | owns ... |".
var layoutRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// layoutTable returns the first cells of the rows of the table under the
// given heading line of doc, each without a trailing slash.
func layoutTable(t *testing.T, doc, heading string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/architecture.md has no heading %q", heading)
	}
	var names []string
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "|") {
			inTable = true
			if m := layoutRow.FindStringSubmatch(line); m != nil {
				names = append(names, strings.TrimSuffix(m[1], "/"))
			}
			continue
		}
		if inTable || strings.HasPrefix(line, "#") {
			break
		}
	}
	if len(names) == 0 {
		t.Fatalf("docs/architecture.md: no table rows under %q", heading)
	}
	return names
}

// TestLayoutTableNamesEveryPackage checks docs/architecture.md's layout
// table against `go list ./...`: every package has its row (the commands
// share one, `cmd/`), and every row is a package.
func TestLayoutTableNamesEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutTable(t, string(doc), "### Packages")
	packages := map[string]bool{}
	for _, p := range goList(t, "./...") {
		packages[strings.TrimPrefix(p.ImportPath, module)] = true
	}
	named := map[string]bool{}
	for _, r := range rows {
		if named[r] {
			t.Errorf("docs/architecture.md: layout table names %s twice", r)
		}
		named[r] = true
		if !packages[r] && r != "cmd" {
			t.Errorf("docs/architecture.md: layout table names %s, which is not a package (go list ./...)", r)
		}
	}
	for p := range packages {
		if !named[p] && !(strings.HasPrefix(p, "cmd/") && named["cmd"]) {
			t.Errorf("docs/architecture.md: package %s has no row in the layout table", p)
		}
	}

	// The folders that hold no Go package have a table of their own; each
	// must exist.
	for _, r := range layoutTable(t, string(doc), "### Other folders") {
		if fi, err := os.Stat(filepath.Join(root, r)); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md: folder table names %s, which is not a folder", r)
		}
	}
}

// link is a Markdown inline link's target: "](target)" or
// "](target "title")".
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// htmlAnchor is an explicit anchor: <a id="silent-jobs"></a>.
var htmlAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// TestDocLinksResolve checks every relative link of every Markdown file
// of the repository: its file exists and, for #fragment, the file has a
// heading (by GitHub's slugs) or an anchor of that name.
func TestDocLinksResolve(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchorCache[path]; ok {
			return a
		}
		a, err := anchors(path)
		if err != nil {
			t.Fatal(err)
		}
		anchorCache[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for lineNo, line := range strings.Split(stripCode(string(text)), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if !strings.HasPrefix(dest, root) {
						t.Errorf("%s:%d: link %s leaves the repository", rel, lineNo+1, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: no such file", rel, lineNo+1, target)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %s: a fragment of a file that is not Markdown", rel, lineNo+1, target)
					continue
				}
				if !anchorsOf(dest)[frag] {
					t.Errorf("%s:%d: link %s: no heading or anchor %q in %s", rel, lineNo+1, target, frag, filepath.Base(dest))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the walk is broken")
	}
}

// stripCode blanks fenced code blocks (their lines stay, so line numbers
// hold) and inline code spans, whose brackets are not links.
func stripCode(text string) string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
			continue
		}
		lines[i] = inlineCode.ReplaceAllString(l, "``")
	}
	return strings.Join(lines, "\n")
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// anchors returns the fragments a Markdown file answers to: its
// headings' GitHub slugs (a repeated slug gets -1, -2, ...) and its
// explicit <a id> anchors.
func anchors(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			got[m[1]] = true
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		s := slug(line[level+1:])
		if n := seen[s]; n > 0 {
			got[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			got[s] = true
		}
		seen[s]++
	}
	return got, sc.Err()
}

// slug is GitHub's anchor for a heading: its text lower-cased, without
// Markdown's link targets and emphasis, every character but letters,
// digits, spaces, hyphens and underscores dropped, spaces turned into
// hyphens.
func slug(heading string) string {
	heading = mdLink.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Issue 8, second pass: profile of 10,000/s, 10,000,000 jobs, chaos": "issue-8-second-pass-profile-of-10000s-10000000-jobs-chaos",
		"Firing: exactly once per scheduled time":                           "firing-exactly-once-per-scheduled-time",
		"`tockd serve` and `tockd dev`":                                     "tockd-serve-and-tockd-dev",
		"Many nodes, and what happens when one fails":                       "many-nodes-and-what-happens-when-one-fails",
		"Execution and recording — the [recorder](x.md)":                    "execution-and-recording--the-recorder",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
