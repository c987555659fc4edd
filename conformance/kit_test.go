package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/store/storetest"
)

// build builds a Go program of this module into the test's directory.
func build(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// runChecks runs the kit against the command (a program and its
// arguments) with the checks (all when none).
func runChecks(t *testing.T, command, checks []string) ([]conformance.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := conformance.Run(ctx, conformance.Config{PostgresURL: storetest.Postgres(t), Command: command, Checks: checks, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the kit's report:\n%s", out.String())
	return res, out.String()
}

// The Go SDK's executor passes every check.
func TestGoSDKPasses(t *testing.T) {
	t.Parallel()
	bin := build(t, "github.com/tock-sched/tock/examples/conformance-executor")
	var mu sync.Mutex
	ran := map[string]bool{}
	t.Cleanup(func() {
		if !t.Failed() && len(ran) != len(conformance.Checks()) {
			t.Errorf("%d checks ran of %d", len(ran), len(conformance.Checks()))
		}
	})
	concurrently(t, len(conformance.Groups()), func(i int) {
		checks := conformance.Groups()[i]
		t.Run(fmt.Sprintf("part%d", i+1), func(t *testing.T) {
			res, _ := runChecks(t, []string{bin}, checks)
			if len(res) != len(checks) {
				t.Fatalf("%d results for %d checks", len(res), len(checks))
			}
			for _, r := range res {
				mu.Lock()
				ran[r.Name] = true
				mu.Unlock()
				if !r.Pass {
					t.Errorf("%s failed: %s", r.Name, r.Reason)
				}
				if r.NotApplicable { // the Go SDK takes batch messages: every check applies
					t.Errorf("%s was not run: %s", r.Name, r.Reason)
				}
			}
		})
	})
}

// concurrently runs f(0) … f(n-1) at once and waits for them: subtests
// started so run together whatever go test's -parallel (the machine's 2
// cores), since a kit mostly waits (an ack wait, a 40 s attempt).
func concurrently(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// An executor that ignores cancellation fails exactly the cancel check,
// saying so in words.
func TestExecutorIgnoringCancelFailsTheCancelCheck(t *testing.T) {
	t.Parallel()
	res, out := runChecks(t, []string{build(t, "github.com/tock-sched/tock/conformance/testdata/ignorecancel")},
		[]string{"success_with_output", "cancel_while_running"})
	if len(res) != 2 || !res[0].Pass || res[1].Pass {
		t.Fatalf("results: %+v", res)
	}
	if !strings.Contains(res[1].Reason, "after the cancel") || !strings.Contains(out, "FAIL  cancel_while_running") {
		t.Fatalf("the cancel check's reason: %q", res[1].Reason)
	}
}

// An executor that reports an attempt's end twice fails the success
// check, one without in-progress acks the heartbeats check, and one that
// runs a batch message delivered again the check of that; each passes
// the other check it is given.
func TestBrokenExecutorsFailTheirChecks(t *testing.T) {
	t.Parallel()
	bin := build(t, "github.com/tock-sched/tock/conformance/testdata/rawexec")
	cases := []struct {
		mode, fails, passes, why string
	}{
		{"twice", "success_with_output", "heartbeats", "reported 2 times"},
		{"nobeat", "heartbeats", "success_with_output", "delivered again"},
		{"batchrerun", "batch_redelivered_not_run_again", "many_at_once", "was run again"},
	}
	concurrently(t, len(cases), func(i int) {
		tc := cases[i]
		t.Run(tc.mode, func(t *testing.T) {
			res, _ := runChecks(t, []string{bin, "-mode", tc.mode}, []string{tc.fails, tc.passes})
			if len(res) != 2 || res[0].Pass || !res[1].Pass || !strings.Contains(res[0].Reason, tc.why) {
				t.Fatalf("-mode %s: %+v; want %s failed (%q) and %s passed", tc.mode, res, tc.fails, tc.why, tc.passes)
			}
		})
	})
}
