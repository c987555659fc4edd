package store

import (
	"strings"
	"testing"

	"github.com/tock-sched/tock/internal/testenv"
)

// store is Postgres and the execution state rules: it must not depend on
// bucket ownership (partition) nor on the NATS wire protocol (wire); the
// vocabulary it shares with them lives in domain. Nor does it link the
// Parquet writer: archiving before retention is a hook package archive
// fills.
func TestImportsNeitherPartitionNorWire(t *testing.T) {
	t.Parallel()
	for _, pkg := range testenv.Deps(t) {
		switch pkg {
		case "github.com/tock-sched/tock/partition", "github.com/tock-sched/tock/wire":
			t.Errorf("store depends on %s", pkg)
		}
		if strings.HasPrefix(pkg, "github.com/nats-io/") || strings.HasPrefix(pkg, "go.etcd.io/") ||
			strings.HasPrefix(pkg, "github.com/parquet-go/") || pkg == "github.com/tock-sched/tock/archive" {
			t.Errorf("store depends on %s", pkg)
		}
	}
}
