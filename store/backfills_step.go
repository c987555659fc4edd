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

// backfillRunsSQL inserts the executions of a backfill's scheduled times
// ($1, their ids $2) of job $4 from its bucket's jobs partition, as
// policyRunsSQL does for the scanner's runs, except that they are
// published in the low priority class whatever the job's, are marked
// backfill, and carry next_attempt_at = now: the outbox publishes them at
// once and marks them dispatched one by one (they are not covered by a
// publish position). $3 is the node.
var backfillRunsSQL = `
WITH r AS (
	SELECT * FROM unnest($1::timestamptz[], $2::uuid[]) AS r(sched, exec_id)
), ins AS (
	INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state,
		handler, payload, retry, timeout_ms, priority, created_at, fired_by, spec_id, next_attempt_at, backfill,
		` + slotColumns + `)
	SELECT r.exec_id, j.id, j.bucket, j.namespace, j.name, r.sched, false, 'queued',
		CASE WHEN j.spec_id IS NULL THEN j.handler END, CASE WHEN j.spec_id IS NULL THEN j.payload END,
		CASE WHEN j.spec_id IS NULL THEN j.retry END, CASE WHEN j.spec_id IS NULL THEN j.timeout_ms END,
		'low', ` + nowMS + `, $3, j.spec_id, ` + nowMS + `, true, ` + slotValues("j.") + `
	FROM r JOIN jobs j ON j.id = $4
	ORDER BY r.sched
	ON CONFLICT DO NOTHING
	RETURNING *
)
SELECT ` + execCols("ins.") + ` FROM ins`

// StepBackfill carries out one step of a backfill in one transaction, for
// node, which claimed the backfill's bucket at epoch (see ClaimBucket).
// The days of the step's times get their partitions first (EnsureHistoryPartitions).
//
// Fencing: it reads the bucket's ownership row FOR SHARE, as Fire does,
// and fails with ErrFenced, writing nothing, unless node owns the bucket
// at epoch. So a node that lost the bucket cannot go on inserting.
//
// Exactly once: each time's execution, domain.ExecutionID(job, time), is
// inserted unless one exists for that job and time (ON CONFLICT DO
// NOTHING), so a time fires once whoever asks, and a second backfill of
// the same range fires nothing new. It snapshots the job's spec as
// firing does. The job's next_run_at, runs and state are left alone
// (backfill runs do not count towards schedule.max_runs); times at or
// after the job's next run are not fired: they are the scheduler's, and
// the backfill waits for them (its progress stops before the first).
//
// The backfill's progress moves to step.Next (or that first time), Fired
// counts the executions created, and the backfill is done when step.Done
// and every time was handled. A backfill that is not running, or whose
// progress is not step.From any more, is returned unchanged; a job that
// is gone fails it. An unknown backfill fails with ErrNotFound.
func (s *Store) StepBackfill(ctx context.Context, node string, epoch int64, step model.BackfillStep) (model.BackfillResult, error) {
	// Runs of days before the partitions made ahead go to their own day.
	if err := s.EnsureHistoryPartitions(ctx, step.Times...); err != nil {
		return model.BackfillResult{}, fmt.Errorf("store: backfill %s: %w", step.ID, err)
	}
	for attempt := 0; ; attempt++ {
		var res model.BackfillResult
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			res, err = stepBackfill(ctx, tx, node, epoch, step)
			return err
		})
		if err == nil {
			return res, nil
		}
		if !isRetryable(err) || attempt == fireRetries || ctx.Err() != nil {
			return model.BackfillResult{}, fmt.Errorf("store: backfill %s step at %s: %w", step.ID,
				step.From.UTC().Format(time.RFC3339), err)
		}
	}
}

func stepBackfill(ctx context.Context, tx pgx.Tx, node string, epoch int64, step model.BackfillStep) (model.BackfillResult, error) {
	owned, _, err := ownedBuckets(ctx, tx, node, map[int]int64{step.Bucket: epoch}, []int{step.Bucket})
	if err != nil {
		return model.BackfillResult{}, err
	}
	if len(owned) == 0 {
		return model.BackfillResult{}, ErrFenced
	}
	b, err := scanBackfill(tx.QueryRow(ctx, `SELECT `+backfillCols+` FROM backfills
		WHERE id = $1 AND bucket = $2 FOR UPDATE`, step.ID, step.Bucket))
	if errors.Is(err, pgx.ErrNoRows) {
		return model.BackfillResult{}, ErrNotFound
	}
	if err != nil {
		return model.BackfillResult{}, err
	}
	if b.State != model.BackfillRunning || !b.NextAt.Equal(ms(step.From)) {
		return model.BackfillResult{Backfill: b}, nil
	}
	if step.Fail != "" {
		b, err = failBackfill(ctx, tx, b.ID, step.Fail)
		return model.BackfillResult{Backfill: b}, err
	}
	var nextRun *time.Time
	err = tx.QueryRow(ctx, "SELECT next_run_at FROM "+jobsPartition(step.Bucket)+" WHERE id = $1", b.JobID).Scan(&nextRun)
	if errors.Is(err, pgx.ErrNoRows) {
		b, err = failBackfill(ctx, tx, b.ID, "the job was deleted")
		return model.BackfillResult{Backfill: b}, err
	}
	if err != nil {
		return model.BackfillResult{}, err
	}
	times, next, done := step.Times, ms(step.Next), step.Done
	for i, t := range times {
		if nextRun != nil && !ms(t).Before(*nextRun) {
			times, next, done = times[:i], ms(t), false
			break
		}
	}
	var res model.BackfillResult
	if len(times) > 0 {
		if res.Executions, err = insertBackfillRuns(ctx, tx, node, step.Bucket, b.JobID, times); err != nil {
			return model.BackfillResult{}, err
		}
	}
	res.Backfill, err = scanBackfill(tx.QueryRow(ctx, `UPDATE backfills SET next_at = $2, fired = fired + $3,
			state = CASE WHEN $4 THEN 'done' ELSE state END,
			finished_at = CASE WHEN $4 THEN `+nowMS+` END
		WHERE id = $1 RETURNING `+backfillCols, b.ID, next, len(res.Executions), done))
	return res, err
}

// insertBackfillRuns inserts the executions of job's times (backfillRunsSQL)
// and returns those created.
func insertBackfillRuns(ctx context.Context, tx pgx.Tx, node string, bucket int, job uuid.UUID, times []time.Time) ([]*model.Execution, error) {
	ats := make([]time.Time, len(times))
	ids := make([]uuid.UUID, len(times))
	for i, t := range times {
		ats[i] = ms(t)
		ids[i] = domain.ExecutionID(job, ats[i])
	}
	rows, err := tx.Query(ctx, onPartition(backfillRunsSQL, jobsPartition(bucket)), ats, ids, node, job)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Execution, error) { return scanExecution(r) })
}

// failBackfill ends backfill id as failed, for reason.
func failBackfill(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) (*model.Backfill, error) {
	return scanBackfill(tx.QueryRow(ctx, `UPDATE backfills SET state = 'failed', error = $2, finished_at = `+nowMS+`
		WHERE id = $1 RETURNING `+backfillCols, id, reason))
}
