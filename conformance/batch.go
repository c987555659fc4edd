package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// The checks of the batch form: several executions in one message
// (docs/wire-protocol.md, "Several executions in one message"). The kit's
// tock has one bucket, so executions due at the same instant are fired
// together and travel in one batch message to an executor taking them.

// batchWatch records, from now on, the job ids of the members of each
// batch message published on the handler's normal-priority subject.
type batchWatch struct {
	sub *nats.Subscription
	mu  sync.Mutex
	// messages' members, each a set of job ids
	msgs []map[string]bool
}

func (e *env) watchBatches() (*batchWatch, error) {
	w := &batchWatch{}
	sub, err := e.nc.Subscribe(wire.ExecSubject(e.handler, domain.PriorityNormal), func(m *nats.Msg) {
		if !wire.IsBatch(m.Header) {
			return
		}
		members, err := wire.DecodeBatch(m.Data)
		if err != nil {
			return
		}
		jobs := map[string]bool{}
		for _, b := range members {
			var x wire.Execution
			if json.Unmarshal(b, &x) == nil {
				jobs[x.JobID] = true
			}
		}
		w.mu.Lock()
		w.msgs = append(w.msgs, jobs)
		w.mu.Unlock()
	})
	w.sub = sub
	return w, err
}

// together reports whether one batch message carried every job's
// execution.
func (w *batchWatch) together(jobs map[string]uuid.UUID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, m := range w.msgs {
		for _, j := range jobs {
			if !m[j.String()] {
				continue next
			}
		}
		return true
	}
	return false
}

func (w *batchWatch) stop() { _ = w.sub.Unsubscribe() }

// batchJobs creates a job per instruction, each running once at the same
// instant a few seconds from now, and returns their ids by name.
func (e *env) batchJobs(ctx context.Context, ins map[string]Instruction, change map[string]func(*models.JobCreate)) (map[string]uuid.UUID, string) {
	at := time.Now().Add(6 * time.Second).Truncate(time.Second).UTC()
	jobs := map[string]uuid.UUID{}
	for name, in := range ins {
		job, why := e.job(ctx, "batch-"+name, in, func(j *models.JobCreate) {
			j.Schedule = &models.Schedule{At: &at}
			if f := change[name]; f != nil {
				f(j)
			}
		})
		if why != "" {
			return nil, why
		}
		jobs[name] = job
	}
	return jobs, ""
}

// batchRun is executions fired together, watched: the batch messages on
// the handler's subject, and the successes reported.
type batchRun struct {
	jobs map[string]uuid.UUID
	w    *batchWatch
	ends func() map[string]int
}

// startBatch starts the watches, then creates the jobs (batchJobs).
func (e *env) startBatch(ctx context.Context, ins map[string]Instruction, change map[string]func(*models.JobCreate)) (*batchRun, string) {
	w, err := e.watchBatches()
	if err != nil {
		return nil, fmt.Sprintf("the kit could not watch the handler's subject: %v", err)
	}
	ends, err := e.watchEvents(string(domain.EventSucceeded))
	if err != nil {
		w.stop()
		return nil, fmt.Sprintf("the kit could not watch the events: %v", err)
	}
	b := &batchRun{w: w, ends: ends}
	var why string
	if b.jobs, why = e.batchJobs(ctx, ins, change); why != "" {
		b.stop()
		return nil, why
	}
	return b, ""
}

func (b *batchRun) stop() {
	b.w.stop()
	b.ends()
}

func checkBatchMembersAlone(ctx context.Context, e *env) string {
	b, why := e.startBatch(ctx, map[string]Instruction{
		"ok":      {Do: DoSucceed, Output: "ok"},
		"retry":   {Do: DoFail, FailAttempts: 1, Output: "second"},
		"cancel":  {Do: DoWork, WorkMS: 20_000, Output: "should not finish"},
		"timeout": {Do: DoWork, WorkMS: 10_000},
		"slow":    {Do: DoWork, WorkMS: 4_000, Output: "slow"},
	}, map[string]func(*models.JobCreate){
		"retry": func(j *models.JobCreate) {
			max, backoff, jitter := 2, "1s", models.RetryPolicyJitterNone
			j.Retry = &models.RetryPolicy{MaxAttempts: &max, InitialBackoff: &backoff, Jitter: &jitter}
		},
		"timeout": func(j *models.JobCreate) {
			one, t := 1, "1s"
			j.Retry, j.Timeout = &models.RetryPolicy{MaxAttempts: &one}, &t
		},
	})
	if why != "" {
		return why
	}
	defer b.stop()
	jobs, w, ends := b.jobs, b.w, b.ends
	if why := e.cancelRunning(ctx, jobs["cancel"]); why != "" {
		return "the member cancelled: " + why
	}
	if why := timedOut(e.execution(ctx, jobs["timeout"], final)); why != "" {
		return "the member with a 1 s timeout: " + why
	}
	for _, name := range []string{"ok", "slow"} {
		x, ok := e.execution(ctx, jobs[name], final)
		if !ok || x.State != models.ExecutionStateSucceeded || len(attempts(x)) != 1 || deref(x.Output) != name {
			return fmt.Sprintf("the member %q ended %s after %d attempts with output %q; want succeeded once with %q",
				name, x.State, len(attempts(x)), deref(x.Output), name)
		}
	}
	x, ok := e.execution(ctx, jobs["retry"], final)
	if as := attempts(x); !ok || x.State != models.ExecutionStateSucceeded || len(as) != 2 ||
		deref(as[0].Outcome) != models.AttemptOutcomeFailed || deref(x.Output) != "second" {
		return fmt.Sprintf("the member failing once ended %s after %d attempts with output %q; want a failed attempt, then one succeeded with \"second\"",
			x.State, len(as), deref(x.Output))
	}
	if !w.together(jobs) {
		return "tock did not send the five executions in one batch message (the kit's fault, not the executor's)"
	}
	// Each end reported once, though they shared a message.
	time.Sleep(500 * time.Millisecond)
	n := ends()
	for _, name := range []string{"ok", "slow", "retry"} {
		x, _ := e.execution(ctx, jobs[name], final)
		if n[x.Id.String()] != 1 {
			return fmt.Sprintf("the member %q's success was reported %d times, want once", name, n[x.Id.String()])
		}
	}
	return ""
}

