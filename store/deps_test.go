package store

import (
	"os/exec"
	"strings"
	"testing"
)

// store is Postgres and the execution state rules: it must not depend on
// bucket ownership (partition) nor on the NATS wire protocol (wire); the
// vocabulary it shares with them lives in domain.
func TestImportsNeitherPartitionNorWire(t *testing.T) {
	t.Parallel()
	// go test puts its own GOROOT/bin first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/tock-sched/tock/partition", "github.com/tock-sched/tock/wire":
			t.Errorf("store depends on %s", pkg)
		}
		if strings.HasPrefix(pkg, "github.com/nats-io/") || strings.HasPrefix(pkg, "go.etcd.io/") {
			t.Errorf("store depends on %s", pkg)
		}
	}
}
