package depends_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/depends"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// env is a store with every bucket claimed by node "n", the jobs use
// cases over it, and a resolver for all the buckets.
type env struct {
	t      *testing.T
	st     *store.Store
	svc    *jobs.Service
	res    *depends.Resolver
	epochs map[int]int64
	now    time.Time
}

const buckets = 4

func newEnv(t *testing.T) *env {
	t.Helper()
	st := storetest.New(t, buckets)
	svc, err := jobs.New(jobs.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, svc: svc, epochs: map[int]int64{}}
	for b := range buckets {
		if err := st.ClaimBucket(context.Background(), b, "n", 1); err != nil {
			t.Fatal(err)
		}
		e.epochs[b] = 1
	}
	all := []int{0, 1, 2, 3}
	e.res, err = depends.New(depends.Config{Store: st, Owned: func() []int { return all }, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) create(nj jobs.NewJob) *model.Job {
	e.t.Helper()
	if nj.Handler.Type == "" {
		nj.Handler = domain.Handler{Type: domain.HandlerNATS, Subject: "work.x"}
	}
	if nj.Namespace == "" {
		nj.Namespace = "default"
	}
	j, err := e.svc.Create(context.Background(), nj)
	if err != nil {
		e.t.Fatalf("create %s: %v", nj.Name, err)
	}
	return j
}

// fire fires job j's run at `at` as a scanner would (plan's Waits and
// Chains from the stored job) and returns the executions to dispatch.
func (e *env) fire(j *model.Job, at time.Time) []*model.Execution {
	e.t.Helper()
	j, err := e.st.GetJob(context.Background(), j.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	next := at.Add(time.Hour)
	// The job's next run is moved to at first, as if it were due then.
	if _, err := e.st.Pool().Exec(context.Background(), "UPDATE jobs SET next_run_at = $2 WHERE id = $1", j.ID, at); err != nil {
		e.t.Fatal(err)
	}
	f := store.Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next, Runs: []model.Run{{At: at}},
		Waits: j.Depends != nil, Chains: j.Chains}
	res, err := e.st.Fire(context.Background(), "n", e.epochs, []store.Firing{f})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Executions
}

// end records the end of execution id's first attempt.
func (e *env) end(id uuid.UUID, typ domain.EventType) {
	e.t.Helper()
	storetest.Record(e.t, e.st, model.AttemptEvent{ID: id, Attempt: 1, Executor: "x", At: time.Now(), Type: typ,
		Final: typ == domain.EventFailed})
}

func (e *env) pass() {
	e.t.Helper()
	if _, err := e.res.Pass(context.Background(), []int{0, 1, 2, 3}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) exec(job *model.Job, at time.Time) *model.Execution {
	e.t.Helper()
	x, err := e.st.GetExecution(context.Background(), domain.ExecutionID(job.ID, at))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

func (e *env) skips(job *model.Job) []model.SkippedRange {
	e.t.Helper()
	out, _, err := e.st.ListSkippedRuns(context.Background(), job.ID, 100, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func every(s string) schedule.Spec { return schedule.Spec{Cron: s} }

// A fan-in: c waits for a and b at the same time, runs once both
// succeeded (recording both), whatever order and however often the
// resolver looks; a's failure at another time skips c's run then, naming
// a's execution.
func TestFanIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	b := e.create(jobs.NewJob{Name: "b", Schedule: every("* * * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}, {Job: b.ID.String(), On: "success"}}}})
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	e.now = t1
	xa, xb := e.fire(a, t1), e.fire(b, t1)
	if got := e.fire(c, t1); len(got) != 0 {
		t.Fatalf("c's waiting run was handed out for dispatch: %v", got)
	}
	if x := e.exec(c, t1); x == nil || x.State != domain.ExecWaiting {
		t.Fatalf("c at t1: %+v, want waiting", x)
	}
	e.pass()
	e.end(xa[0].ID, domain.EventSucceeded)
	e.pass()
	if x := e.exec(c, t1); x.State != domain.ExecWaiting {
		t.Fatalf("c ran with only a done: %s", x.State)
	}
	e.end(xb[0].ID, domain.EventSucceeded)
	e.pass()
	e.pass() // a second decision changes nothing
	x := e.exec(c, t1)
	if x.State != domain.ExecQueued || x.NextAttemptAt == nil || x.NextAttemptAt.Year() > 3000 {
		t.Fatalf("c at t1 after a and b: %s, next attempt %v; want queued, due now", x.State, x.NextAttemptAt)
	}
	ups, err := e.st.ListExecutionUpstreams(context.Background(), x.ID)
	if err != nil || len(ups) != 2 {
		t.Fatalf("c's upstreams: %+v, %v", ups, err)
	}
	rel, err := e.st.ListReleasedExecutions(context.Background(), xa[0].ID)
	if err != nil || len(rel) != 1 || rel[0].ExecutionID != x.ID {
		t.Fatalf("what a released: %+v, %v", rel, err)
	}
	// The outbox now hands c's run out, once.
	out, err := e.st.ListRedispatches(context.Background(), []int{0, 1, 2, 3}, 100, time.Now().Add(time.Hour))
	if err != nil || len(out) != 1 || out[0].ID != x.ID {
		t.Fatalf("outbox after the release: %d executions, %v", len(out), err)
	}

	t2 := t1.Add(time.Second)
	e.now = t2
	xa, xb = e.fire(a, t2), e.fire(b, t2)
	e.fire(c, t2)
	e.end(xa[0].ID, domain.EventFailed)
	e.pass()
	if x := e.exec(c, t2); x != nil {
		t.Fatalf("c at t2 after a's failure: %s, want skipped", x.State)
	}
	sk := e.skips(c)
	if len(sk) != 1 || sk[0].Reason != domain.SkipDependency || !sk[0].First.Equal(t2) ||
		!strings.Contains(sk[0].Detail, xa[0].ID.String()) || !strings.Contains(sk[0].Detail, "dead") {
		t.Fatalf("c's skips: %+v", sk)
	}
	_ = xb
}

// An upstream with no run at the downstream's time (another schedule, or
// a skipped one) resolves the wait at once; on_upstream_skipped: run lets
// it run instead.
func TestUpstreamWithoutTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("*/2 * * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	d := e.create(jobs.NewJob{Name: "d", Schedule: every("* * * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}, OnUpstreamSkipped: domain.DependRun}})
	t1 := time.Date(2026, 11, 28, 10, 0, 1, 0, time.UTC) // a runs at even seconds only
	e.now = t1
	e.fire(a, t1.Add(-time.Second))
	// a's next run is past t1 and it has no run at t1.
	if _, err := e.st.Pool().Exec(context.Background(), "UPDATE jobs SET next_run_at = $2 WHERE id = $1", a.ID, t1.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	e.fire(c, t1)
	e.fire(d, t1)
	e.pass()
	if sk := e.skips(c); len(sk) != 1 || sk[0].Reason != domain.SkipDependency || !strings.Contains(sk[0].Detail, "has no run") {
		t.Fatalf("c's skips: %+v", sk)
	}
	if x := e.exec(d, t1); x == nil || x.State != domain.ExecQueued {
		t.Fatalf("d at t1: %+v, want queued", x)
	}
}

// wait_timeout: skip (the default) records dependency_timeout; run lets
// it run. Before the timeout it waits.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	min := time.Minute
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}, WaitTimeout: &min}})
	d := e.create(jobs.NewJob{Name: "d", Schedule: every("* * * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}, WaitTimeout: &min, OnTimeout: domain.DependRun}})
	// A rule that asks for execution.dependency_timeout.
	ch, err := e.st.CreateChannel(context.Background(), model.Channel{Namespace: "default", Name: "ops", Type: model.ChannelWebhook,
		URL: "https://notify.invalid/ops"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateRule(context.Background(), model.Rule{Namespace: "default", Name: "waits",
		Events: []string{domain.NotifyExecutionDependencyTimeout}, Channels: []uuid.UUID{ch.ID}, GroupInterval: time.Minute, FailingAfter: 1}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	e.now = t1
	e.fire(a, t1) // never ends
	e.fire(c, t1)
	e.fire(d, t1)
	e.now = t1.Add(59 * time.Second)
	e.pass()
	if x := e.exec(c, t1); x == nil || x.State != domain.ExecWaiting {
		t.Fatalf("c before its timeout: %+v", x)
	}
	e.now = t1.Add(time.Minute)
	e.pass()
	if sk := e.skips(c); len(sk) != 1 || sk[0].Reason != domain.SkipDependencyTimeout || !strings.Contains(sk[0].Detail, "is queued") {
		t.Fatalf("c's skips: %+v", sk)
	}
	if x := e.exec(d, t1); x == nil || x.State != domain.ExecQueued {
		t.Fatalf("d after its timeout: %+v, want queued (on_timeout run)", x)
	}
	// One event each, decided once however often the resolver looks.
	e.pass()
	rows, err := e.st.Pool().Query(context.Background(), `SELECT job_name, detail->>'then' FROM notification_events
		WHERE kind = 'execution.dependency_timeout' ORDER BY job_name`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var name, then string
		if err := rows.Scan(&name, &then); err != nil {
			t.Fatal(err)
		}
		got = append(got, name+" "+then)
	}
	if strings.Join(got, ", ") != "c skipped, d ran" {
		t.Fatalf("dependency_timeout events: %v", got)
	}
}

// latest_within: the newest upstream run that ended in the window before
// the time decides; with none, the first to end after it.
func TestLatestWithin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("0 0 * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("0 30 * * * *"),
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}, Match: domain.MatchLatestWithin, Within: time.Hour}})
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	xa := e.fire(a, t0)
	e.end(xa[0].ID, domain.EventSucceeded) // ends now, after c's first time below
	// c at t0-30m: a's run ended after it, within the wait: it runs.
	e.now = time.Now()
	e.fire(c, t0.Add(-30*time.Minute))
	e.pass()
	if x := e.exec(c, t0.Add(-30*time.Minute)); x == nil || x.State != domain.ExecQueued {
		t.Fatalf("c waiting for a run to end after it: %+v", x)
	}
	// c at now+30m: a's success ended within the hour before: it runs.
	t2 := time.Now().UTC().Add(30 * time.Minute).Truncate(time.Millisecond)
	e.fire(c, t2)
	e.now = t2
	e.pass()
	if x := e.exec(c, t2); x == nil || x.State != domain.ExecQueued || x.NextAttemptAt == nil || !x.NextAttemptAt.Equal(t2) {
		t.Fatalf("c with a success within the hour: %+v; want queued, published at its time (never early)", x)
	}
	// c three hours on: a's success is out of the window: it waits.
	t3 := t2.Add(3 * time.Hour)
	e.fire(c, t3)
	e.now = t3
	e.pass()
	if x := e.exec(c, t3); x == nil || x.State != domain.ExecWaiting {
		t.Fatalf("c with no success within the hour: %+v", x)
	}
}

// A chain (no schedule) gets one waiting run per upstream run, at its
// time, and runs once that run succeeded.
func TestChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	if c.NextRunAt != nil || c.State != domain.JobActive || c.Depends == nil || !c.Depends.Chain {
		t.Fatalf("chain as created: %+v", c)
	}
	for i := range 3 {
		at := time.Date(2026, 11, 28, 10, 0, i, 0, time.UTC)
		e.now = at
		xa := e.fire(a, at)
		if x := e.exec(c, at); x == nil || x.State != domain.ExecWaiting {
			t.Fatalf("chain at %s after a fired: %+v", at, x)
		}
		e.fire(a, at) // fired again (a retry): still one run of c
		if i != 1 {
			e.end(xa[0].ID, domain.EventSucceeded)
		} else {
			e.end(xa[0].ID, domain.EventFailed)
		}
		e.pass()
		x := e.exec(c, at)
		switch {
		case i != 1 && (x == nil || x.State != domain.ExecQueued):
			t.Fatalf("chain at %s after a succeeded: %+v", at, x)
		case i == 1 && x != nil:
			t.Fatalf("chain at %s after a died: %+v, want skipped", at, x)
		}
	}
	if sk := e.skips(c); len(sk) != 1 {
		t.Fatalf("chain's skips: %+v", sk)
	}
}

// What cannot be: a cycle (named), an unknown upstream, a foreign
// namespace without leave to read it, deleting a job others depend on.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	b := e.create(jobs.NewJob{Name: "b", Schedule: every("* * * * * *"), Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"), Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "b"}}}})
	_, err := e.svc.Update(ctx, a.ID, jobs.Patch{Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "c"}}}})
	if f := jobs.Faults(err); len(f) != 1 || f[0].Field != "depends_on" || !strings.Contains(f[0].Message, "a → b → c → a") {
		t.Fatalf("a cycle: %v", err)
	}
	_, err = e.svc.Create(ctx, jobs.NewJob{Name: "x", Schedule: every("* * * * * *"),
		Handler: domain.Handler{Type: domain.HandlerNATS, Subject: "w"}, Namespace: "default",
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "nope"}}}})
	if f := jobs.Faults(err); len(f) != 1 || f[0].Field != "depends_on[0].job" || !strings.Contains(f[0].Message, `"nope"`) {
		t.Fatalf("an unknown upstream: %v", err)
	}
	other := e.create(jobs.NewJob{Name: "o", Namespace: "other", Schedule: every("* * * * * *")})
	_, err = e.svc.Create(ctx, jobs.NewJob{Name: "y", Schedule: every("* * * * * *"),
		Handler: domain.Handler{Type: domain.HandlerNATS, Subject: "w"}, Namespace: "default",
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "other/o"}}}})
	var fe *jobs.ForeignError
	if !errors.As(err, &fe) || fe.Namespace != "other" {
		t.Fatalf("a foreign upstream without leave: %v", err)
	}
	y, err := e.svc.Create(ctx, jobs.NewJob{Name: "y", Schedule: every("* * * * * *"),
		Handler: domain.Handler{Type: domain.HandlerNATS, Subject: "w"}, Namespace: "default",
		Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: other.ID.String()}}},
		MayRead: func(ns string) bool { return ns == "other" }})
	if err != nil || y.Depends.On[0].Job != other.ID {
		t.Fatalf("a foreign upstream with leave: %v", err)
	}
	_, err = e.svc.Delete(ctx, b.ID)
	var de *store.DependentsError
	if !errors.As(err, &de) || len(de.Dependents) != 1 || de.Dependents[0].Name != "c" {
		t.Fatalf("deleting b: %v", err)
	}
	_, unlinked, err := e.svc.DeleteUnlinking(ctx, b.ID)
	if err != nil || len(unlinked) != 1 || unlinked[0].ID != c.ID {
		t.Fatalf("deleting b with force: %v, %v", unlinked, err)
	}
	c2, err := e.st.GetJob(ctx, c.ID)
	if err != nil || c2.Depends != nil {
		t.Fatalf("c after its only upstream went: %+v, %v", c2.Depends, err)
	}
	// Renaming is not possible; ids keep the edges: a's graph.
	edges, err := e.st.ListJobEdges(ctx, a.ID, 100)
	if err != nil || len(edges) != 0 {
		t.Fatalf("a's edges after b went: %+v, %v", edges, err)
	}
}

