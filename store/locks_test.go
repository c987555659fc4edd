package store

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// Every advisory lock key of the store is its own: two features sharing
// one would hold each other up (the history roller's session lock once
// had the dependency lock's key, so a rollup pass held every job delete
// and edge write). The keys are read from the source, so that a new one
// is checked too.
func TestAdvisoryLockKeysDiffer(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{} // value → constant
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || len(spec.Values) != len(spec.Names) {
				return true
			}
			for i, id := range spec.Names {
				if !strings.HasPrefix(id.Name, "lock") {
					continue
				}
				tv, err := types.Eval(fset, nil, token.NoPos, types.ExprString(spec.Values[i]))
				if err != nil || tv.Value == nil || tv.Value.Kind() != constant.Int {
					continue
				}
				// A one-key (bigint) and a two-key (int, int) lock never
				// meet: Postgres keeps them apart.
				kind := types.ExprString(spec.Type)
				v := kind + ":" + tv.Value.ExactString()
				if other, dup := keys[v]; dup {
					t.Errorf("%s and %s are the same advisory lock key %s", other, id.Name, tv.Value)
				}
				keys[v] = id.Name
			}
			return true
		})
	}
	if len(keys) < 7 {
		t.Fatalf("found only %d lock keys: %v", len(keys), keys)
	}
}
