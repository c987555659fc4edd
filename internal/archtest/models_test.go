package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serverModules are the modules only the server needs. A program that only
// calls the API (tockctl) must link none of them: it is shipped to machines
// that run no tock node, and each one would add megabytes and a dependency
// to keep patched.
var serverModules = []string{
	"github.com/labstack/echo",
	"github.com/jackc/pgx",
	"go.etcd.io/etcd",
	"github.com/nats-io/nats-server",
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

// fromModule reports whether pkg is one of module's packages (a module
// path is a prefix on a path boundary, so echo/v4/middleware counts and
// echo-contrib does not).
func fromModule(pkg, module string) bool {
	return pkg == module || strings.HasPrefix(pkg, module+"/")
}

// tockctl is built from the client and the shared models alone; if a
// server package slips in (say a model type that gains an Echo binder),
// this names the package that pulled it in.
func TestTockctlLinksNoServerPackage(t *testing.T) {
	deps := goList(t, "-deps", "./cmd/tockctl")
	if len(deps) == 0 {
		t.Fatal("go list -deps ./cmd/tockctl listed nothing")
	}
	importers := map[string][]string{}
	for _, p := range deps {
		for _, imp := range p.Imports {
			importers[imp] = append(importers[imp], p.ImportPath)
		}
	}
	for _, p := range deps {
		for _, m := range serverModules {
			if fromModule(p.ImportPath, m) {
				t.Errorf("cmd/tockctl links %s (imported by %v); the server module %s must stay out of it", p.ImportPath, importers[p.ImportPath], m)
			}
		}
	}
}

// The server and the client share one set of generated models, and the
// models package stands beneath both: it imports neither the server nor
// Echo, so the client can link it without the server.
func TestAPIAndClientShareOneModelsPackage(t *testing.T) {
	const models = module + "api/models"
	direct := map[string][]string{}
	for _, p := range goList(t, "./api", "./client") {
		direct[p.ImportPath] = p.Imports
	}
	for _, pkg := range []string{module + "api", module + "client"} {
		imports, ok := direct[pkg]
		if !ok {
			t.Fatalf("go list did not list %s", pkg)
		}
		if !slices.Contains(imports, models) {
			t.Errorf("%s does not import %s: its models are not the shared ones", pkg, models)
		}
	}

	deps := goList(t, "-deps", "./api/models")
	if len(deps) == 0 || deps[len(deps)-1].ImportPath != models {
		t.Fatalf("go list -deps ./api/models did not end with %s", models)
	}
	for _, p := range deps {
		switch {
		case fromModule(p.ImportPath, "github.com/labstack/echo"):
			t.Errorf("%s depends on Echo (%s)", models, p.ImportPath)
		case p.ImportPath == module+"api" || p.ImportPath == module+"client":
			t.Errorf("%s depends on %s; the arrow points the other way", models, p.ImportPath)
		}
	}
}
