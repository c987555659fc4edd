package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// dueJobsSQL reads the due jobs of some buckets. bucket = ANY($1) lets
// the planner prune to those buckets' partitions; $2 is a lower bound
// (exclusive) on next_run_at, -infinity for none.
const dueJobsSQL = "SELECT " + jobColumns + ` FROM jobs
	WHERE bucket = ANY($1) AND state = 'active' AND next_run_at > $2 AND next_run_at <= $3
	ORDER BY next_run_at LIMIT $4`

// dueJobs reads up to limit active jobs in buckets whose next run is at
// or before until, earliest first. It reads only those buckets'
// partitions.
func (s *Store) dueJobs(ctx context.Context, buckets []int, until time.Time, limit int) ([]*Job, error) {
	if len(buckets) == 0 || limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, dueJobsSQL, buckets, negInfinity, until.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: due jobs in %d buckets: %w", len(buckets), err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Job, error) { return scanJob(r) })
	if err != nil {
		return nil, fmt.Errorf("store: due jobs in %d buckets: %w", len(buckets), err)
	}
	return jobs, nil
}
