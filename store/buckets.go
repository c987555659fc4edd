package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// bucketStatsSQL counts every bucket's jobs and joins them to the
// bucket's recorded owner. The series makes buckets without jobs show.
const bucketStatsSQL = `
	SELECT g.bucket, coalesce(j.jobs, 0), coalesce(j.active, 0), j.next_due,
		coalesce(o.node, ''), coalesce(o.epoch, 0)
	FROM (
		SELECT bucket, count(*) AS jobs,
			count(*) FILTER (WHERE state = 'active') AS active,
			min(next_run_at) FILTER (WHERE state = 'active') AS next_due
		FROM jobs GROUP BY bucket
	) j
	RIGHT JOIN generate_series(0, $1::int - 1) AS g(bucket) ON j.bucket = g.bucket
	LEFT JOIN bucket_owners o ON o.bucket = g.bucket
	ORDER BY g.bucket`

// ListBucketStats returns one row per bucket, 0 to N-1 in order, buckets
// without jobs included. It counts every job in one query that reads
// all of the jobs table, so it is for operators, not for a hot path.
func (s *Store) ListBucketStats(ctx context.Context) ([]model.BucketStat, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	rows, err := s.pool.Query(ctx, bucketStatsSQL, s.buckets)
	if err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.BucketStat, error) {
		var b model.BucketStat
		err := r.Scan(&b.Bucket, &b.Jobs, &b.Active, &b.NextDue, &b.Node, &b.Epoch)
		b.NextDue = utcPtr(b.NextDue)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	return out, nil
}
