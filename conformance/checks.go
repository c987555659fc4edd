package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// check is one named scenario: run returns "" when the executor passed,
// else the reason it did not, in words.
type check struct {
	name, doc string
	limit     time.Duration
	run       func(ctx context.Context, e *env) string
	// batch: a check of the batch form, run only against an executor
	// whose consumers ask for batch messages.
	batch bool
}

// Checks are the kit's checks, in the order they run.
var checks = []check{
	{name: "success_with_output", doc: "an attempt that succeeds is recorded once, succeeded, with its output, and its end reported once", limit: 30 * time.Second,
		run: checkSuccess},
	{name: "failure_then_retry", doc: "a failed attempt is reported failed; tock retries after the job's backoff; the third attempt succeeds", limit: 60 * time.Second,
		run: checkRetry},
	{name: "cancel_while_running", doc: "a running attempt stops within 1 s of its execution's cancel and reports it cancelled", limit: 60 * time.Second,
		run: checkCancel},
	{name: "timeout", doc: "an attempt that outlives the job's timeout is cut at it and reported timed out", limit: 60 * time.Second,
		run: checkTimeout},
	{name: "execution_id_is_the_key", doc: "every attempt of an execution gets the execution's id (the idempotency key)", limit: 60 * time.Second,
		run: checkExecutionID},
	{name: "logs_in_order", doc: "what an attempt writes to its log is stored, in order", limit: 30 * time.Second,
		run: checkLogs},
	{name: "redelivery_reported_once", doc: "a message delivered again for an attempt already reported adds no attempt", limit: 60 * time.Second,
		run: checkRedelivery},
	{name: "malformed_messages", doc: "messages that are not executions neither crash the executor nor stop it serving", limit: 60 * time.Second,
		run: checkMalformed},
	{name: "many_at_once", doc: "twenty executions due at the same instant (tock may pack them into one message) each run once", limit: 60 * time.Second,
		run: checkManyAtOnce},
	{name: "priorities", doc: "a high priority execution due while the executor is saturated with low ones runs before most of those waiting", limit: 90 * time.Second,
		run: checkPriorities},
	{name: "heartbeats", doc: "an attempt longer than the ack wait (30 s) keeps its message: one attempt, never redelivered", limit: 90 * time.Second,
		run: checkHeartbeats},
	{name: "sigterm_hands_back", doc: "an executor stopped with SIGTERM mid-attempt exits, and the execution is run to its end (by the executor started again)", limit: 90 * time.Second,
		run: checkSIGTERM},
	{name: "handler_state_reported", doc: "the executor writes its view of the handler it serves to TOCK_HANDLERS (breaker, load), under the handler's and its own id's key, and refreshes it", limit: 60 * time.Second,
		run: checkHandlerState},
	{name: "batch_members_settle_alone", doc: "five executions in one batch message each run as if alone: one succeeds, one fails and is retried, one is cancelled, one times out, one works on after the others ended", limit: 90 * time.Second,
		run: checkBatchMembersAlone, batch: true},
	{name: "batch_redelivered_not_run_again", doc: "a batch message delivered again (its executor was killed) runs none of its members again: those that had ended stay ended, the one cut short is run to its end", limit: 150 * time.Second,
		run: checkBatchRedelivered, batch: true},
}

