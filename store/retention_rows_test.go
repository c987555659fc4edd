package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// historyRow is an execution for the retention tests to insert.
type historyRow struct {
	ns    string
	at    time.Time
	state domain.ExecState
	// attempts is how many attempts rows it has.
	attempts int
}

// putHistory inserts rows (their day partitions must exist) and returns
// their ids.
func putHistory(t *testing.T, s *Store, rows ...historyRow) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	for _, r := range rows {
		job := uuid.New()
		id := domain.ExecutionID(job, r.at)
		if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, attempts, handler, created_at) VALUES ($1, $2, 0, $3, 'j', $4, $5, $6, '{"type":"nats","subject":"a"}', $4)`,
			id, job, r.ns, r.at, string(r.state), r.attempts); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= r.attempts; n++ {
			if _, err := s.pool.Exec(ctx, `INSERT INTO attempts (execution_id, scheduled_for, number) VALUES ($1, $2, $3)`,
				id, r.at, n); err != nil {
				t.Fatal(err)
			}
			// and a chunk of log per attempt
			if _, err := s.pool.Exec(ctx, `INSERT INTO execution_logs (execution_id, scheduled_for, attempt, seq, stream,
				"offset", bytes, at, lines) VALUES ($1, $2, $3, 1, 'stdout', 0, 3, $2, '[]')`, id, r.at, n); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// A namespace with a 1-day retention has none of its ended executions
// older than a day after a pass, nor their attempts, while another
// namespace's rows on the same days stay (they keep the days: the
// cluster's retention is 90 days); its executions that have not ended
// stay until they do. Deleted in batches of 2: several at the same
// scheduled time cross a batch's end.
func TestRetentionDeletesAShorterNamespaceFromSharedDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	if err := s.MaintainHistoryPartitions(ctx, now.AddDate(0, 0, -10), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateNamespaceRetention(ctx, "short", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	day := 24 * time.Hour
	var rows []historyRow
	for _, at := range []time.Time{ago(4 * day), ago(36 * time.Hour), ago(25 * time.Hour), ago(23 * time.Hour), ago(time.Hour)} {
		rows = append(rows, historyRow{"other", at, domain.ExecSucceeded, 0})
	}
	rows = append(rows,
		// Gone: older than a day, ended; five at one time, one dead with
		// three attempts, one cancelled.
		historyRow{"short", ago(4 * day), domain.ExecSucceeded, 0},
		historyRow{"short", ago(4 * day), domain.ExecSucceeded, 0},
		historyRow{"short", ago(4 * day), domain.ExecDead, 3},
		historyRow{"short", ago(4 * day), domain.ExecSucceeded, 2},
		historyRow{"short", ago(4 * day), domain.ExecCancelled, 0},
		historyRow{"short", ago(36 * time.Hour), domain.ExecSucceeded, 0},
		historyRow{"short", ago(25 * time.Hour), domain.ExecDead, 2},
	)
	kept := []historyRow{
		// Kept: younger than a day, or not ended (running, or failed and
		// waiting for its retry).
		{"short", ago(23 * time.Hour), domain.ExecSucceeded, 0},
		{"short", ago(time.Hour), domain.ExecSucceeded, 0},
		{"short", ago(4 * day), domain.ExecRunning, 0},
		{"short", ago(4 * day), domain.ExecFailed, 2},
		{"short", ago(4 * day), domain.ExecQueued, 0},
	}
	putHistory(t, s, rows...)
	keptIDs := putHistory(t, s, kept...)
	otherAttempts := putHistory(t, s, historyRow{"other", ago(4 * day), domain.ExecDead, 3})

	policy := model.RetentionPolicy{Default: 90 * day, DeleteBatch: 2, DeletePause: -1}
	res, err := s.ApplyRetention(ctx, now, policy)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 7 || res.DeletedAttempts != 7 || res.DeletedLogChunks != 7 {
		t.Errorf("deleted %d executions, %d attempts and %d log chunks; want 7, 7 and 7", res.Deleted, res.DeletedAttempts, res.DeletedLogChunks)
	}
	// The logs of what is kept stay: one chunk per attempt left.
	if a, l := count(t, s, "SELECT count(*) FROM attempts"), count(t, s, "SELECT count(*) FROM execution_logs"); a != l || a == 0 {
		t.Errorf("%d attempts and %d log chunks left; want one chunk per attempt", a, l)
	}
	// (The days without rows, past every retention, were dropped.)
	if n := count(t, s, "SELECT count(*) FROM executions WHERE namespace = 'short' AND scheduled_for < $1", ago(day)); n != 3 {
		t.Errorf("%d executions of the 1-day namespace older than a day, want the 3 not ended", n)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE id = ANY($1)", keptIDs); n != len(kept) {
		t.Errorf("%d of the %d executions to keep are there", n, len(kept))
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE namespace = 'other'"); n != 6 {
		t.Errorf("%d executions of the other namespace, want its 6", n)
	}
	if n := count(t, s, "SELECT count(*) FROM attempts"); n != 2+3 {
		t.Errorf("%d attempts rows, want the failed execution's 2 and the other namespace's 3", n)
	}
	if n := count(t, s, "SELECT count(*) FROM attempts WHERE execution_id = $1", otherAttempts[0]); n != 3 {
		t.Errorf("the other namespace's dead execution has %d attempts rows, want 3", n)
	}

	// The next pass finds nothing more; an hour later, the execution of
	// 23 hours ago is past a day too.
	if res, err := s.ApplyRetention(ctx, now, policy); err != nil || res.Deleted != 0 {
		t.Errorf("second pass: deleted %d, %v", res.Deleted, err)
	}
	if res, err := s.ApplyRetention(ctx, now.Add(90*time.Minute), policy); err != nil || res.Deleted != 1 {
		t.Errorf("an hour and a half later: deleted %d, %v; want 1", res.Deleted, err)
	}

	// When each namespace's oldest ended execution goes: the 1-day
	// namespace's a day after it was scheduled (23 hours ago, then 1 hour
	// ago); the other's with its day, 90 days after the day ended.
	list, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{
		"short": ago(time.Hour).Add(day),
		"other": ago(4 * day).Truncate(day).Add(day + 90*day),
	}
	for _, n := range list {
		got := n.HistoryExpiresAt(90 * day)
		if w, ok := want[n.Name]; !ok || got == nil || !got.Equal(w) {
			t.Errorf("%s: history expires at %v, want %v", n.Name, got, w)
		}
	}
}

// On a day kept by a namespace with a longer retention than the
// cluster's, the namespaces on the cluster's retention lose their rows
// once the day has ended more than it ago (as a drop would have
// dropped them), the day being listed as kept; a namespace whose own
// retention is longer than the cluster's but not yet past keeps its own.
func TestRetentionDeletesTheClustersFromLongerKeptDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, n).Add(time.Hour) }
	if err := s.MaintainHistoryPartitions(ctx, day(-40), 30); err != nil {
		t.Fatal(err)
	}
	for ns, d := range map[string]int{"long": 365, "middle": 45} {
		if _, err := s.UpdateNamespaceRetention(ctx, ns, time.Duration(d)*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	putHistory(t, s,
		historyRow{"long", day(-40), domain.ExecSucceeded, 0},
		historyRow{"middle", day(-40), domain.ExecSucceeded, 0},
		historyRow{"plain", day(-40), domain.ExecSucceeded, 1},
		historyRow{"plain", day(-40), domain.ExecSucceeded, 0},
		historyRow{"other", day(-40), domain.ExecDead, 2},
		// Younger than the cluster's 30 days: stays.
		historyRow{"long", day(-20), domain.ExecSucceeded, 0},
		historyRow{"plain", day(-20), domain.ExecSucceeded, 0},
	)
	res, err := s.ApplyRetention(ctx, now, model.RetentionPolicy{Default: 30 * 24 * time.Hour, DeletePause: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 3 || res.DeletedAttempts != 3 || res.DeletedLogChunks != 3 {
		t.Errorf("deleted %d executions, %d attempts, %d log chunks; want 3, 3 and 3", res.Deleted, res.DeletedAttempts, res.DeletedLogChunks)
	}
	if !slices.EqualFunc(res.Kept, []time.Time{day(-40).Truncate(24 * time.Hour)}, time.Time.Equal) {
		t.Errorf("kept %v, want day -40", res.Kept)
	}
	var left []string
	rows, err := s.pool.Query(ctx, "SELECT namespace || '@' || (scheduled_for < $1)::text FROM executions ORDER BY 1", day(-30))
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"long@false", "long@true", "middle@true", "plain@false"}; !slices.Equal(left, want) {
		t.Errorf("left (namespace@older than 30 days): %v, want %v", left, want)
	}
}

// With ArchiveRows, a namespace's executions are written out before they
// are deleted, and only those it wrote are deleted; an archiving failure
// deletes nothing, and nothing of a later day either, until a later pass.
func TestRetentionArchivesRowsBeforeDeleting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, n) }
	if err := s.MaintainHistoryPartitions(ctx, day(-5), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateNamespaceRetention(ctx, "short", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	older := putHistory(t, s,
		historyRow{"short", day(-4).Add(time.Hour), domain.ExecSucceeded, 0},
		historyRow{"short", day(-4).Add(2 * time.Hour), domain.ExecDead, 2},
		historyRow{"other", day(-4).Add(time.Hour), domain.ExecSucceeded, 0},
	)
	later := putHistory(t, s, historyRow{"short", day(-3).Add(time.Hour), domain.ExecSucceeded, 0},
		historyRow{"other", day(-3).Add(time.Hour), domain.ExecSucceeded, 0})
	var seen []model.RowSelection
	fail := true
	policy := model.RetentionPolicy{Default: 90 * 24 * time.Hour, DeletePause: -1,
		Archive: func(_ context.Context, d time.Time) error {
			if !d.Before(day(-4)) {
				t.Errorf("day %s archived whole", d.Format(time.DateOnly))
			}
			return nil
		},
		ArchiveRows: func(_ context.Context, sel model.RowSelection) ([]model.ExecutionKey, error) {
			seen = append(seen, sel)
			if fail {
				return nil, errors.New("disk full")
			}
			// The rows are still there while they are archived.
			if n := count(t, s, "SELECT count(*) FROM executions WHERE namespace = $1 AND scheduled_for < $2",
				sel.Namespace, sel.Before); n == 0 {
				t.Errorf("archiving %+v: no rows", sel)
			}
			if sel.Day.Equal(day(-4)) {
				// Written: the first of the day's two only.
				return []model.ExecutionKey{{ID: older[0], ScheduledFor: day(-4).Add(time.Hour)}}, nil
			}
			return []model.ExecutionKey{{ID: later[0], ScheduledFor: day(-3).Add(time.Hour)}}, nil
		},
	}
	// Days archived, rows not: nothing deleted.
	daysOnly := policy
	daysOnly.ArchiveRows = nil
	if res, err := s.ApplyRetention(ctx, now, daysOnly); err == nil || res.Deleted != 0 {
		t.Errorf("archiving days but not rows: deleted %d, %v; want nothing and an error", res.Deleted, err)
	}
	res, err := s.ApplyRetention(ctx, now, policy)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failed archive: got err %v, want it reported", err)
	}
	if res.Deleted != 0 || len(seen) != 1 || !seen[0].Day.Equal(day(-4)) || seen[0].Namespace != "short" ||
		!seen[0].Before.Equal(day(-3)) || seen[0].Limit != archiveChunk {
		t.Errorf("failed pass: deleted %d, archive asked for %+v; want nothing deleted, day -4 of short asked", res.Deleted, seen)
	}
	if n := count(t, s, "SELECT count(*) FROM executions"); n != 5 {
		t.Errorf("%d executions after a failed archive, want all 5", n)
	}

	fail, seen = false, nil
	if res, err = s.ApplyRetention(ctx, now, policy); err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 2 || res.ArchivedRows != 2 || len(seen) != 2 {
		t.Errorf("deleted %d, archived %d in %d calls; want 2, 2 and 2", res.Deleted, res.ArchivedRows, len(seen))
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE id = ANY($1)", []uuid.UUID{older[0], later[0]}); n != 0 {
		t.Errorf("%d archived executions left", n)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE id = ANY($1)", older[1:]); n != 2 {
		t.Errorf("%d of the executions not archived (one short, one other) left, want 2", n)
	}
}

// A batch of a delete from a kept day, while its transaction is open,
// holds up neither firing (an insert into today's partition) nor
// recording (an update of an execution that has not ended, on the same
// day as the rows being deleted).
func TestRetentionDeleteBlocksNeitherFiringNorRecording(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	old := now.Add(-3 * 24 * time.Hour)
	if err := s.EnsureHistoryPartitions(ctx, old, now); err != nil {
		t.Fatal(err)
	}
	putHistory(t, s, historyRow{"short", old, domain.ExecSucceeded, 2}, historyRow{"short", old.Add(time.Second), domain.ExecSucceeded, 0})
	running := putHistory(t, s, historyRow{"short", old, domain.ExecRunning, 0})
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.deleteRows(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "DELETE FROM "+DayPartition("executions", old)+" WHERE namespace = 'short' AND "+finalStates)
			if err == nil {
				_, err = tx.Exec(ctx, "DELETE FROM "+DayPartition("attempts", old))
			}
			close(inside)
			<-release
			return err
		})
		done <- err
	}()
	<-inside
	for what, q := range map[string]string{
		"firing": `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, state, handler)
			VALUES ('` + uuid.NewString() + `', '` + uuid.NewString() + `', 0, 'short', 'j', now(), 'queued', '{"type":"nats","subject":"a"}')`,
		"recording": `UPDATE executions SET state = 'succeeded', finished_at = now() WHERE id = '` + running[0].String() + `'`,
	} {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, q)
			return err
		})
		if err != nil {
			t.Errorf("%s during a delete's batch: %v", what, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
