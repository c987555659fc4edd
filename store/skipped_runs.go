package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// ListSkippedRuns lists job id's skipped ranges, newest first, a page of
// limit (50 when 0, at most 500) at a time; cursor continues where the
// page that returned it ended. The next cursor is "" after the last page.
func (s *Store) ListSkippedRuns(ctx context.Context, id uuid.UUID, limit int, cursor string) ([]model.SkippedRange, string, error) {
	limit = pageSize(limit)
	before := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if cursor != "" {
		if err := decodeCursor(cursor, &before); err != nil {
			return nil, "", fmt.Errorf("store: skipped runs of %s: %w", id, err)
		}
	}
	rows, err := s.pool.Query(ctx, `
		SELECT job_id, namespace, job_name, first_at, last_at, runs, reason, detail, recorded_at
		FROM skipped_runs WHERE job_id = $1 AND first_at < $2
		ORDER BY first_at DESC LIMIT $3`, id, before, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: skipped runs of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.SkippedRange, error) {
		var k model.SkippedRange
		err := r.Scan(&k.JobID, &k.Namespace, &k.JobName, &k.First, &k.Last, &k.Count, &k.Reason, &k.Detail, &k.RecordedAt)
		k.First, k.Last, k.RecordedAt = k.First.UTC(), k.Last.UTC(), k.RecordedAt.UTC()
		return k, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: skipped runs of %s: %w", id, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(out[limit-1].First)
	}
	return out, next, nil
}
