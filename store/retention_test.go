package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Retention drops exactly the day partitions past every namespace's
// retention that has rows in them, and keeps the rest.
func TestApplyRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, n) }
	if err := s.MaintainHistoryPartitions(ctx, day(-80), 80); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateNamespaceRetention(ctx, "long", 60*24*time.Hour); err != nil {
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

	// Dependency links of a dropped day (-70) and of a kept one (-40).
	if _, err := s.pool.Exec(ctx, `INSERT INTO execution_upstreams (execution_id, scheduled_for, job_id,
		upstream_execution_id, upstream_scheduled_for, upstream_job_id, upstream_state)
		VALUES ($1, $2, $1, $1, $2, $1, 'succeeded'), ($3, $4, $3, $3, $4, $3, 'succeeded')`,
		uuid.New(), day(-70), uuid.New(), day(-40)); err != nil {
		t.Fatal(err)
	}

	res, err := s.ApplyRetention(ctx, now, model.RetentionPolicy{Default: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM execution_upstreams"); n != 1 {
		t.Errorf("%d dependency links left, want the kept day's 1", n)
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
			if got := have[table][DayPartition(table, day(n))]; got != want {
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
	again, err := s.ApplyRetention(ctx, now, model.RetentionPolicy{Default: 30 * 24 * time.Hour})
	if err != nil || len(again.Dropped) != 0 {
		t.Errorf("second pass: %+v, %v", again, err)
	}
}

// With an Archive hook, each day past retention is archived, while its
// partitions are still there, then dropped; a day whose archiving fails
// stays, and so do the days after it, until a later pass archives them.
func TestRetentionArchivesBeforeDropping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, n) }
	if err := s.MaintainHistoryPartitions(ctx, day(-40), 9); err != nil { // days -41 to -31
		t.Fatal(err)
	}
	// An execution each day: an empty day is not archived (see the end).
	for n := -41; n <= -31; n++ {
		if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler) VALUES ($1, $2, 0, 'n', 'j', $3, 'succeeded', '{"type":"nats","subject":"a"}')`,
			uuid.New(), uuid.New(), day(n).Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(d time.Time) bool {
		have, err := partitionsOf(ctx, s.pool, "attempts")
		if err != nil {
			t.Fatal(err)
		}
		return have[DayPartition("attempts", d)]
	}
	policy := model.RetentionPolicy{Default: 30 * 24 * time.Hour}
	var archived []time.Time
	failOn := day(-38)
	policy.Archive = func(_ context.Context, d time.Time) error {
		if !exists(d) {
			t.Errorf("archiving %s after its partitions were dropped", d.Format(time.DateOnly))
		}
		if d.Equal(failOn) {
			return errors.New("disk full")
		}
		archived = append(archived, d)
		return nil
	}

	// Days -41, -40 and -39 are archived and dropped; -38 fails, so it
	// and the days after it stay.
	res, err := s.ApplyRetention(ctx, now, policy)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failed archive: got err %v, want it reported", err)
	}
	want := []time.Time{day(-41), day(-40), day(-39)}
	same := func(a, b []time.Time) bool { return slices.EqualFunc(a, b, time.Time.Equal) }
	if !same(res.Archived, want) || !same(res.Dropped, want) || !same(archived, want) {
		t.Errorf("first pass: archived %v, dropped %v (hook saw %v); want %v", res.Archived, res.Dropped, archived, want)
	}
	for n := -38; n <= -31; n++ {
		if !exists(day(n)) {
			t.Errorf("day %d dropped in a pass whose archiving failed before it", n)
		}
	}

	// The next pass, archiving again, picks up where it stopped.
	failOn = time.Time{}
	res, err = s.ApplyRetention(ctx, now, policy)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Archived) != 8 || !same(res.Archived, res.Dropped) || !res.Archived[0].Equal(day(-38)) {
		t.Errorf("second pass: archived %v, dropped %v; want the 8 days from -38", res.Archived, res.Dropped)
	}
	for n := -41; n <= -31; n++ {
		if exists(day(n)) {
			t.Errorf("day %d still there", n)
		}
	}

	// A day emptied by a pass whose drop did not get its lock is dropped
	// by the next pass without being archived again: that would replace
	// its files with empty ones.
	if err := s.MaintainHistoryPartitions(ctx, day(-35), 0); err != nil { // days -36 and -35
		t.Fatal(err)
	}
	archived = nil
	if res, err = s.ApplyRetention(ctx, now, policy); err != nil {
		t.Fatal(err)
	}
	if len(archived) != 0 || len(res.Archived) != 0 || !same(res.Dropped, []time.Time{day(-36), day(-35)}) {
		t.Errorf("an empty day: archived %v (hook saw %v), dropped %v; want dropped only", res.Archived, archived, res.Dropped)
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
	for _, j := range []*model.Job{old, recent, cron} {
		mustCreate(t, s, j)
		setState(t, s, j.ID, domain.JobCompleted, nil)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE jobs SET updated_at = now() - interval '8 days' WHERE id = ANY($1)",
		[]uuid.UUID{old.ID, cron.ID}); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*model.Job{old, recent} {
		if _, err := s.pool.Exec(ctx, "UPDATE job_successes SET last_success_at = now(), execution_id = $1 WHERE job_id = $1", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.ApplyRetention(ctx, time.Now(), model.RetentionPolicy{Default: 90 * 24 * time.Hour, CompletedJobs: 7 * 24 * time.Hour})
	if err != nil || res.CompletedJobs != 1 {
		t.Fatalf("retention: %+v, %v", res, err)
	}
	if _, err := s.GetJob(ctx, old.ID); err == nil {
		t.Error("the old completed one-shot job is still there")
	}
	for _, j := range []*model.Job{recent, cron} {
		if _, err := s.GetJob(ctx, j.ID); err != nil {
			t.Errorf("%s: %v", j.Name, err)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM job_names WHERE job_id = $1", old.ID); n != 0 {
		t.Errorf("the deleted job's name is still taken")
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1", old.ID); n != 0 {
		t.Errorf("the deleted job's last success is still there")
	}
	if n := count(t, s, "SELECT count(*) FROM job_successes WHERE job_id = $1", recent.ID); n != 1 {
		t.Errorf("the kept job's last success is gone")
	}
}

// EnsureHistoryPartitions creates the partitions of old days on demand, moving the
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
	if err := s.EnsureHistoryPartitions(ctx, at, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	part := DayPartition("executions", at)
	if n := count(t, s, "SELECT count(*) FROM "+part); n != 1 {
		t.Errorf("%d rows in %s, want the one moved there", n, part)
	}
	if n := count(t, s, "SELECT count(*) FROM executions_default"); n != 0 {
		t.Errorf("%d rows left in the default partition", n)
	}
	// Known now: a second call does not look again.
	if err := s.EnsureHistoryPartitions(ctx, at); err != nil {
		t.Fatal(err)
	}
}

// One maintenance pass at a time: a node that finds the lock held skips
// its pass, one that waits runs after it, and the lock is free again
// after a pass, even one that failed.
func TestMaintenanceLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Two nodes: a pool's connections are separate sessions, as two
	// nodes' are.
	a := newStore(t)
	b := a
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Maintenance(ctx, false, func(context.Context) error {
			close(inside)
			<-release
			return errors.New("pass failed")
		})
		done <- err
	}()
	<-inside
	ran, err := b.Maintenance(ctx, false, func(context.Context) error { t.Error("ran while another pass held the lock"); return nil })
	if ran || err != nil {
		t.Errorf("try while held: ran %v, %v", ran, err)
	}
	waited := make(chan bool, 1)
	go func() {
		ran, err := b.Maintenance(ctx, true, func(context.Context) error { return nil })
		if err != nil {
			t.Error(err)
		}
		waited <- ran
	}()
	select {
	case <-waited:
		t.Fatal("a waiting pass ran while another held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "pass failed") {
		t.Errorf("the pass's error: %v", err)
	}
	if !<-waited {
		t.Error("the waiting pass did not run")
	}
	if ran, err := a.Maintenance(ctx, false, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("after both: ran %v, %v", ran, err)
	}
}

// A drop whose lock another transaction holds does not queue writes on
// executions behind it: it waits dropLockWait at a time and tries again,
// and drops the day once the lock is free. (With one long lock wait, the
// insert below would wait for the holding transaction's end.)
func TestDropDoesNotQueueWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	old := now.Truncate(24*time.Hour).AddDate(0, 0, -40)
	if err := s.EnsureHistoryPartitions(ctx, old); err != nil {
		t.Fatal(err)
	}
	// A reader of today's executions, holding the parent table's lock
	// (not the old day's) for 2.5 s: the TRUNCATE goes through, the DROP
	// waits.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM executions WHERE scheduled_for >= $1", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := s.ApplyRetention(ctx, now, model.RetentionPolicy{Default: 30 * 24 * time.Hour})
		if err == nil && !slices.ContainsFunc(res.Dropped, old.Equal) {
			err = fmt.Errorf("dropped %v, want %s", res.Dropped, old.Format(time.DateOnly))
		}
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // the drop is trying by now
	began := time.Now()
	if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
		state, handler) VALUES ($1, $2, 0, 'n', 'j', $3, 'succeeded', '{"type":"nats","subject":"a"}')`,
		uuid.New(), uuid.New(), now); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("an insert waited %s behind the drop", took.Round(time.Millisecond))
	}
	time.Sleep(2500*time.Millisecond - time.Since(began))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The TRUNCATE that empties a day before its drop takes the partitions'
