// Package typescript holds tock's TypeScript SDK (an npm package); its Go
// tests run the SDK's examples against a real tock.
package typescript

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/node/nodetest"
)

var (
	buildOnce sync.Once
	buildOut  []byte
	buildErr  error
)

// npmBuild installs the package's locked dependencies and builds it,
// once for the package's tests.
func npmBuild(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() { buildOut, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("%v\n%s", buildErr, buildOut)
	}
}

func build() ([]byte, error) {
	for _, args := range [][]string{{"npm", "ci", "--no-audit", "--no-fund"}, {"npm", "run", "--silent", "build"}} {
		if _, err := exec.LookPath(args[0]); err != nil {
			return nil, fmt.Errorf("%s is needed (make test installs Node.js and npm: scripts/ensure-ui.sh): %w", args[0], err)
		}
		cmd := exec.Command(args[0], args[1:]...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("%v: %w", args, err)
		}
	}
	return nil, nil
}

// The TypeScript example executor runs the README tour's job: a
// send-email job every five seconds, its executions succeeded with the
// executor's output, and what it logged in each execution's log.
func TestExampleRunsTheTourJob(t *testing.T) {
	t.Parallel()
	npmBuild(t)
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "dist/examples/custom-executor.js")
	cmd.Env = append(os.Environ(), "TOCK_NATS_URL="+e.NATSURL(), "TOCK_HANDLER=send-email")
	var out nodetest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	j := n.CreateJob(t, map[string]any{
		"name":     "welcome-mail",
		"schedule": map[string]any{"cron": "*/5 * * * * *", "timezone": "Europe/Berlin"},
		"handler":  map[string]any{"type": "custom", "name": "send-email"},
		"payload":  map[string]any{"to": "ada@example.com"},
	})
	nodetest.WaitFor(t, 30*time.Second, "two succeeded executions of the tour's job", func() bool {
		return len(nodetest.Succeeded(n.Executions(t, j.Id))) >= 2
	})
	x := nodetest.Succeeded(n.Executions(t, j.Id))[0]
	if !strings.HasPrefix(nodetest.Str(x.Output), "handled by ") || x.Attempts != 1 {
		t.Fatalf("execution %s: output %q, %d attempts", x.Id, nodetest.Str(x.Output), x.Attempts)
	}
	nodetest.WaitFor(t, 10*time.Second, "its log line", func() bool {
		r, err := n.Client.GetExecutionLogsWithResponse(ctx, x.Id, nil)
		return err == nil && r.JSON200 != nil && len(r.JSON200.Items) > 0 &&
			strings.Contains(nodetest.Str(r.JSON200.Items[0].Text), `sending {"to":"ada@example.com"}`)
	})
	if !strings.Contains(out.String(), "serving send-email") {
		t.Errorf("the example's output: %s", out.String())
	}
}

// The REST API's typed client (src/api.ts) against a real tockd: a job
// created and read back, and a bad one refused with the API's problem.
func TestTypedAPIClient(t *testing.T) {
	t.Parallel()
	npmBuild(t)
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	cmd := exec.Command("node", "dist/examples/api.js")
	cmd.Env = append(os.Environ(), "TOCK_SERVER="+n.URL)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("examples/api.js: %v\n%s", err, b)
	}
	var got struct {
		Job     models.Job     `json:"job"`
		Refused int            `json:"refused"`
		Problem models.Problem `json:"problem"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if got.Job.Name != "report-from-typescript" || nodetest.Str(got.Job.Schedule.Cron) != "0 0 2 * * *" || got.Refused != 400 ||
		got.Problem.Errors == nil || len(*got.Problem.Errors) == 0 || (*got.Problem.Errors)[0].Field != "name" {
		t.Fatalf("the typed client's answers: %s", b)
	}
	if j := n.Job(t, got.Job.Id); j.Name != "report-from-typescript" {
		t.Fatalf("the job as the Go client reads it: %+v", j)
	}
}