// Preview says which upstream run each run waits for; a chain's runs are
// its upstreams' scheduled times.
func TestPreviewDependents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.create(jobs.NewJob{Name: "a", Schedule: every("*/2 * * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"), Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	from := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	p, err := e.svc.Preview(ctx, c.ID, from, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Fires) != 4 || len(p.Waits) != 4 {
		t.Fatalf("preview: %d fires, %d waits", len(p.Fires), len(p.Waits))
	}
	for i, f := range p.Fires {
		w := p.Waits[i][0]
		even := f.At.Second()%2 == 0
		if (w.At != nil) != even || (even && !strings.Contains(w.Note, "after a's run at the same time")) ||
			(!even && !strings.Contains(w.Note, "has no run at this time")) {
			t.Errorf("fire %s: %+v", f.At, w)
		}
	}
	chain := e.create(jobs.NewJob{Name: "ch", Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	p, err = e.svc.Preview(ctx, chain.ID, from, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Fires) != 3 || !p.Fires[0].At.Equal(from.Add(2*time.Second)) || !p.Fires[2].At.Equal(from.Add(6*time.Second)) {
		t.Fatalf("chain preview: %+v", p.Fires)
	}
}

// Two resolvers deciding the same waits at once (a bucket changing
// owner), in opposite orders: each wait is decided once, by one of them,
// and neither fails. (Deadlock is what the decisions' lock in id order
// rules out; this run did not produce one without it either.)
func TestConcurrentDecisionsApplyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var ds []model.WaitDecision
	for i := range 60 {
		c := e.create(jobs.NewJob{Name: fmt.Sprintf("c%02d", i), Schedule: every("* * * * * *"),
			Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
		e.fire(c, t1)
		d := model.WaitDecision{Waiting: model.Waiting{ID: domain.ExecutionID(c.ID, t1), JobID: c.ID, Bucket: c.Bucket,
			Namespace: "default", JobName: c.Name, ScheduledFor: t1}}
		if i%2 == 0 {
			d.Release = true
		} else {
			d.Reason, d.Detail = domain.SkipDependency, "test"
		}
		ds = append(ds, d)
	}
	rev := slices.Clone(ds)
	slices.Reverse(rev)
	var wg sync.WaitGroup
	res := make([]model.WaitResult, 2)
	errs := make([]error, 2)
	for i, list := range [][]model.WaitDecision{ds, rev} {
		wg.Go(func() { res[i], errs[i] = e.st.ApplyWaitDecisions(ctx, list) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent decisions: %v, %v", errs[0], errs[1])
	}
	if rel, sk := res[0].Released+res[1].Released, res[0].Skipped+res[1].Skipped; rel != 30 || sk != 30 {
		t.Fatalf("released %d and skipped %d in all, want 30 and 30", rel, sk)
	}
}

// A waiting execution can be cancelled; the resolver then leaves it
// cancelled, even once its upstream ends as it asks.
func TestCancelWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(jobs.NewJob{Name: "a", Schedule: every("* * * * * *")})
	c := e.create(jobs.NewJob{Name: "c", Schedule: every("* * * * * *"), Depends: &jobs.DependsSpec{On: []jobs.DependRef{{Job: "a"}}}})
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	e.now = t1
	xa := e.fire(a, t1)
	e.fire(c, t1)
	x, err := e.st.CancelExecution(context.Background(), domain.ExecutionID(c.ID, t1))
	if err != nil || x.State != domain.ExecCancelled || x.NextAttemptAt != nil {
		t.Fatalf("cancelling a waiting execution: %+v, %v", x, err)
	}
	e.end(xa[0].ID, domain.EventSucceeded)
	e.pass()
	if x := e.exec(c, t1); x.State != domain.ExecCancelled {
		t.Fatalf("after its upstream succeeded: %s, want still cancelled", x.State)
	}
}