// Checks are the names of the kit's checks, in the order they run.
func Checks() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// Groups splits the checks into three groups of about the same length
// (each with one of the long checks, 30-40 s), for running three kits at
// once, as the tests do: one kit runs every check one after another in
// about 3 minutes.
func Groups() [][]string {
	a := []string{"success_with_output", "failure_then_retry", "cancel_while_running", "timeout", "execution_id_is_the_key", "heartbeats"}
	b := []string{"logs_in_order", "redelivery_reported_once", "malformed_messages", "many_at_once", "batch_redelivered_not_run_again"}
	var c []string
	for _, n := range Checks() {
		if !slices.Contains(a, n) && !slices.Contains(b, n) {
			c = append(c, n)
		}
	}
	return [][]string{a, b, c}
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
	stop, err := e.watchEvents(string(domain.EventSucceeded))
	if err != nil {
		return fmt.Sprintf("the kit could not watch the events: %v", err)
	}
	defer stop()
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
	// Reported once: its end published under one message id (a retried
	// publish under the same id is dropped by JetStream).
	time.Sleep(500 * time.Millisecond)
	if n := stop()[x.Id.String()]; n != 1 {
		return fmt.Sprintf("the attempt's end was reported %d times (under different message ids), want once", n)
	}
	return ""
}

