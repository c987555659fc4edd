package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// jobs create --depends-on makes a dependent job (a chain without a
// schedule flag), jobs get says what it waits for, jobs graph draws the
// edges both ways, and jobs delete refuses an upstream unless --force.
func TestDependsFlagsAndGraph(t *testing.T) {
	t.Parallel()
	hs, _ := server(t)
	u := hs.URL
	imp := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "import", "--cron", "0 0 2 * * *", "--custom", "w"))
	ok(t, u, "jobs", "create", "--name", "clean", "--cron", "0 0 2 * * *", "--custom", "w")
	var rep models.Job
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "create", "--name", "report", "--cron", "0 0 2 * * *", "--custom", "w",
		"--depends-on", "import", "--depends-on", "clean:any", "--wait-timeout", "2h", "--on-timeout", "run")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.DependsOn == nil || len(*rep.DependsOn) != 2 || string((*rep.DependsOn)[1].On) != "any" || deref(rep.WaitTimeout) != "2h" {
		t.Fatalf("report: %+v", rep)
	}
	pub := uuidRE.FindString(ok(t, u, "jobs", "create", "--name", "publish", "--custom", "w", "--depends-on", "report"))
	if got := ok(t, u, "jobs", "get", pub); !strings.Contains(got, "waits for:") || !strings.Contains(got, "report (success); a chain") {
		t.Errorf("jobs get of the chain:\n%s", got)
	}
	graph := ok(t, u, "jobs", "graph", rep.Id.String())
	for _, want := range []string{"report\n", "waits for (← upstream):\n  ← clean (any)\n  ← import (success)\n",
		"waited for by (→ downstream):\n  → publish (success, chain)\n"} {
		if !strings.Contains(graph, want) {
			t.Errorf("graph lacks %q:\n%s", want, graph)
		}
	}
	if got := ok(t, u, "jobs", "graph", imp); !strings.Contains(got, "→ report (success)\n    → publish (success, chain)") {
		t.Errorf("import's graph:\n%s", got)
	}
	tockctl(t, u, "jobs", "create", "--name", "x", "--custom", "w", "--on-timeout", "run").failed(t, 1, "--on-timeout needs --depends-on")
	tockctl(t, u, "jobs", "delete", imp).failed(t, 1, "default/report")
	ok(t, u, "jobs", "delete", imp, "--force")
}
