package archtest

import (
	"slices"
	"strings"
	"testing"
)

// fromModule reports whether pkg is one of module's packages (a module
// path is a prefix on a path boundary, so echo/v4/middleware counts and
// echo-contrib does not).
func fromModule(pkg, module string) bool {
	return pkg == module || strings.HasPrefix(pkg, module+"/")
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
