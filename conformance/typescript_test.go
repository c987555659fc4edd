package conformance_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tock-sched/tock/conformance"
)

// The TypeScript SDK's executor (sdk/typescript/examples/conformance.ts)
// passes every check. The test installs the SDK's locked dependencies
// (npm ci) and builds it; make test makes sure Node.js and npm are there
// (scripts/ensure-ui.sh).
func TestTypeScriptSDKPasses(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	sdk := filepath.Join(filepath.Dir(file), "..", "sdk", "typescript")
	for _, args := range [][]string{{"npm", "ci", "--no-audit", "--no-fund"}, {"npm", "run", "--silent", "build"}} {
		if _, err := exec.LookPath(args[0]); err != nil {
			t.Fatalf("%s is needed (make test installs Node.js and npm: scripts/ensure-ui.sh): %v", args[0], err)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = sdk
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v in sdk/typescript: %v\n%s", args, err, b)
		}
	}
	res, _ := run(t, "node", filepath.Join(sdk, "dist", "examples", "conformance.js"))
	if len(res) != len(conformance.Checks()) {
		t.Fatalf("%d results for %d checks", len(res), len(conformance.Checks()))
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s failed: %s", r.Name, r.Reason)
		}
	}
}
