package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMethodNames holds the exported methods of Store to the naming
// scheme in doc.go (a verb, then the rows) and to its index of queries by
// table: every method named there exists, and every method is named
// there or exempt.
func TestMethodNames(t *testing.T) {
	verbs := []string{"Get", "List", "Count", "Create", "Update", "Delete", "Copy",
		"Fire", "Claim", "Release", "Expire", "Save", "Use", "Stop", "Step", "Cancel",
		"Redrive", "Requeue", "Mark", "Advance", "Record", "Reseal", "Apply", "Maintain",
		"Ensure", "Next", "Group"}
	exempt := []string{"Open", "Pool", "Close", "Buckets", "Migrate", "Init", "Now", "Listen", "Maintenance", "SilenceSweep"}

	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !fd.Name.IsExported() {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Store" {
					methods = append(methods, fd.Name.Name)
				}
			}
		}
	}
	if len(methods) < 50 {
		t.Fatalf("found %d methods of Store; the parse is wrong", len(methods))
	}

	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	index := string(doc[strings.Index(string(doc), "# Queries by table"):])
	indexed := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`).FindAllString(index, -1) {
		indexed[m] = true
	}

	for _, m := range methods {
		if slices.Contains(exempt, m) {
			continue
		}
		if !slices.ContainsFunc(verbs, func(v string) bool {
			return strings.HasPrefix(m, v) && (len(m) == len(v) || m[len(v)] >= 'A' && m[len(v)] <= 'Z')
		}) {
			t.Errorf("Store.%s does not start with a verb of the scheme in doc.go", m)
		}
		if !indexed[m] {
			t.Errorf("Store.%s is not in doc.go's index of queries by table", m)
		}
		delete(indexed, m)
	}
	for m := range indexed {
		if strings.ContainsAny(m[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && !strings.Contains(m, "_") {
			// A CamelCase word left in the index names no method.
			t.Errorf("doc.go's index names %s, which is not a method of Store", m)
		}
	}
}