// watchEvents counts, from now on, the distinct message ids under
// which events of type typ are published, per execution id (single
// events or in batch messages); stop ends it and returns the counts.
// A publish retried under the same id counts once: JetStream keeps one.
func (e *env) watchEvents(typ string) (stop func() map[string]int, err error) {
	var mu sync.Mutex
	ids := map[string]map[string]bool{}
	sub, err := e.nc.Subscribe(wire.EventSubjectPrefix+">", func(m *nats.Msg) {
		var evs []wire.Event
		if m.Subject == wire.EventBatchSubject {
			_ = json.Unmarshal(m.Data, &evs)
		} else {
			var ev wire.Event
			if json.Unmarshal(m.Data, &ev) == nil {
				evs = append(evs, ev)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			if string(ev.Type) == typ {
				if ids[ev.ExecutionID] == nil {
					ids[ev.ExecutionID] = map[string]bool{}
				}
				ids[ev.ExecutionID][m.Header.Get(nats.MsgIdHdr)] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return func() map[string]int {
		_ = sub.Unsubscribe()
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for id, set := range ids {
			out[id] = len(set)
		}
		return out
	}, nil
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
	return e.cancelRunning(ctx, job)
}

// cancelRunning cancels job's execution once it runs, and judges how its
// attempt ended.
func (e *env) cancelRunning(ctx context.Context, job uuid.UUID) string {
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

func checkTimeout(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "timeout", Instruction{Do: DoWork, WorkMS: 10_000}, func(j *models.JobCreate) {
		one, t := 1, "1s"
		j.Retry, j.Timeout = &models.RetryPolicy{MaxAttempts: &one}, &t
	})
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	return timedOut(x, ok)
}

// timedOut judges an execution of one attempt allowed that should have
// been cut at its 1 s timeout.
func timedOut(x models.Execution, ok bool) string {
	as := attempts(x)
	switch {
	case !ok || len(as) == 0:
		return fmt.Sprintf("the execution did not end (state %q): the attempt was not cut at its timeout", x.State)
	case x.State != models.ExecutionStateDead || deref(as[0].Outcome) != models.AttemptOutcomeTimedOut:
		return fmt.Sprintf("the execution ended %s, its attempt %q; want dead, timed_out", x.State, deref(as[0].Outcome))
	case as[0].StartedAt != nil && as[0].FinishedAt.Sub(*as[0].StartedAt) > 2500*time.Millisecond:
		return fmt.Sprintf("the attempt ran %s for a 1 s timeout", as[0].FinishedAt.Sub(*as[0].StartedAt).Round(time.Millisecond))
	}
	return ""
}

func checkExecutionID(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "id", Instruction{Do: DoFail, FailAttempts: 1, EchoID: true}, func(j *models.JobCreate) {
		max, backoff := 2, "1s"
		j.Retry = &models.RetryPolicy{MaxAttempts: &max, InitialBackoff: &backoff}
	})
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	switch {
	case !ok || x.State != models.ExecutionStateSucceeded:
		return fmt.Sprintf("the execution did not succeed on its second attempt (state %q)", x.State)
	case deref(x.Output) != x.Id.String():
		return fmt.Sprintf("the second attempt was given the id %q, want the execution's %s", deref(x.Output), x.Id)
	}
	return ""
}

func checkLogs(ctx context.Context, e *env) string {
	lines := []string{"first", "second", "third", "fourth", "fifth"}
	job, why := e.job(ctx, "logs", Instruction{Do: DoSucceed, Log: lines}, nil)
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	if !ok || x.State != models.ExecutionStateSucceeded {
		return fmt.Sprintf("the execution did not succeed (state %q)", x.State)
	}
	var got []string
	for ctx.Err() == nil {
		r, err := e.api.GetExecutionLogsWithResponse(ctx, x.Id, nil)
		if err == nil && r.JSON200 != nil {
			got = got[:0]
			for _, l := range r.JSON200.Items {
				if l.Text != nil {
					got = append(got, strings.TrimSuffix(*l.Text, "\n"))
				}
			}
			if len(got) >= len(lines) {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(got, lines) {
		return fmt.Sprintf("the log holds %q, want %q", got, lines)
	}
	return ""
}

func checkRedelivery(ctx context.Context, e *env) string {
	// The execution's message as tock publishes it, seen on its subject.
	sub, err := e.nc.SubscribeSync(wire.ExecSubject(e.handler, domain.PriorityNormal))
	if err != nil {
		return fmt.Sprintf("the kit could not watch the handler's subject: %v", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	job, why := e.job(ctx, "redelivery", Instruction{Do: DoSucceed, Output: "once"}, nil)
	if why != "" {
		return why
	}
	m, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return fmt.Sprintf("the kit did not see the execution's message: %v", err)
	}
	x, ok := e.execution(ctx, job, final)
	if !ok || x.State != models.ExecutionStateSucceeded {
		return fmt.Sprintf("the execution did not succeed (state %q)", x.State)
	}
	// The same message again, as JetStream delivers it after a lost ack:
	// a new message id, the same execution, dispatch and attempt.
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	for k, v := range m.Header {
		if k != nats.MsgIdHdr {
			msg.Header[k] = v
		}
	}
	if _, err := e.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Sprintf("the kit could not publish the message again: %v", err)
	}
	time.Sleep(3 * time.Second)
	x, _ = e.execution(ctx, job, func(models.Execution) bool { return true })
	if as := attempts(x); len(as) != 1 || x.State != models.ExecutionStateSucceeded || deref(x.Output) != "once" {
		return fmt.Sprintf("after the same message again: %s with %d attempts, output %q; want succeeded, 1 attempt, \"once\"",
			x.State, len(as), deref(x.Output))
	}
	return ""
}

func checkMalformed(ctx context.Context, e *env) string {
	subject := wire.ExecSubject(e.handler, domain.PriorityNormal)
	for i, body := range []string{"not json", `{"execution_id": 42}`, `[]`, `{}`, ""} {
		msg := nats.NewMsg(subject)
		msg.Data = []byte(body)
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("conformance-malformed-%d-%s", i, uuid.NewString()))
		if _, err := e.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Sprintf("the kit could not publish a malformed message: %v", err)
		}
	}
	time.Sleep(2 * time.Second)
	if err, gone := e.exec.exited(); gone {
		return fmt.Sprintf("the executor exited on malformed messages (%v)", err)
	}
	// It still serves.
	if why := checkSuccess(ctx, e); why != "" {
		return "after malformed messages: " + why
	}
	return ""
}

func checkHeartbeats(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "heartbeats", Instruction{Do: DoWork, WorkMS: 40_000, Output: "long"}, func(j *models.JobCreate) {
		t := "2m"
		j.Timeout = &t
	})
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	as := attempts(x)
	switch {
	case !ok:
		return fmt.Sprintf("the execution did not end (state %q, %d attempts)", x.State, len(as))
	case len(as) != 1 || x.State != models.ExecutionStateSucceeded:
		return fmt.Sprintf("a 40 s attempt ended %s after %d attempts: its message was delivered again (no in-progress acks within the 30 s ack wait?)",
			x.State, len(as))
	}
	return ""
}

func checkSIGTERM(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "sigterm", Instruction{Do: DoWork, WorkMS: 3_000, Output: "finished"}, nil)
	if why != "" {
		return why
	}
	if x, ok := e.execution(ctx, job, func(x models.Execution) bool { return x.State == models.ExecutionStateRunning }); !ok {
		return fmt.Sprintf("the execution never ran (state %q)", x.State)
	}
	exited := e.exec.signal(syscall.SIGTERM, 30*time.Second)
	if err := e.exec.start(); err != nil {
		return fmt.Sprintf("the kit could not start the executor again: %v", err)
	}
	if !exited {
		return "the executor did not exit within 30 s of SIGTERM (killed)"
	}
	x, ok := e.execution(ctx, job, final)
	if !ok || x.State != models.ExecutionStateSucceeded || deref(x.Output) != "finished" {
		return fmt.Sprintf("after SIGTERM the execution ended %q (output %q, %d attempts); want it run to success", x.State,
			deref(x.Output), len(attempts(x)))
	}
	for i, a := range attempts(x) {
		if a.FinishedAt == nil {
			return fmt.Sprintf("attempt %d has no end recorded", i+1)
		}
	}
	return ""
}

func checkManyAtOnce(ctx context.Context, e *env) string {
	at := time.Now().Add(6 * time.Second).Truncate(time.Second).UTC()
	var jobs []uuid.UUID
	for i := range 20 {
		job, why := e.job(ctx, fmt.Sprintf("many%02d", i), Instruction{Do: DoSucceed, EchoID: true}, func(j *models.JobCreate) {
			j.Schedule = &models.Schedule{At: &at}
		})
		if why != "" {
			return why
		}
		jobs = append(jobs, job)
	}
	for _, job := range jobs {
		x, ok := e.execution(ctx, job, final)
		as := attempts(x)
		switch {
		case !ok:
			return fmt.Sprintf("an execution due at %s did not end (state %q)", at.Format(time.TimeOnly), x.State)
		case x.State != models.ExecutionStateSucceeded || len(as) != 1 || deref(x.Output) != x.Id.String():
			return fmt.Sprintf("execution %s ended %s after %d attempts with output %q; want succeeded once, given its own id",
				x.Id, x.State, len(as), deref(x.Output))
		}
	}
	return ""
}

// checkPriorities saturates the executor with lowJobs low-priority
// executions of 1 s each, due within 120 ms, then makes a high-priority
// one due half a second later: it must start before at least
// highAhead of the low ones (an executor that ignored priorities would
// start it after all of them). lowJobs saturates an executor running up
// to about 100 attempts at once.
func checkPriorities(ctx context.Context, e *env) string {
	const lowJobs, highAhead = 120, 20
	at := time.Now().Add(10 * time.Second).Truncate(time.Second).UTC() // time to create 121 jobs on a loaded machine
	low, high := models.PriorityLow, models.PriorityHigh
	var lows []uuid.UUID
	for i := range lowJobs {
		// A millisecond apart: executions due at one instant may be packed
		// into one message, which an executor takes whole.
		due := at.Add(time.Duration(i) * time.Millisecond)
		job, why := e.job(ctx, fmt.Sprintf("low%03d", i), Instruction{Do: DoWork, WorkMS: 1000}, func(j *models.JobCreate) {
			j.Schedule, j.Priority = &models.Schedule{At: &due}, &low
		})
		if why != "" {
			return why
		}
		lows = append(lows, job)
	}
	hat := at.Add(500 * time.Millisecond)
	hjob, why := e.job(ctx, "high", Instruction{Do: DoSucceed}, func(j *models.JobCreate) {
		j.Schedule, j.Priority = &models.Schedule{At: &hat}, &high
	})
	if why != "" {
		return why
	}
	hx, ok := e.execution(ctx, hjob, final)
	if !ok || len(attempts(hx)) == 0 || attempts(hx)[0].StartedAt == nil {
		return fmt.Sprintf("the high priority execution did not run (state %q)", hx.State)
	}
	hstart := *attempts(hx)[0].StartedAt
	after := 0
	for _, job := range lows {
		x, ok := e.execution(ctx, job, final)
		if !ok || len(attempts(x)) == 0 || attempts(x)[0].StartedAt == nil {
			return fmt.Sprintf("a low priority execution did not run (state %q)", x.State)
		}
		if attempts(x)[0].StartedAt.After(hstart) {
			after++
		}
	}
	if after < highAhead {
		return fmt.Sprintf("the high priority execution started after %d of the %d low ones due before it (only %d started after it, want at least %d): priorities ignored, or more than %d attempts at once",
			lowJobs-after, lowJobs, after, highAhead, lowJobs-highAhead)
	}
	return ""
}

func checkHandlerState(ctx context.Context, e *env) string {
	job, why := e.job(ctx, "state", Instruction{Do: DoSucceed, Output: "ok"}, nil)
	if why != "" {
		return why
	}
	x, ok := e.execution(ctx, job, final)
	if !ok || x.State != models.ExecutionStateSucceeded || x.ExecutorId == nil {
		return fmt.Sprintf("the execution did not succeed (state %q)", x.State)
	}
	kv, err := e.js.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		return fmt.Sprintf("the kit could not open %s: %v", wire.BreakerBucket, err)
	}
	// The entry of the executor that ran the attempt, under its key.
	key := wire.BreakerState{Key: e.handler, ExecutorID: *x.ExecutorId}.EntryKey()
	var first wire.BreakerState
	for {
		if ent, err := kv.Get(ctx, key); err == nil {
			if err := json.Unmarshal(ent.Value(), &first); err != nil {
				return fmt.Sprintf("the entry %s is not a handler state: %v", key, err)
			}
			break
		}
		select {
		case <-ctx.Done():
			keys, _ := kv.Keys(context.Background())
			return fmt.Sprintf("no entry %s (the handler %q and the executor id %q of its events, base64url each) in %s; its keys: %v",
				key, e.handler, *x.ExecutorId, wire.BreakerBucket, keys)
		case <-time.After(500 * time.Millisecond):
		}
	}
	switch {
	case first.Key != e.handler || first.Queue != e.handler || first.ExecutorID != *x.ExecutorId:
		return fmt.Sprintf("the entry says handler %q, queue %q, executor %q; want %q, %q, %q", first.Key, first.Queue, first.ExecutorID,
			e.handler, e.handler, *x.ExecutorId)
	case first.Breaker != wire.BreakerClosed && first.Breaker != wire.BreakerHalfOpen && first.Breaker != wire.BreakerOpen:
		return fmt.Sprintf("the entry's breaker is %q, want closed, half-open or open", first.Breaker)
	case first.InFlight < 0 || first.Limit < 0:
		return fmt.Sprintf("the entry says %d in flight of a limit of %d", first.InFlight, first.Limit)
	case time.Since(first.UpdatedAt) > time.Minute || first.UpdatedAt.After(time.Now().Add(time.Minute)):
		return fmt.Sprintf("the entry's updated_at %s is not now", first.UpdatedAt.Format(time.RFC3339))
	}
	// Refreshed (every 10 s, the entries expiring a minute after).
	for {
		var s wire.BreakerState
		if ent, err := kv.Get(ctx, key); err == nil && json.Unmarshal(ent.Value(), &s) == nil && s.UpdatedAt.After(first.UpdatedAt) {
			return ""
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("the entry was not written again within %s (want every 10 s: entries expire a minute after their last write)",
				time.Since(first.UpdatedAt).Round(time.Second))
		case <-time.After(time.Second):
		}
	}
}
