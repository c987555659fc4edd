package typescript

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/store/storetest"
)

// The TypeScript SDK's conformance executor (examples/conformance.ts)
// passes every check of the kit (three kits at once, each a third of the
// checks).
func TestSDKPassesTheConformanceKit(t *testing.T) {
	t.Parallel()
	npmBuild(t)
	bin, err := filepath.Abs(filepath.Join("dist", "examples", "conformance.js"))
	if err != nil {
		t.Fatal(err)
	}
	pg := storetest.Postgres(t)
	var mu sync.Mutex
	ran := 0
	t.Cleanup(func() {
		if !t.Failed() && ran != len(conformance.Checks()) {
			t.Errorf("%d checks ran of %d", ran, len(conformance.Checks()))
		}
	})
	for i, checks := range conformance.Groups() {
		t.Run(fmt.Sprintf("part%d", i+1), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var out bytes.Buffer
			res, err := conformance.Run(ctx, conformance.Config{PostgresURL: pg, Command: []string{"node", bin}, Checks: checks, Out: &out})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the kit's report:\n%s", out.String())
			if len(res) != len(checks) {
				t.Fatalf("%d results for %d checks", len(res), len(checks))
			}
			mu.Lock()
			ran += len(res)
			mu.Unlock()
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
		})
	}
}