// locks without waiting (and tries again later): a reader of the day's
// partition delays it, but another reader of the partition, or a
// recorder, does not queue behind it. (With a lock wait, the second
// read below would wait for the first reader's end.)
func TestTruncateDoesNotQueueReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	old := now.Truncate(24*time.Hour).AddDate(0, 0, -40)
	if err := s.EnsureHistoryPartitions(ctx, old); err != nil {
		t.Fatal(err)
	}
	putHistory(t, s, historyRow{"n", old.Add(time.Hour), domain.ExecSucceeded, 1})
	// A reader of the old day, holding its partitions' locks for 1.5 s.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM "+DayPartition("executions", old)+", "+DayPartition("attempts", old)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	done := make(chan error, 1)
	go func() {
		res, err := s.ApplyRetention(ctx, now, model.RetentionPolicy{Default: 30 * 24 * time.Hour})
		if err == nil && !slices.ContainsFunc(res.Dropped, old.Equal) {
			err = fmt.Errorf("dropped %v, want %s", res.Dropped, old.Format(time.DateOnly))
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the truncate is trying by now
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT count(*) FROM "+DayPartition("executions", old))
		return err
	})
	if err != nil {
		t.Errorf("a reader of the day behind the truncate: %v", err)
	}
	time.Sleep(1500*time.Millisecond - time.Since(began))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
