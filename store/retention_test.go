package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// Retention drops exactly the day partitions past every namespace's
// retention that has rows in them, and keeps the rest.
func TestApplyRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, n) }
	if err := s.MaintainPartitions(ctx, day(-80), 80); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetNamespaceRetention(ctx, "long", 60*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	put := func(n int, ns string) {
		job := uuid.New()
		at := day(n).Add(time.Hour)
		if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler, created_at) VALUES ($1, $2, 0, $3, 'j', $4, 'succeeded', '{"type":"nats","subject":"a"}', $4)`,
			domain.ExecutionID(job, at), job, ns, at); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO attempts (execution_id, scheduled_for, number) VALUES ($1, $2, 1)`,
			domain.ExecutionID(job, at), at); err != nil {
			t.Fatal(err)
		}
	}
	put(-70, "short")
	put(-50, "short")
	put(-50, "long")
	put(-40, "long")
	put(-20, "short")
	if _, err := s.pool.Exec(ctx, `INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, namespace, job_name)
		VALUES ($1, $2, $2, 1, 'missed', 'short', 'j'), ($3, $2, $2, 1, 'missed', 'long', 'j')`,
		uuid.New(), day(-45), uuid.New()); err != nil {
		t.Fatal(err)
	}

	res, err := s.ApplyRetention(ctx, now, 30*24*time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]map[string]bool{}
	for _, table := range dailyTables {
		if have[table], err = partitionsOf(ctx, s.pool, table); err != nil {
			t.Fatal(err)
		}
	}
	for n := -80; n <= 0; n++ {
		// Kept: younger than 30 days (ended less than 30 days ago), or
		// holding rows of "long" (60 days) that ended less than 60 ago.
		want := n >= -30 || n == -50 || n == -40
		for _, table := range dailyTables {
			if got := have[table][dayPartition(table, day(n))]; got != want {
				t.Errorf("%s of day %d (%s): kept %v, want %v", table, n, day(n).Format(time.DateOnly), got, want)
			}
		}
	}
	if len(res.Kept) != 2 || len(res.Dropped) != 49 {
		t.Errorf("kept %d days, dropped %d; want 2 and 49", len(res.Kept), len(res.Dropped))
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE namespace = 'long'"); n != 2 {
		t.Errorf("%d executions of the longer-lived namespace left, want 2", n)
	}
	if res.SkippedRanges != 1 || count(t, s, "SELECT count(*) FROM skipped_runs WHERE namespace = 'long'") != 1 {
		t.Errorf("skipped ranges: deleted %d, want the short namespace's one", res.SkippedRanges)
	}

	// A second pass finds nothing more to drop.
	again, err := s.ApplyRetention(ctx, now, 30*24*time.Hour, 0)
	if err != nil || len(again.Dropped) != 0 {
		t.Errorf("second pass: %+v, %v", again, err)
	}
}

// Completed one-shot jobs are deleted once they completed long enough
// ago; recurring ones and recent ones stay.
func TestRetentionDeletesCompletedOneShotJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	old, recent, cron := testJob("old-once", nil), testJob("recent-once", nil), testJob("cron-done", nil)
	old.Schedule.Cron, recent.Schedule.Cron = "", ""
	for _, j := range []*Job{old, recent, cron} {
		mustCreate(t, s, j)
		setState(t, s, j.ID, domain.JobCompleted, nil)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE jobs SET updated_at = now() - interval '8 days' WHERE id = ANY($1)",
		[]uuid.UUID{old.ID, cron.ID}); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyRetention(ctx, time.Now(), 90*24*time.Hour, 7*24*time.Hour)
	if err != nil || res.CompletedJobs != 1 {
		t.Fatalf("retention: %+v, %v", res, err)
	}
	if _, err := s.GetJob(ctx, old.ID); err == nil {
		t.Error("the old completed one-shot job is still there")
	}
	for _, j := range []*Job{recent, cron} {
		if _, err := s.GetJob(ctx, j.ID); err != nil {
			t.Errorf("%s: %v", j.Name, err)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM job_names WHERE job_id = $1", old.ID); n != 0 {
		t.Errorf("the deleted job's name is still taken")
	}
}

// EnsureDays creates the partitions of old days on demand, moving the
// rows that waited in the DEFAULT partition into their day.
func TestEnsureDaysCreatesOldDaysOnDemand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := time.Now().UTC().AddDate(0, 0, -10)
	job := uuid.New()
	if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
		state, handler, created_at) VALUES ($1, $2, 0, 'n', 'j', $3, 'queued', '{"type":"nats","subject":"a"}', now())`,
		domain.ExecutionID(job, at), job, at); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM executions_default"); n != 1 {
		t.Fatalf("setup: %d rows in the default partition", n)
	}
	if err := s.EnsureDays(ctx, at, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	part := dayPartition("executions", at)
	if n := count(t, s, "SELECT count(*) FROM "+part); n != 1 {
		t.Errorf("%d rows in %s, want the one moved there", n, part)
	}
	if n := count(t, s, "SELECT count(*) FROM executions_default"); n != 0 {
		t.Errorf("%d rows left in the default partition", n)
	}
	// Known now: a second call does not look again.
	if err := s.EnsureDays(ctx, at); err != nil {
		t.Fatal(err)
	}
}