func checkBatchRedelivered(ctx context.Context, e *env) string {
	b, why := e.startBatch(ctx, map[string]Instruction{
		"quick1": {Do: DoSucceed, Output: "quick1"},
		"quick2": {Do: DoSucceed, Output: "quick2"},
		"quick3": {Do: DoSucceed, Output: "quick3"},
		"long":   {Do: DoWork, WorkMS: 8_000, Output: "long"},
	}, nil)
	if why != "" {
		return why
	}
	defer b.stop()
	jobs, w, ends := b.jobs, b.w, b.ends
	quick := map[string]uuid.UUID{}
	for _, name := range []string{"quick1", "quick2", "quick3"} {
		x, ok := e.execution(ctx, jobs[name], final)
		if !ok || x.State != models.ExecutionStateSucceeded {
			return fmt.Sprintf("the member %q did not succeed (state %q)", name, x.State)
		}
		quick[name] = x.Id
	}
	if x, ok := e.execution(ctx, jobs["long"], func(x models.Execution) bool { return x.State == models.ExecutionStateRunning }); !ok {
		return fmt.Sprintf("the long member never ran (state %q)", x.State)
	}
	if !w.together(jobs) {
		return "tock did not send the four executions in one batch message (the kit's fault, not the executor's)"
	}
	// Killed while the long member runs: the message, not acknowledged,
	// comes back after the consumer's ack wait, delivered a second time.
	c, err := e.js.Consumer(ctx, wire.ExecStream, wire.ConsumerName(e.handler, domain.PriorityNormal))
	if err != nil {
		return fmt.Sprintf("the kit could not read the executor's consumer: %v", err)
	}
	e.exec.signal(syscall.SIGKILL, 10*time.Second)
	before, err := c.Info(ctx)
	if err != nil {
		return fmt.Sprintf("the kit could not read the executor's consumer: %v", err)
	}
	if err := e.exec.start(); err != nil {
		return fmt.Sprintf("the kit could not start the executor again: %v", err)
	}
	x, ok := e.execution(ctx, jobs["long"], final)
	if !ok || x.State != models.ExecutionStateSucceeded || deref(x.Output) != "long" {
		return fmt.Sprintf("after the kill the long member ended %q with output %q (%d attempts); want it run to success",
			x.State, deref(x.Output), len(attempts(x)))
	}
	// Until the batch message has come back and been settled: deliveries
	// beyond one a stream message are redeliveries.
	for {
		info, err := c.Info(ctx)
		redelivered := err == nil && (info.Delivered.Consumer-before.Delivered.Consumer) > (info.Delivered.Stream-before.Delivered.Stream)
		if redelivered && info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			if !redelivered {
				return "the batch message was not delivered again after the kill (the kit's fault, not the executor's)"
			}
			return "the batch message delivered again was never settled (acknowledged)"
		case <-time.After(500 * time.Millisecond):
		}
	}
	time.Sleep(time.Second)
	n := ends()
	for name, id := range quick {
		if n[id.String()] != 1 {
			return fmt.Sprintf("the member %q, which had succeeded, was run and reported %d times: the batch message delivered again was run again", name, n[id.String()])
		}
		if x, _ := e.execution(ctx, jobs[name], final); len(attempts(x)) != 1 || deref(x.Output) != name {
			return fmt.Sprintf("the member %q has %d attempts, output %q, after the batch message came back; want 1, %q", name, len(attempts(x)), deref(x.Output), name)
		}
	}
	return ""
}
