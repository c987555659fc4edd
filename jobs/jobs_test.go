package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// fakeClock is a database clock that says what the test sets.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	err   error
	reads int
}

func (c *fakeClock) Fresh(context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.t, c.err
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fakeExecutors records the cancellations it is told of, or fails.
type fakeExecutors struct {
	mu   sync.Mutex
	told []uuid.UUID
	err  error
}

func (x *fakeExecutors) Cancel(_ context.Context, id uuid.UUID) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		return x.err
	}
	x.told = append(x.told, id)
	return nil
}

// t0 is the fake clock's usual reading.
var t0 = time.Date(2026, 3, 2, 9, 15, 30, 250e6, time.UTC)

func newService(t *testing.T, st Store, cfg Config) *Service {
	t.Helper()
	cfg.Store = st
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func fixed(at time.Time) func() (time.Time, error) {
	return func() (time.Time, error) { return at, nil }
}

func validJob(name string) NewJob {
	return NewJob{
		Namespace: DefaultNamespace,
		Name:      name,
		Schedule:  schedule.Spec{Cron: "0 30 9 * * MON-FRI", Timezone: "Europe/Berlin"},
		Handler:   domain.Handler{Type: domain.HandlerHTTP, URL: "https://example.com/hook"},
	}
}

func fields(err error) string {
	var out []string
	for _, f := range Faults(err) {
		out = append(out, f.Field)
	}
	return strings.Join(out, " ")
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Store is nil") {
		t.Errorf("New without a store: %v", err)
	}
	st := struct{ Store }{}
	_, err := New(Config{Store: st, DefaultRetry: domain.RetryPolicy{MaxAttempts: 500, Jitter: "some"}})
	if err == nil || !strings.Contains(err.Error(), "max_attempts") || !strings.Contains(err.Error(), "jitter") {
		t.Errorf("New with a nonsensical default retry policy: %v", err)
	}
	if cfg := (Config{Store: st}).WithDefaults(); cfg.Clock == nil {
		t.Error("WithDefaults left the clock nil")
	}
}

// Every fault comes back at once, in a fixed order: the first run's last.
func TestBuildReportsEveryFault(t *testing.T) {
	t.Parallel()
	svc := newService(t, struct{ Store }{}, Config{Clock: &fakeClock{}})
	past := t0.Add(-time.Hour)
	nj := NewJob{
		Name:      "a b",
		Namespace: "",
		Schedule:  schedule.Spec{At: &past},
		Handler:   domain.Handler{Type: domain.HandlerNATS, Subject: "tock.exec", URL: "https://x"},
		Retry:     domain.RetryPolicy{MaxAttempts: -1, InitialBackoff: "soon"},
		Priority:  "urgent",
		Timeout:   25 * time.Hour,
	}
	_, err := svc.Build(nj, fixed(t0))
	want := "name namespace handler.subject handler.url retry.max_attempts retry.initial_backoff priority timeout schedule.at"
	if got := fields(err); got != want {
		t.Fatalf("faults %q, want %q (%v)", got, want, err)
	}
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "schedule.at: must be in the future") {
		t.Errorf("error %v", err)
	}

	// An invalid schedule is reported without reading the clock.
	nj = validJob("x")
	nj.Schedule.Cron = "every day"
	reads := 0
	_, err = svc.Build(nj, func() (time.Time, error) { reads++; return t0, nil })
	if fields(err) != "schedule.cron" || reads != 0 {
		t.Errorf("bad cron: %v, %d clock reads", err, reads)
	}
	// A clock that fails is the error.
	nj = validJob("x")
	boom := errors.New("clock down")
	if _, err := svc.Build(nj, func() (time.Time, error) { return time.Time{}, boom }); !errors.Is(err, boom) {
		t.Errorf("failing clock: %v", err)
	}
}

func TestBuildFillsDefaults(t *testing.T) {
	t.Parallel()
	def := domain.RetryPolicy{MaxAttempts: 3, InitialBackoff: "2s", Jitter: domain.JitterEqual}
	svc := newService(t, struct{ Store }{}, Config{Clock: &fakeClock{}, DefaultRetry: def})
	nj := validJob("nightly")
	nj.Handler.Method = "put"
	nj.Retry = domain.RetryPolicy{MaxAttempts: 5}
	j, err := svc.Build(nj, fixed(t0))
	if err != nil {
		t.Fatal(err)
	}
	sched, _ := schedule.Compile(nj.Schedule)
	first, _ := sched.First(t0)
	wantRetry := domain.RetryPolicy{MaxAttempts: 5, InitialBackoff: "2s", Jitter: domain.JitterEqual}
	if j.State != domain.JobActive || j.NextRunAt == nil || !j.NextRunAt.Equal(first) || j.Handler.Method != "PUT" ||
		j.Priority != domain.PriorityNormal || j.Retry != wantRetry {
		t.Errorf("built %+v (next %v), want active, next %v, method PUT, priority normal, retry %+v", j, j.NextRunAt, first, wantRetry)
	}
	nj.Handler.Method = ""
	if j, _ := svc.Build(nj, fixed(t0)); j.Handler.Method != "POST" {
		t.Errorf("default method %q", j.Handler.Method)
	}

	nj.Paused = true
	j, err = svc.Build(nj, func() (time.Time, error) { t.Error("a paused job read the clock"); return t0, nil })
	if err != nil || j.State != domain.JobPaused || j.NextRunAt != nil {
		t.Errorf("paused: %+v, %v", j, err)
	}
}

func TestCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	clk := &fakeClock{t: t0}
	svc := newService(t, st, Config{Clock: clk})

	nj := validJob("hourly")
	nj.Schedule = schedule.Spec{In: "90s"}
	nj.Payload = json.RawMessage(`{"a":1}`)
	j, err := svc.Create(ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetJob(ctx, j.ID)
	if err != nil || got.State != domain.JobActive || !got.NextRunAt.Equal(t0.Add(90*time.Second).Truncate(time.Millisecond)) ||
		string(got.Payload) != `{"a": 1}` {
		t.Fatalf("stored %+v, %v", got, err)
	}
	if _, err := svc.Create(ctx, nj); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a taken name: %v, want ErrConflict", err)
	}
	nj.Name = ""
	if _, err := svc.Create(ctx, nj); fields(err) != "name" {
		t.Errorf("no name: %v", err)
	}

	// A batch: the jobs Build made, each with its own result.
	a, _ := svc.Build(validJob("batch-a"), fixed(t0))
	b, _ := svc.Build(validJob("hourly"), fixed(t0))
	errs, err := svc.CreateBatch(ctx, []*model.Job{a, b})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], store.ErrConflict) {
		t.Errorf("batch: %v, %v", errs, err)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	clk := &fakeClock{t: t0}
	def := domain.RetryPolicy{MaxAttempts: 4}
	svc := newService(t, st, Config{Clock: clk, DefaultRetry: def})
	j, err := svc.Create(ctx, validJob("patched"))
	if err != nil {
		t.Fatal(err)
	}

	// A bad change is refused before the job is read.
	bad := Patch{Handler: &domain.Handler{Type: "smtp"}, Timeout: ptr(-time.Second)}
	if _, err := svc.Update(ctx, uuid.New(), bad); fields(err) != "handler.type timeout" {
		t.Errorf("bad patch of a missing job: %v", err)
	}
	if err := svc.CheckPatch(ctx, bad); fields(err) != "handler.type timeout" {
		t.Errorf("CheckPatch: %v", err)
	}
	if _, err := svc.Update(ctx, uuid.New(), Patch{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("patch of a missing job: %v", err)
	}
	// Nothing to change writes nothing.
	same, err := svc.Update(ctx, j.ID, Patch{})
	if err != nil || same.Version != j.Version {
		t.Errorf("empty patch: version %d → %d, %v", j.Version, same.Version, err)
	}

	// A new schedule runs from the clock; the same one changes nothing.
	clk.set(t0.Add(time.Hour))
	in := schedule.Spec{In: "10m"}
	got, err := svc.Update(ctx, j.ID, Patch{Schedule: &in, Retry: &domain.RetryPolicy{}, Timeout: ptr(time.Duration(0))})
	want := t0.Add(time.Hour + 10*time.Minute)
	if err != nil || !got.NextRunAt.Equal(want) || got.Retry != def || got.Timeout != 0 {
		t.Fatalf("new schedule: next %v retry %+v, %v; want %v and the default policy", got.NextRunAt, got.Retry, err, want)
	}
	clk.set(t0.Add(2 * time.Hour))
	if got, _ = svc.Update(ctx, j.ID, Patch{Schedule: &in}); !got.NextRunAt.Equal(want) {
		t.Errorf("the same schedule moved the next run to %v", got.NextRunAt)
	}

	// A schedule that differs only in its window, max_runs or jitter is
	// a new one (they were once taken for the same, and the change lost).
	for _, sp := range []schedule.Spec{
		{Cron: "@hourly", Jitter: "30s"},
		{Cron: "@hourly", Jitter: "30s", MaxRuns: 5},
		{Cron: "@hourly", Jitter: "30s", MaxRuns: 5, StartAt: ptr(t0.Add(48 * time.Hour))},
		{Cron: "@hourly", Jitter: "30s", MaxRuns: 5, StartAt: ptr(t0.Add(48 * time.Hour)), EndAt: ptr(t0.Add(96 * time.Hour))},
	} {
		if got, err = svc.Update(ctx, j.ID, Patch{Schedule: &sp}); err != nil || !sameJSON(got.Schedule, sp) {
			t.Errorf("patch to %+v stored %+v, %v", sp, got.Schedule, err)
		}
	}

	// A paused job keeps waiting for Resume.
	if _, err := svc.Pause(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	cron := schedule.Spec{Cron: "@hourly"}
	if got, err = svc.Update(ctx, j.ID, Patch{Schedule: &cron}); err != nil || got.State != domain.JobPaused || got.NextRunAt != nil {
		t.Errorf("new schedule of a paused job: %s, next %v, %v", got.State, got.NextRunAt, err)
	}
}

// staleStore loses the race for the job its first n updates.
type staleStore struct {
	*store.Store
	mu       sync.Mutex
	n, calls int
}

func (s *staleStore) UpdateJob(ctx context.Context, j *model.Job) error {
	s.mu.Lock()
	s.calls++
	stale := s.calls <= s.n
	s.mu.Unlock()
	if stale {
		return fmt.Errorf("store: update job %s: %w", j.ID, store.ErrStale)
	}
	return s.Store.UpdateJob(ctx, j)
}

func TestUpdateStartsOverWhenStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	j, err := newService(t, st, Config{Clock: &fakeClock{t: t0}}).Create(ctx, validJob("raced"))
	if err != nil {
		t.Fatal(err)
	}
	racy := &staleStore{Store: st, n: 3}
	svc := newService(t, racy, Config{Clock: &fakeClock{t: t0}})
	if got, err := svc.Pause(ctx, j.ID); err != nil || got.State != domain.JobPaused || racy.calls != 4 {
		t.Errorf("after 3 lost races: %v, %v, %d updates", got, err, racy.calls)
	}
	racy.n, racy.calls = 1000, 0
	if _, err := svc.Resume(ctx, j.ID, false); !errors.Is(err, store.ErrStale) || racy.calls != maxStale+1 {
		t.Errorf("always stale: %v after %d updates, want ErrStale after %d", err, racy.calls, maxStale+1)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	clk := &fakeClock{t: t0}
	svc := newService(t, st, Config{Clock: clk})
	j, err := svc.Create(ctx, validJob("weekdays"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Pause(ctx, j.ID)
	if err != nil || p.State != domain.JobPaused || p.NextRunAt != nil {
		t.Fatalf("paused: %+v, %v", p, err)
	}
	if again, err := svc.Pause(ctx, j.ID); err != nil || again.Version != p.Version {
		t.Errorf("pausing twice wrote the job: %v", err)
	}
	if p.PausedNextRunAt == nil || !p.PausedNextRunAt.Equal(*j.NextRunAt) {
		t.Fatalf("paused job keeps %v as the run it paused at, want %v", p.PausedNextRunAt, j.NextRunAt)
	}
	// Resumed a week later: it picks up at the run it paused at, and the
	// runs of the pause (before now) are to be skipped as paused.
	week := t0.Add(7 * 24 * time.Hour)
	clk.set(week)
	r, err := svc.Resume(ctx, j.ID, false)
	if err != nil || r.State != domain.JobActive || !r.NextRunAt.Equal(*j.NextRunAt) || r.SkipBefore == nil ||
		!r.SkipBefore.Equal(week) || r.PausedNextRunAt != nil {
		t.Fatalf("resumed: %s next %v skip before %v paused at %v, %v; want active at %v, skipping before %v",
			r.State, r.NextRunAt, r.SkipBefore, r.PausedNextRunAt, err, j.NextRunAt, week)
	}
	if again, err := svc.Resume(ctx, j.ID, false); err != nil || again.Version != r.Version {
		t.Errorf("resuming an active job wrote it: %v", err)
	}
	// With catch-up the runs of the pause are left to the missed-run
	// policy: nothing is marked to skip.
	if _, err := svc.Pause(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if r, err = svc.Resume(ctx, j.ID, true); err != nil || !r.NextRunAt.Equal(*j.NextRunAt) || r.SkipBefore != nil {
		t.Fatalf("resumed with catch-up: next %v skip before %v, %v", r.NextRunAt, r.SkipBefore, err)
	}
	// A job created paused has no run to pick up: its next run is from now.
	cp := validJob("created-paused")
	cp.Paused = true
	c, err := svc.Create(ctx, cp)
	if err == nil {
		c, err = svc.Resume(ctx, c.ID, false)
	}
	sched, _ := schedule.Compile(cp.Schedule)
	if want, _ := sched.First(week); err != nil || !c.NextRunAt.Equal(want) || c.SkipBefore != nil {
		t.Fatalf("created paused, resumed: next %v skip before %v, %v; want %v", c.NextRunAt, c.SkipBefore, err, want)
	}

	// A one-shot job whose moment passed while paused runs on resume.
	clk.set(t0)
	at := t0.Add(time.Hour)
	once := validJob("once")
	once.Schedule = schedule.Spec{At: &at}
	o, err := svc.Create(ctx, once)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Pause(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2*time.Hour + 123456*time.Microsecond))
	if o, err = svc.Resume(ctx, o.ID, false); err != nil || !o.NextRunAt.Equal(t0.Add(2*time.Hour+123*time.Millisecond)) {
		t.Errorf("resumed one-shot: next %v, %v", o.NextRunAt, err)
	}

	// A completed job can be neither paused nor resumed.
	if _, err := st.Pool().Exec(ctx, "UPDATE jobs SET state = 'completed', next_run_at = NULL WHERE id = $1", o.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Pause(ctx, o.ID); !errors.Is(err, ErrCompleted) {
		t.Errorf("pause of a completed job: %v", err)
	}
	if _, err := svc.Resume(ctx, o.ID, false); !errors.Is(err, ErrCompleted) {
		t.Errorf("resume of a completed job: %v", err)
	}

	// Every second of 02:30 on the second Sunday of March in New York, by
	// the wall clock: it ran until 2006, but since 2007 clocks spring
	// forward over that hour.
	dst := validJob("dst")
	dst.Schedule = schedule.Spec{Cron: "* 30 2 ? 3 SUN#2", Timezone: "America/New_York"}
	dst.Paused = true
	clk.set(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := svc.Create(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	clk.set(time.Date(2007, 1, 1, 0, 0, 0, 0, time.UTC))
	var fe *schedule.FieldError
	if _, err := svc.Resume(ctx, l.ID, false); !errors.Is(err, ErrNoNextRun) || !errors.As(err, &fe) || fe.Field != "schedule.cron" {
		t.Errorf("resume without a run left: %v", err)
	}
	if _, err := svc.Pause(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pause of a missing job: %v", err)
	}
}

func TestExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	// The real clock: executions live in daily partitions around now.
	bare := newService(t, st, Config{})
	j, err := bare.Create(ctx, validJob("manual"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := bare.CreateManualExecution(ctx, j.ID)
	if err != nil || !e.Manual || e.State != domain.ExecQueued || e.JobID != j.ID {
		t.Fatalf("run now: %+v, %v", e, err)
	}
	if _, err := bare.CreateManualExecution(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run of a missing job: %v", err)
	}

	// Without executors nothing is cancelled.
	if _, err := bare.Cancel(ctx, e.ID); !errors.Is(err, ErrNoExecutors) {
		t.Errorf("cancel without executors: %v", err)
	}
	if got, _ := st.GetExecution(ctx, e.ID); got.State != domain.ExecQueued {
		t.Errorf("a refused cancel left the execution %s", got.State)
	}
	// Executors unreachable: recorded, not announced; again: announced.
	x := &fakeExecutors{err: errors.New("nats: timeout")}
	svc := newService(t, st, Config{Executors: x})
	c, err := svc.Cancel(ctx, e.ID)
	if !errors.Is(err, ErrNotAnnounced) || c == nil || c.State != domain.ExecCancelled {
		t.Errorf("cancel, executors down: %+v, %v", c, err)
	}
	if got, _ := st.GetExecution(ctx, e.ID); got.State != domain.ExecCancelled {
		t.Errorf("after an unannounced cancel the execution is %s", got.State)
	}
	x.err = nil
	if _, err := svc.Cancel(ctx, e.ID); err != nil || len(x.told) != 1 || x.told[0] != e.ID {
		t.Errorf("cancel again: %v, told %v", err, x.told)
	}

	// Only the dead are re-driven; a succeeded execution is not cancelled.
	done, err := svc.CreateManualExecution(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Record(t, st, model.AttemptEvent{ID: done.ID, Attempt: 1, Executor: "x", At: time.Now(), Type: domain.EventSucceeded})
	if _, err := svc.Cancel(ctx, done.ID); !errors.Is(err, store.ErrFinished) {
		t.Errorf("cancel of a succeeded execution: %v", err)
	}
	if _, err := svc.Redrive(ctx, done.ID); !errors.Is(err, store.ErrNotDead) {
		t.Errorf("re-drive of a succeeded execution: %v", err)
	}
	dead, err := svc.CreateManualExecution(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Record(t, st, model.AttemptEvent{ID: dead.ID, Attempt: 1, Executor: "x", At: time.Now(),
		Type: domain.EventFailed, Final: true, Error: "boom"})
	if r, err := svc.Redrive(ctx, dead.ID); err != nil || r.State != domain.ExecQueued {
		t.Errorf("re-drive of a dead execution: %+v, %v", r, err)
	}

	if ns, err := svc.Delete(ctx, j.ID); err != nil || ns != j.Namespace {
		t.Fatalf("delete: namespace %q, %v; want %q", ns, err, j.Namespace)
	}
	if _, err := svc.Delete(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
