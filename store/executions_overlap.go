package store

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// bufferedUntil is the next_attempt_at of a buffered run: beyond every
// outbox read, until ReleaseBufferedExecutions sets it to now.
var bufferedUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// activeSQL counts, per job, the executions that have not ended (queued,
// running, or failed with a retry to come), the buffered ones apart.
// Backfill runs do not count: a backfill goes on beside the schedule. It
// probes each day partition's (job_id, scheduled_for) index.
const activeSQL = `
SELECT job_id, count(*) FILTER (WHERE NOT buffered), count(*) FILTER (WHERE buffered)
FROM executions WHERE job_id = ANY($1) AND state IN ('queued', 'running', 'failed', 'waiting') AND NOT backfill
GROUP BY job_id`

// cancelSQL cancels the executions of jobs that have not ended, as
// CancelExecution does, for the overlap policy cancel_running. It locks
// them first, in id order (the sub-select, run once before the update
// meets a row), as the recorder does (store/doc.go, Lock order): the
// update alone would meet them in the (job_id, scheduled_for) index's
// order, and deadlocked with recorders recording the same executions
// (TestNoDeadlocks).
const cancelSQL = `
UPDATE executions SET state = 'cancelled', finished_at = ` + nowMS + `,
	dispatched_at = COALESCE(dispatched_at, ` + nowMS + `), next_attempt_at = NULL, buffered = false,
	error = 'cancelled: a newer run of the job started (overlap policy cancel_running)'
WHERE job_id = ANY($1) AND state IN ('queued', 'running', 'failed') AND NOT backfill
	AND id = ANY (ARRAY(SELECT id FROM executions
		WHERE job_id = ANY($1) AND state IN ('queued', 'running', 'failed') AND NOT backfill
		ORDER BY id FOR UPDATE))
RETURNING id`

// unended is a job's executions that have not ended.
type unended struct{ running, buffered int }

// applyOverlap decides, for the firings whose job has an overlap policy
// other than allow, which of their runs fire, which one waits
// (buffer_one) and which are skipped (reason overlap), given the job's
// executions that have not ended; it rewrites those firings' Runs and
// Skips. It changes nothing in the database.
func applyOverlap(ctx context.Context, tx pgx.Tx, groups map[int]*policyGroup) error {
	var jobs []uuid.UUID
	for _, g := range groups {
		for _, f := range g.firings {
			if f.Overlap != "" && f.Overlap != domain.OverlapAllow && len(f.Runs) > 0 {
				jobs = append(jobs, f.JobID)
			}
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, activeSQL, jobs)
	if err != nil {
		return err
	}
	act := map[uuid.UUID]unended{}
	var (
		id   uuid.UUID
		n, b int
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &n, &b}, func() error {
		act[id] = unended{n, b}
		return nil
	}); err != nil {
		return err
	}
	for _, g := range groups {
		for i := range g.firings {
			f := &g.firings[i]
			if f.Overlap != "" && f.Overlap != domain.OverlapAllow && len(f.Runs) > 0 {
				decideOverlap(f, act[f.JobID])
			}
		}
	}
	return nil
}

// decideOverlap applies f's overlap policy to its runs (consecutive
// scheduled times, oldest first) given its job's unended executions:
//   - skip: a run fires only if nothing of the job is unended, and then
//     only the first;
//   - buffer_one: the first run fires if nothing is unended; one run
//     waits (Buffered) behind unended work unless one waits already;
//   - cancel_running: the unended executions are cancelled (later, by
//     cancelRunning) and the last run fires.
//
// The runs that neither fire nor wait are skipped, as one range.
func decideOverlap(f *Firing, a unended) {
	runs := slices.Clone(f.Runs) // the caller's firing may be retried
	var keep []model.Run
	switch f.Overlap {
	case domain.OverlapSkip:
		if a.running+a.buffered == 0 {
			keep = runs[:1]
		}
	case domain.OverlapBufferOne:
		switch {
		case a.buffered > 0:
		case a.running > 0:
			keep = []model.Run{runs[0]}
			keep[0].Buffered = true
		default:
			keep = runs[:min(2, len(runs))]
			if len(keep) == 2 {
				keep[1].Buffered = true
			}
		}
	case domain.OverlapCancelRunning:
		f.Runs, f.cancel = runs[len(runs)-1:], true
		f.Skips = append(f.Skips, overlapSkip(runs[:len(runs)-1])...)
		return
	default:
		return
	}
	// What is kept is a prefix of runs; the rest are skipped.
	f.Runs = append([]model.Run{}, keep...)
	f.Skips = append(f.Skips, overlapSkip(runs[len(keep):])...)
}

// overlapSkip is the skipped range of runs, none when empty.
func overlapSkip(runs []model.Run) []model.Skip {
	if len(runs) == 0 {
		return nil
	}
	return []model.Skip{{First: runs[0].At, Last: runs[len(runs)-1].At, Count: int64(len(runs)), Reason: domain.SkipOverlap}}
}

// cancelRunning cancels the unended executions of the moved jobs whose
// firing asked for it (cancel_running), and returns their ids, for the
// executors to be told.
func cancelRunning(ctx context.Context, tx pgx.Tx, groups map[int]*policyGroup, won map[uuid.UUID]int64) ([]uuid.UUID, error) {
	var jobs []uuid.UUID
	for _, g := range groups {
		for _, f := range g.firings {
			if _, ok := won[f.JobID]; ok && f.cancel {
				jobs = append(jobs, f.JobID)
			}
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, cancelSQL, jobs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// ReleaseBufferedExecutions starts the buffered runs (overlap buffer_one) of
// buckets whose job has no other unended execution left: each is due now,
// for the outbox to publish. It returns how many it released.
func (s *Store) ReleaseBufferedExecutions(ctx context.Context, buckets []int) (int, error) {
	if len(buckets) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE executions x SET buffered = false, next_attempt_at = `+nowMS+`
		WHERE x.bucket = ANY($1) AND x.buffered AND x.state = 'queued' AND NOT EXISTS (
			SELECT 1 FROM executions y WHERE y.job_id = x.job_id AND NOT y.buffered AND NOT y.backfill
				AND y.state IN ('queued', 'running', 'failed', 'waiting'))`, buckets)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
