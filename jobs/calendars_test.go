package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// A calendar's change moves the next runs of the jobs that name it,
// directly or through a calendar that extends it, back to their
// schedule's first run after now, only when that is sooner; jobs of
// other calendars, and jobs whose next run is their schedule's own, stay.
func TestCalendarChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t, 16)
	clk := &fakeClock{t: t0}
	svc := newService(t, st, Config{Clock: clk})
	for _, c := range []struct{ name, spec string }{
		{"base", `{"dates": ["2026-03-03"]}`},
		{"wide", `{"extends": ["base"], "weekly": [{"days": ["SUN"]}]}`},
		{"other", `{"dates": ["2026-03-04"]}`},
	} {
		if err := st.CreateCalendar(ctx, &model.Calendar{Namespace: DefaultNamespace, Name: c.name, Spec: json.RawMessage(c.spec)}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name, cal string) *model.Job {
		nj := validJob(name)
		nj.Schedule = schedule.Spec{Cron: "0 0 * * * *"}
		nj.Calendars = []string{cal}
		j, err := svc.Create(ctx, nj)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	direct, through, other, own := create("direct", "base"), create("through", "wide"), create("other", "other"), create("own", "base")
	// The scanner moved three of them a day ahead (past an excluded day).
	later := t0.Truncate(time.Hour).Add(25 * time.Hour)
	for _, j := range []*model.Job{direct, through, other} {
		j.NextRunAt = &later
		if err := st.UpdateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := svc.CalendarChanged(ctx, DefaultNamespace, "base")
	if err != nil || moved != 2 {
		t.Fatalf("moved %d, %v; want direct and through", moved, err)
	}
	first := t0.Truncate(time.Hour).Add(time.Hour)
	for _, c := range []struct {
		j    *model.Job
		want time.Time
	}{{direct, first}, {through, first}, {other, later}, {own, first}} {
		got, err := st.GetJob(ctx, c.j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.NextRunAt == nil || !got.NextRunAt.Equal(c.want) {
			t.Errorf("%s: next run %v, want %s", got.Name, got.NextRunAt, c.want)
		}
	}
	if users, err := svc.CalendarUsers(ctx, DefaultNamespace, "base", 10); err != nil || len(users) != 2 {
		t.Errorf("base's users: %v, %v; want direct and own", users, err)
	}
	// A job without calendars stores no calendar policy.
	j, err := svc.Create(ctx, validJob("plain"))
	if err != nil || len(j.Policy.Calendars) != 0 || j.Policy.OnExcluded != "" {
		t.Fatalf("plain job: %+v, %v", j.Policy, err)
	}
}
