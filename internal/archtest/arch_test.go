// Package archtest checks that docs/architecture.md's package arrows are
// the code's: every tock package's imports of other tock packages, as go
// list reports them, against the lines of the arrows block.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tock-sched/tock/"

// arrow is a line of the block: "pkg ──► a, b, c   (a comment)".
var arrow = regexp.MustCompile(`^(\S+)\s*─*►\s*([^(]*)`)

func TestArchitectureArrowsMatchImports(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := arrow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var to []string
		for _, p := range strings.Split(m[2], ",") {
			if p = strings.TrimSpace(p); p != "" {
				to = append(to, p)
			}
		}
		slices.Sort(to)
		documented[m[1]] = to
	}
	if len(documented) == 0 {
		t.Fatal("docs/architecture.md has no package arrows")
	}

	for _, p := range goList(t, "./...") {
		pkg := strings.TrimPrefix(p.ImportPath, module)
		var imports []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				imports = append(imports, rest)
			}
		}
		slices.Sort(imports)
		want, ok := documented[pkg]
		switch {
		case !ok && len(imports) > 0 && !undocumented(pkg):
			t.Errorf("%s imports %v but has no arrow in docs/architecture.md", pkg, imports)
		case ok && !slices.Equal(want, imports):
			t.Errorf("docs/architecture.md: %s ──► %v; the code imports %v", pkg, want, imports)
		}
	}
}

// undocumented are packages the arrows leave out: test support and the
// example.
func undocumented(pkg string) bool {
	return strings.HasPrefix(pkg, "internal/testenv") || strings.HasPrefix(pkg, "internal/embedded") ||
		strings.HasPrefix(pkg, "store/storetest") || strings.HasPrefix(pkg, "node/nodetest") || strings.HasPrefix(pkg, "examples/") || strings.HasPrefix(pkg, "internal/archtest")
}

// listedPackage is the part of `go list -json` these tests read.
type listedPackage struct {
	ImportPath string
	Imports    []string
}

// goList runs go list -json with args in the module's root and decodes the
// stream of packages it prints.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	// go test puts its own GOROOT/bin first on PATH.
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list %v: %v\n%s", args, err, exit.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs
		}
		if err != nil {
			t.Fatalf("decode go list %v: %v", args, err)
		}
		pkgs = append(pkgs, p)
	}
}
