package store

import (
	"context"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// dueJobs is the scanner's full read (ListDueJobs without a lower bound),
// with each job read whole, for assertions by name.
func (s *Store) dueJobs(ctx context.Context, buckets []int, until time.Time, limit int) ([]*model.Job, error) {
	due, err := s.ListDueJobs(ctx, buckets, time.Time{}, until, limit)
	if err != nil {
		return nil, err
	}
	jobs := make([]*model.Job, 0, len(due))
	for _, d := range due {
		j, err := s.GetJob(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
