package typescript

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/store/storetest"
)

// The TypeScript SDK's conformance executor (examples/conformance.ts)
// passes every check of the kit.
func TestSDKPassesTheConformanceKit(t *testing.T) {
	t.Parallel()
	npmBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	bin, err := filepath.Abs(filepath.Join("dist", "examples", "conformance.js"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := conformance.Run(ctx, conformance.Config{PostgresURL: storetest.Postgres(t), Command: []string{"node", bin}, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the kit's report:\n%s", out.String())
	if len(res) != len(conformance.Checks()) {
		t.Fatalf("%d results for %d checks", len(res), len(conformance.Checks()))
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s failed: %s", r.Name, r.Reason)
		}
		// The SDK takes one execution per message: the batch form's
		// checks, and only those, do not apply.
		if batch := strings.HasPrefix(r.Name, "batch_"); r.NotApplicable != batch {
			t.Errorf("%s: not applicable %v (%s)", r.Name, r.NotApplicable, r.Reason)
		}
	}
}
