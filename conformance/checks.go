package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

// check is one named scenario: run returns "" when the executor passed,
// else the reason it did not, in words.
type check struct {
	name, doc string
	limit     time.Duration
	run       func(ctx context.Context, e *env) string
}

// Checks are the kit's checks, in the order they run.
var checks = []check{
	{name: "success_with_output", doc: "an attempt that succeeds is reported once, succeeded, with its output", limit: 30 * time.Second,
		run: checkSuccess},
	{name: "failure_then_retry", doc: "a failed attempt is reported failed; tock retries after the job's backoff; the third attempt succeeds", limit: 60 * time.Second,
		run: checkRetry},
	{name: "cancel_while_running", doc: "a running attempt stops within 1 s of its execution's cancel and reports it cancelled", limit: 60 * time.Second,
		run: checkCancel},
}

// Checks are the names of the kit's checks, in the order they run.
func Checks() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

func selected(names []string) ([]check, error) {
	if len(names) == 0 {
		return checks, nil
	}
	var out []check
	for _, n := range names {
		i := slices.IndexFunc(checks, func(c check) bool { return c.name == n })
		if i < 0 {
			return nil, fmt.Errorf("conformance: no check %q (the checks: %s)", n, strings.Join(Checks(), ", "))
		}
		out = append(out, checks[i])
	}
	return out, nil
}

// job creates a job running once now with instruction in, and returns
// its id.
func (e *env) job(ctx context.Context, name string, in Instruction, change func(*models.JobCreate)) (uuid.UUID, string) {
	p := Payload(in)
	body := models.JobCreate{Name: name + "-" + uuid.NewString()[:8], Handler: models.Handler{Type: models.HandlerTypeCustom, Name: &e.handler},
		Payload: &p}
	if change != nil {
		change(&body)
	}
	r, err := e.api.CreateJobWithResponse(ctx, nil, body)
	if err != nil {
		return uuid.Nil, fmt.Sprintf("the kit could not create its job: %v", err)
	}
	if r.JSON201 == nil {
		return uuid.Nil, fmt.Sprintf("the kit could not create its job: status %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON201.Id, ""
}

// execution waits for job's one execution to satisfy done, and returns
// it as GET /v1/executions/{id} shows it (with its attempts); ok is false
// when ctx ended first (the last one seen is returned).
func (e *env) execution(ctx context.Context, job uuid.UUID, done func(models.Execution) bool) (x models.Execution, ok bool) {
	for {
		r, err := e.api.ListJobExecutionsWithResponse(ctx, job, nil)
		if err == nil && r.JSON200 != nil && len(r.JSON200.Items) > 0 {
			g, err := e.api.GetExecutionWithResponse(ctx, r.JSON200.Items[0].Id)
			if err == nil && g.JSON200 != nil {
				x = *g.JSON200
				if done(x) {
					return x, true
				}
			}
		}
		select {
		case <-ctx.Done():
			return x, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func final(x models.Execution) bool {
	return x.State == models.ExecutionStateSucceeded || x.State == models.ExecutionStateDead || x.State == models.ExecutionStateCancelled
}

func attempts(x models.Execution) []models.Attempt {
	if x.AttemptList == nil {
		return nil
	}
	return *x.AttemptList
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func checkSuccess(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "success", Instruction{Do: DoSucceed, Output: "conformance ok"}, nil)
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	switch as := attempts(x); {
	case !ok:
		return fmt.Sprintf("the execution did not end (state %q, %d attempts): is the executor serving the handler?", x.State, len(as))
	case x.State != models.ExecutionStateSucceeded:
		return fmt.Sprintf("the execution ended %s (error %q), want succeeded", x.State, deref(x.Error))
	case deref(x.Output) != "conformance ok":
		return fmt.Sprintf("the output is %q, want %q", deref(x.Output), "conformance ok")
	case len(as) != 1:
		return fmt.Sprintf("%d attempts recorded, want 1", len(as))
	}
	return ""
}

func checkRetry(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "retry", Instruction{Do: DoFail, FailAttempts: 2, Output: "third time"}, func(j *models.JobCreate) {
		max, backoff, mult, jitter := 3, "1s", 2.0, models.RetryPolicyJitterNone
		j.Retry = &models.RetryPolicy{MaxAttempts: &max, InitialBackoff: &backoff, Multiplier: &mult, Jitter: &jitter}
	})
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	as := attempts(x)
	switch {
	case !ok:
		return fmt.Sprintf("the execution did not end (state %q, %d attempts)", x.State, len(as))
	case x.State != models.ExecutionStateSucceeded || len(as) != 3:
		return fmt.Sprintf("the execution ended %s after %d attempts, want succeeded after 3 (two failed)", x.State, len(as))
	}
	for i, a := range as[:2] {
		if deref(a.Outcome) != models.AttemptOutcomeFailed {
			return fmt.Sprintf("attempt %d ended %q, want failed", i+1, deref(a.Outcome))
		}
	}
	// Backoff 1 s, then 2 s: each retry starts no sooner than that after
	// the failure before it.
	for i, want := range []time.Duration{time.Second, 2 * time.Second} {
		end, next := as[i].FinishedAt, as[i+1].StartedAt
		if end == nil || next == nil {
			return fmt.Sprintf("attempt %d or %d has no recorded time", i+1, i+2)
		}
		if gap := next.Sub(*end); gap < want-50*time.Millisecond {
			return fmt.Sprintf("attempt %d started %s after attempt %d failed, before the job's backoff of %s", i+2, gap.Round(time.Millisecond), i+1, want)
		}
	}
	return ""
}

func checkCancel(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "cancel", Instruction{Do: DoWork, WorkMS: 10_000, Output: "should not finish"}, nil)
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, func(x models.Execution) bool { return x.State == models.ExecutionStateRunning })
	if !ok {
		return fmt.Sprintf("the execution never ran (state %q)", x.State)
	}
	cancelled := time.Now()
	if r, err := e.api.CancelExecutionWithResponse(ctx, x.Id); err != nil || r.StatusCode() != 200 {
		return fmt.Sprintf("the kit could not cancel: %v", err)
	}
	x, ok = e.execution(ctx, job, func(x models.Execution) bool {
		as := attempts(x)
		return len(as) > 0 && as[len(as)-1].FinishedAt != nil
	})
	as := attempts(x)
	if !ok || len(as) == 0 {
		return "the running attempt never reported its end after the cancel (it ignores cancellation)"
	}
	last := as[len(as)-1]
	if deref(last.Outcome) != models.AttemptOutcomeCancelled {
		return fmt.Sprintf("the attempt ended %q after the cancel, want cancelled", deref(last.Outcome))
	}
	if took := last.FinishedAt.Sub(cancelled); took > time.Second+250*time.Millisecond {
		return fmt.Sprintf("the attempt stopped %s after the cancel, want within 1 s", took.Round(time.Millisecond))
	}
	return ""
}
