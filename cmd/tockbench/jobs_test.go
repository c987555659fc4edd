package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// Every mix's slots fire at distinct offsets that cover its period once:
// spread-hour's 3,600 slots each fire once an hour, one per second.
func TestSpreadSlots(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		mix    string
		period time.Duration
	}{{mixSpreadMinute, time.Minute}, {mixSpreadHour, time.Hour}} {
		seen := map[time.Time]int{}
		for slot := range slots(tc.mix) {
			ts, err := expectedTimes(cronOf(tc.mix, slot), from, from.Add(tc.period))
			if err != nil {
				t.Fatalf("%s slot %d: %v", tc.mix, slot, err)
			}
			if len(ts) != 1 {
				t.Fatalf("%s slot %d (%q) fires %d times in %s, want once", tc.mix, slot, cronOf(tc.mix, slot), len(ts), tc.period)
			}
			if prev, dup := seen[ts[0]]; dup {
				t.Fatalf("%s slots %d and %d both fire at %s", tc.mix, prev, slot, ts[0])
			}
			seen[ts[0]] = slot
		}
		if want := int(tc.period / time.Second); len(seen) != want {
			t.Errorf("%s: %d distinct seconds, want %d", tc.mix, len(seen), want)
		}
	}
}

// The bench's jobs are built as the API builds them: recurring ones
// active, their first run a second or more after their batch; same-second
// ones paused, without a next run, until arm.
func TestCreateJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mix := range []string{mixSpreadMinute, mixSameSecond} {
		b := &bench{st: storetest.New(t, 16), ns: "bench-" + mix, rep: &Report{}}
		b.Jobs, b.Mix, b.Handler = 3, mix, "tockbench-test"
		before := time.Now().Add(time.Second - 10*time.Millisecond)
		if err := b.createJobs(ctx); err != nil {
			t.Fatal(err)
		}
		list, _, err := b.st.ListJobs(ctx, store.JobFilter{Namespace: b.ns})
		if err != nil || len(list) != b.Jobs {
			t.Fatalf("%s: %d jobs, %v", mix, len(list), err)
		}
		for _, j := range list {
			switch {
			case j.Handler.Name != b.Handler || j.Priority != domain.PriorityNormal:
				t.Errorf("%s: job %s: handler %+v, priority %q", mix, j.Name, j.Handler, j.Priority)
			case mix == mixSameSecond && (j.State != domain.JobPaused || j.NextRunAt != nil):
				t.Errorf("%s: job %s %s, next run %v; want paused, none", mix, j.Name, j.State, j.NextRunAt)
			case mix != mixSameSecond && (j.State != domain.JobActive || j.NextRunAt == nil || j.NextRunAt.Before(before)):
				t.Errorf("%s: job %s %s, next run %v; want active, after %v", mix, j.Name, j.State, j.NextRunAt, before)
			}
		}
	}
}

// spread-once arms each job once, at the window's start plus its index
// mod the window's seconds, as the API would store a one-shot job: the
// scheduler reads the schedule back, and the exactly-once check expects
// the same instants.
func TestArm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &bench{st: storetest.New(t, 16), ns: "bench-once", rep: &Report{}}
	b.Jobs, b.Mix, b.Handler, b.Duration = 7, mixSpreadOnce, "tockbench-test", 3*time.Second
	if err := b.createJobs(ctx); err != nil {
		t.Fatal(err)
	}
	from := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	if err := b.arm(ctx, from, b.onceSlots()); err != nil {
		t.Fatal(err)
	}
	list, _, err := b.st.ListJobs(ctx, store.JobFilter{Namespace: b.ns})
	if err != nil || len(list) != b.Jobs {
		t.Fatalf("%d jobs, %v", len(list), err)
	}
	for _, j := range list {
		var i int
		if _, err := fmt.Sscanf(j.Name, "job-%d", &i); err != nil {
			t.Fatalf("job name %q: %v", j.Name, err)
		}
		want := from.Add(time.Duration(i%3) * time.Second)
		switch {
		case j.State != domain.JobActive || j.NextRunAt == nil || !j.NextRunAt.Equal(want):
			t.Errorf("job %s %s, next run %v; want active at %v", j.Name, j.State, j.NextRunAt, want)
		case j.Schedule.At == nil || !j.Schedule.At.Equal(want) || j.Schedule.Cron != "":
			t.Errorf("job %s: schedule %+v, want at %v", j.Name, j.Schedule, want)
		}
	}
	// Arming twice finds nothing paused: a clear error, not a silent no-op.
	if err := b.arm(ctx, from, b.onceSlots()); err == nil {
		t.Error("armed the jobs a second time")
	}
}

// Stored jobs are active one-shots due a year ahead, so they do not fire
// during a run; the ceiling search's removal of the newest jobs keeps
// them, and the run's clean-up deletes them with every row they have.
func TestStoredJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &bench{st: storetest.New(t, 16), ns: "bench-stored", rep: &Report{}}
	b.Jobs, b.StoredJobs, b.Mix, b.Handler = 4, 5, mixSpreadMinute, "tockbench-test"
	if err := b.createStored(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.createJobs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.removeJobsFrom(ctx, 2); err != nil {
		t.Fatal(err)
	}
	list, _, err := b.st.ListJobs(ctx, store.JobFilter{Namespace: b.ns, NamePrefix: "idle-"})
	if err != nil || len(list) != b.StoredJobs {
		t.Fatalf("%d stored jobs after removing the newest, %v; want %d", len(list), err, b.StoredJobs)
	}
	soon := time.Now().Add(300 * 24 * time.Hour)
	for _, j := range list {
		if j.State != domain.JobActive || j.NextRunAt == nil || j.NextRunAt.Before(soon) {
			t.Errorf("stored job %s %s, next run %v: want active, due a year ahead", j.Name, j.State, j.NextRunAt)
		}
	}
	rows := func(table string) int {
		var n int
		if err := b.st.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows("job_successes"); n != b.StoredJobs+2 {
		t.Errorf("%d job_successes rows after removing jobs 2 on, want %d", n, b.StoredJobs+2)
	}
	if err := b.deleteJobs(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"jobs", "job_names", "job_successes"} {
		if n := rows(table); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
}
