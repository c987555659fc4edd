package jobs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

func TestPreviewSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &fakeClock{t: t0}
	svc := newService(t, struct{ Store }{}, Config{Clock: clk})

	// What Create would compute first, then what the scanner's Next would.
	sp := schedule.Spec{Cron: "0 30 2 * * *", Timezone: "Europe/Berlin"}
	p, err := svc.PreviewSpec(ctx, sp, time.Time{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	j, err := svc.Build(NewJob{Namespace: "d", Name: "n", Schedule: sp, Handler: domain.Handler{Type: domain.HandlerCustom, Name: "x"}}, fixed(t0))
	if err != nil {
		t.Fatal(err)
	}
	sched, _ := schedule.Compile(sp)
	second, _ := sched.Next(*j.NextRunAt)
	if !p.From.Equal(t0) || len(p.Fires) != 3 || !p.Fires[0].At.Equal(*j.NextRunAt) || !p.Fires[1].At.Equal(second) ||
		p.Location.String() != "Europe/Berlin" || p.Job != nil {
		t.Errorf("preview from %v: %+v; created job's next run %v, then %v", t0, p, j.NextRunAt, second)
	}

	// Berlin's 2026 spring-forward day, from a given time.
	from := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	if p, err = svc.PreviewSpec(ctx, sp, from, 1); err != nil || len(p.Fires) != 1 || p.Fires[0].DST != schedule.DSTMoved ||
		p.Fires[0].Local.Format(time.RFC3339) != "2026-03-29T03:00:00+02:00" {
		t.Errorf("spring forward: %+v, %v", p, err)
	}

	past := t0.Add(-time.Hour)
	for _, tc := range []struct {
		spec   schedule.Spec
		n      int
		fields string
	}{
		{sp, 0, "count"},
		{sp, MaxPreviewCount + 1, "count"},
		{schedule.Spec{Cron: "0 0 25 * * *"}, 10, "schedule.cron"},
		{schedule.Spec{Cron: "nope"}, 0, "schedule.cron count"},
		{schedule.Spec{At: &past}, 10, "schedule.at"},
	} {
		if _, err := svc.PreviewSpec(ctx, tc.spec, time.Time{}, tc.n); fields(err) != tc.fields {
			t.Errorf("PreviewSpec(%+v, %d): %v, want faults on %s", tc.spec, tc.n, err, tc.fields)
		}
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	clk := &fakeClock{t: t0}
	svc := newService(t, st, Config{Clock: clk})

	nj := validJob("fall-back")
	nj.Schedule = schedule.Spec{Cron: "0 30 1 * * *", Timezone: "America/New_York"}
	j, err := svc.Create(ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Preview(ctx, j.ID, time.Time{}, 2)
	if err != nil || len(p.Fires) != 2 || !p.Fires[0].At.Equal(*j.NextRunAt) || p.Job == nil || p.Job.ID != j.ID {
		t.Fatalf("preview from now: %+v, %v; job's next run %v", p, err, j.NextRunAt)
	}
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	if p, err = svc.Preview(ctx, j.ID, from, 2); err != nil || p.Fires[0].DST != schedule.DSTRepeated || p.Fires[0].Occurrence != 1 ||
		p.Fires[1].DST != "" {
		t.Errorf("fall back: %+v, %v", p, err)
	}

	// Paused: the schedule all the same.
	if _, err := svc.Pause(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if p, err = svc.Preview(ctx, j.ID, time.Time{}, 1); err != nil || len(p.Fires) != 1 || !p.Fires[0].At.Equal(*j.NextRunAt) ||
		p.Job.State != domain.JobPaused {
		t.Errorf("paused: %+v, %v", p, err)
	}

	// A one-shot job: its run while active, the run Resume would give it
	// while paused, its last run once completed.
	at := t0.Add(time.Hour)
	once := validJob("once")
	once.Schedule = schedule.Spec{At: &at}
	o, err := svc.Create(ctx, once)
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Hour)
	if p, err = svc.Preview(ctx, o.ID, later, 5); err != nil || len(p.Fires) != 1 || !p.Fires[0].At.Equal(at) {
		t.Errorf("active one-shot: %+v, %v", p, err)
	}
	if _, err := svc.Pause(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	if p, err = svc.Preview(ctx, o.ID, later, 5); err != nil || len(p.Fires) != 1 || !p.Fires[0].At.Equal(later) {
		t.Errorf("paused one-shot whose moment passed: %+v, %v; want %v", p, err, later)
	}
	if _, err := st.Pool().Exec(ctx, "UPDATE jobs SET state = 'completed', next_run_at = NULL, last_run_at = $2 WHERE id = $1", o.ID, at); err != nil {
		t.Fatal(err)
	}
	if p, err = svc.Preview(ctx, o.ID, later, 5); err != nil || len(p.Fires) != 1 || !p.Fires[0].At.Equal(at) {
		t.Errorf("completed one-shot: %+v, %v", p, err)
	}

	if _, err := svc.Preview(ctx, uuid.New(), time.Time{}, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := svc.Preview(ctx, uuid.New(), time.Time{}, 0); fields(err) != "count" {
		t.Errorf("unknown job, count 0: %v, want a fault on count", err)
	}
}

// A job's preview stops at the end of its window and lists no more runs
// than max_runs leaves it.
func TestPreviewBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	svc := newService(t, st, Config{Clock: &fakeClock{t: t0}})
	end := t0.Add(5 * time.Hour)
	windowed := validJob("windowed")
	windowed.Schedule = schedule.Spec{Cron: "0 0 * * * *", EndAt: &end}
	limited := validJob("limited")
	limited.Schedule = schedule.Spec{Cron: "0 0 * * * *", MaxRuns: 4}
	for _, tt := range []struct {
		nj   NewJob
		runs int64
		want int
	}{{windowed, 0, 5}, {limited, 0, 4}, {limited, 3, 1}} {
		nj := tt.nj
		nj.Name = fmt.Sprintf("%s-%d", nj.Name, tt.runs)
		j, err := svc.Create(ctx, nj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Pool().Exec(ctx, "UPDATE jobs SET runs = $2 WHERE id = $1", j.ID, tt.runs); err != nil {
			t.Fatal(err)
		}
		p, err := svc.Preview(ctx, j.ID, time.Time{}, 100)
		if err != nil || len(p.Fires) != tt.want {
			t.Errorf("%s after %d runs: %d runs previewed, %v; want %d", nj.Name, tt.runs, len(p.Fires), err, tt.want)
		}
	}
}
