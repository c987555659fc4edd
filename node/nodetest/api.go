package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

// Call sends a JSON request to url (body marshalled, if not nil) and
// decodes a successful JSON answer into out (if not nil); it returns the
// status, and logs the body of an error answer. It is for calls a test
// makes as raw HTTP: malformed requests, and answers the generated
// client does not decode.
func Call(t testing.TB, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, raw, err)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// CreateJob creates a job from body, a job as JSON would write it, and
// fails the test unless it is created.
func (n *Node) CreateJob(t testing.TB, body map[string]any) models.Job {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.Client.CreateJobWithBodyWithResponse(context.Background(), nil, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create job: status %d %s", resp.StatusCode(), resp.Body)
	}
	return *resp.JSON201
}

// Job is GET /v1/jobs/{id}.
func (n *Node) Job(t testing.TB, id uuid.UUID) models.Job {
	t.Helper()
	resp, err := n.Client.GetJobWithResponse(context.Background(), id)
	if err != nil {
		t.Fatalf("GET job %s: %v", id, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("GET job %s: status %d %s", id, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// Executions is every execution of the job, following the pages.
func (n *Node) Executions(t testing.TB, job uuid.UUID) []models.Execution {
	t.Helper()
	var all []models.Execution
	limit := 500
	params := &models.ListJobExecutionsParams{Limit: &limit}
	for {
		resp, err := n.Client.ListJobExecutionsWithResponse(context.Background(), job, params)
		if err != nil {
			t.Fatalf("list executions of %s: %v", job, err)
		}
		if resp.JSON200 == nil {
			t.Fatalf("list executions of %s: status %d %s", job, resp.StatusCode(), resp.Body)
		}
		all = append(all, resp.JSON200.Items...)
		if resp.JSON200.NextCursor == nil {
			return all
		}
		params.Cursor = resp.JSON200.NextCursor
	}
}

// Execution is GET /v1/executions/{id}, with its attempts.
func (n *Node) Execution(t testing.TB, id uuid.UUID) models.Execution {
	t.Helper()
	resp, err := n.Client.GetExecutionWithResponse(context.Background(), id)
	if err != nil {
		t.Fatalf("GET execution %s: %v", id, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("GET execution %s: status %d %s", id, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// WaitState waits until execution id is in state and returns it.
// On a timeout it says where the execution was: its state, attempts and
// notes.
func (n *Node) WaitState(t testing.TB, id uuid.UUID, state string, within time.Duration) models.Execution {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		x := n.Execution(t, id)
		if string(x.State) == state {
			return x
		}
		if time.Now().After(deadline) {
			var atts, notes []string
			for _, a := range Attempts(x) {
				atts = append(atts, fmt.Sprintf("%d %s on %s", a.Number, Str(a.Outcome), Str(a.ExecutorId)))
			}
			if x.Notes != nil {
				for _, no := range *x.Notes {
					notes = append(notes, string(no.Kind)+": "+no.Note)
				}
			}
			t.Fatalf("timed out after %s waiting for execution %s %s: it is %s after %d attempts (attempts %q, notes %q)",
				within, id, state, x.State, x.Attempts, atts, notes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunOnce creates a job that runs once, now (body without a schedule),
// and returns its only execution's id.
func (n *Node) RunOnce(t testing.TB, body map[string]any) uuid.UUID {
	t.Helper()
	j := n.CreateJob(t, body)
	var id uuid.UUID
	WaitFor(t, 10*time.Second, "the job's execution", func() bool {
		if xs := n.Executions(t, j.Id); len(xs) > 0 {
			id = xs[0].Id
		}
		return id != uuid.Nil
	})
	return id
}

// Succeeded is the executions of xs that succeeded.
func Succeeded(xs []models.Execution) []models.Execution {
	var out []models.Execution
	for _, x := range xs {
		if x.State == "succeeded" {
			out = append(out, x)
		}
	}
	return out
}

// Str is *p, or "" for nil: the generated models' optional strings.
func Str[S ~string](p *S) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// Metric reads one sample of the node's /metrics (a name with its labels,
// as the exposition writes it); 0 if absent.
func (n *Node) Metric(t testing.TB, sample string) float64 {
	t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// Scrape is the sum of the series of metric name on the node at base; 0
// when the node does not answer.
func Scrape(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Logf("scrape %s: %v", base, err)
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
			if len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				sum += v
			}
		}
	}
	return sum
}

// ExecutionsIn is every execution of the cluster in state (GET
// /v1/executions?state=...), following the pages.
func (n *Node) ExecutionsIn(t testing.TB, state string) []models.Execution {
	t.Helper()
	var all []models.Execution
	limit := 500
	states := []models.ExecutionState{models.ExecutionState(state)}
	params := &models.ListExecutionsParams{State: &states, Limit: &limit}
	for {
		resp, err := n.Client.ListExecutionsWithResponse(context.Background(), params)
		if err != nil {
			t.Fatalf("list %s executions: %v", state, err)
		}
		if resp.JSON200 == nil {
			t.Fatalf("list %s executions: status %d %s", state, resp.StatusCode(), resp.Body)
		}
		all = append(all, resp.JSON200.Items...)
		if resp.JSON200.NextCursor == nil {
			return all
		}
		params.Cursor = resp.JSON200.NextCursor
	}
}

// Attempts is the execution's attempts, as GET /v1/executions/{id} lists
// them; none in a listing.
func Attempts(x models.Execution) []models.Attempt {
	if x.AttemptList == nil {
		return nil
	}
	return *x.AttemptList
}

// Code is the status of a generated client's answer, or 0 if the request
// failed: for tests that only check the status of a call.
func Code(resp interface{ StatusCode() int }, err error) int {
	if err != nil {
		return 0
	}
	return resp.StatusCode()
}
