package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// ErrBackfillEnded: the backfill is done or failed, so it cannot be
// stopped.
var ErrBackfillEnded = errors.New("the backfill has ended")

// backfillCols are the columns scanBackfill reads.
const backfillCols = "id, job_id, bucket, from_at, to_at, total, fired, next_at, state, error, created_at, finished_at"

func scanBackfill(row pgx.Row) (*model.Backfill, error) {
	var b model.Backfill
	err := row.Scan(&b.ID, &b.JobID, &b.Bucket, &b.From, &b.To, &b.Total, &b.Fired, &b.NextAt, &b.State,
		&b.Error, &b.CreatedAt, &b.FinishedAt)
	if err != nil {
		return nil, err
	}
	b.From, b.To, b.NextAt, b.CreatedAt = b.From.UTC(), b.To.UTC(), b.NextAt.UTC(), b.CreatedAt.UTC()
	b.FinishedAt = utcPtr(b.FinishedAt)
	return &b, nil
}

// CreateBackfill records a running backfill of job jobID over [from, to)
// holding total scheduled times, to be worked on by the owner of the
// job's bucket, and returns it. It fails with ErrNotFound when there is
// no such job; it checks nothing else (the caller does: see
// jobs.Service.Backfill).
func (s *Store) CreateBackfill(ctx context.Context, jobID uuid.UUID, from, to time.Time, total int64) (*model.Backfill, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: backfill job %s: %w", jobID, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("store: backfill job %s: new id: %w", jobID, err)
	}
	bucket := domain.BucketOf(jobID, s.buckets)
	b, err := scanBackfill(s.pool.QueryRow(ctx, `
		INSERT INTO backfills (id, job_id, bucket, from_at, to_at, total, next_at, state, created_at)
		SELECT $1, j.id, j.bucket, $3, $4, $5, $3, 'running', `+nowMS+`
		FROM jobs j WHERE j.bucket = $6 AND j.id = $2
		RETURNING `+backfillCols, id, jobID, ms(from), ms(to), total, bucket))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: backfill job %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: backfill job %s: %w", jobID, err)
	}
	return b, nil
}

// ListBackfills lists job jobID's backfills, newest first, a page of
// limit (50 when 0, at most 500) at a time; cursor continues where the
// page that returned it ended. The next cursor is "" after the last page.
// A job without backfills, or no such job, gives an empty list.
func (s *Store) ListBackfills(ctx context.Context, jobID uuid.UUID, limit int, cursor string) ([]*model.Backfill, string, error) {
	limit = pageSize(limit)
	before := uuid.Max
	if cursor != "" {
		if err := decodeCursor(cursor, &before); err != nil {
			return nil, "", fmt.Errorf("store: backfills of %s: %w", jobID, err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+backfillCols+` FROM backfills
		WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, jobID, before, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: backfills of %s: %w", jobID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Backfill, error) { return scanBackfill(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: backfills of %s: %w", jobID, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(out[limit-1].ID)
	}
	return out, next, nil
}

// StopBackfill stops job jobID's running backfill id: no further
// execution is created for it (the ones created are left to run). Stopping
// a stopped backfill returns it unchanged; one that is done or failed
// fails with ErrBackfillEnded, an unknown one (or one of another job)
// with ErrNotFound.
func (s *Store) StopBackfill(ctx context.Context, jobID, id uuid.UUID) (*model.Backfill, error) {
	b, err := scanBackfill(s.pool.QueryRow(ctx, `
		UPDATE backfills SET state = 'stopped', finished_at = `+nowMS+`
		WHERE id = $1 AND job_id = $2 AND state = 'running'
		RETURNING `+backfillCols, id, jobID))
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: stop backfill %s: %w", id, err)
	}
	b, err = scanBackfill(s.pool.QueryRow(ctx, `SELECT `+backfillCols+` FROM backfills
		WHERE id = $1 AND job_id = $2`, id, jobID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("store: stop backfill %s: %w", id, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("store: stop backfill %s: %w", id, err)
	case b.State == model.BackfillStopped:
		return b, nil
	}
	return b, fmt.Errorf("store: stop backfill %s (%s): %w", id, b.State, ErrBackfillEnded)
}

// ListRunningBackfills reads the running backfills of buckets, oldest first
// (at most 1,000), each with its job's current schedule.
func (s *Store) ListRunningBackfills(ctx context.Context, buckets []int) ([]model.BackfillWork, error) {
	if len(buckets) == 0 {
		return nil, nil
	}
	// The backfills first, then their jobs' schedules, only if any runs:
	// joined, the statement was planned over every partition of jobs on
	// each scanner pass (22 ms of planning a second, with none running;
	// pg_stat_statements, issue 36).
	rows, err := s.pool.Query(ctx, `SELECT `+backfillCols+` FROM backfills
		WHERE bucket = ANY($1) AND state = 'running'
		ORDER BY created_at, id LIMIT 1000`, buckets)
	if err != nil {
		return nil, fmt.Errorf("store: running backfills of %d buckets: %w", len(buckets), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.BackfillWork, error) {
		var w model.BackfillWork
		b := &w.Backfill
		err := r.Scan(&b.ID, &b.JobID, &b.Bucket, &b.From, &b.To, &b.Total, &b.Fired, &b.NextAt, &b.State,
			&b.Error, &b.CreatedAt, &b.FinishedAt)
		b.From, b.To, b.NextAt, b.CreatedAt = b.From.UTC(), b.To.UTC(), b.NextAt.UTC(), b.CreatedAt.UTC()
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: running backfills of %d buckets: %w", len(buckets), err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	jobs, bs := make([]uuid.UUID, len(out)), make([]int, len(out))
	for i, w := range out {
		jobs[i], bs[i] = w.Backfill.JobID, w.Backfill.Bucket
	}
	rows, err = s.pool.Query(ctx, `SELECT j.id, j.schedule FROM jobs j
		JOIN unnest($1::int[], $2::uuid[]) AS u(bucket, id) ON j.bucket = u.bucket AND j.id = u.id`, bs, jobs)
	if err != nil {
		return nil, fmt.Errorf("store: schedules of %d backfilled jobs: %w", len(jobs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id uuid.UUID
			w  model.BackfillWork
		)
		if err := rows.Scan(rawUUID(&id), &w.Schedule); err != nil {
			return nil, fmt.Errorf("store: schedules of %d backfilled jobs: %w", len(jobs), err)
		}
		for i := range out { // a job may have several backfills running
			if out[i].Backfill.JobID == id {
				out[i].Schedule = w.Schedule
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: schedules of %d backfilled jobs: %w", len(jobs), err)
	}
	return out, nil
}
