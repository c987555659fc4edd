package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BucketStat is one bucket as the database sees it.
type BucketStat struct {
	Bucket int
	Jobs   int64 // every job in the bucket, whatever its state
	Active int64 // active jobs
	// NextDue is the earliest next run of the bucket's active jobs; nil
	// when it has none.
	NextDue *time.Time
	// Node and Epoch are the ownership recorded in bucket_owners, the one
	// every firing transaction checks: "" and 0 if no node ever claimed
	// the bucket. It can trail etcd's owner key during a hand-over.
	Node  string
	Epoch int64
}

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

// BucketStats returns one row per bucket, 0 to N-1 in order, buckets
// without jobs included. It counts every job in one query that reads
// all of the jobs table, so it is for operators, not for a hot path.
func (s *Store) BucketStats(ctx context.Context) ([]BucketStat, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	rows, err := s.pool.Query(ctx, bucketStatsSQL, s.buckets)
	if err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BucketStat, error) {
		var b BucketStat
		err := r.Scan(&b.Bucket, &b.Jobs, &b.Active, &b.NextDue, &b.Node, &b.Epoch)
		b.NextDue = utcPtr(b.NextDue)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: bucket stats: %w", err)
	}
	return out, nil
}
