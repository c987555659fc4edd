package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// GetMaxEpoch is the highest fencing epoch recorded for any bucket
// (ClaimBucket), 0 when none is. A partition node compares it with what
// etcd can give to tell that etcd started over.
func (s *Store) GetMaxEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(epoch), 0) FROM bucket_owners").Scan(&epoch); err != nil {
		return 0, fmt.Errorf("store: highest recorded epoch: %w", err)
	}
	return epoch, nil
}

// NextGeneration allocates an etcd generation: one above above and above
// every generation allocated before (even one no epoch was recorded
// with), so that two lives of etcd never share a generation. Init must
// have run.
func (s *Store) NextGeneration(ctx context.Context, above int64) (int64, error) {
	var gen int64
	err := s.pool.QueryRow(ctx,
		"UPDATE cluster SET etcd_generation = GREATEST(etcd_generation, $1) + 1 RETURNING etcd_generation", above).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("store: allocate etcd generation above %d: cluster not initialised (Init)", above)
	}
	if err != nil {
		return 0, fmt.Errorf("store: allocate etcd generation above %d: %w", above, err)
	}
	return gen, nil
}
