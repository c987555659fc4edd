package store

import (
	"context"
	"testing"
)

func TestGenerationsGrowAndEpochsAreReadBack(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if e, err := s.GetMaxEpoch(ctx); err != nil || e != 0 {
		t.Fatalf("GetMaxEpoch of a new cluster = %d, %v; want 0", e, err)
	}
	claim(t, s, "n1", 7, 1, 2)
	claim(t, s, "n2", 1<<40|3, 3)
	if e, err := s.GetMaxEpoch(ctx); err != nil || e != 1<<40|3 {
		t.Fatalf("GetMaxEpoch = %d, %v; want %d", e, err, int64(1<<40|3))
	}

	// Each allocation is above every one before and above what it is
	// asked to pass, even when nothing was recorded with the last one.
	for i, c := range []struct{ above, want int64 }{{0, 1}, {0, 2}, {1, 3}, {10, 11}, {4, 12}} {
		got, err := s.NextGeneration(ctx, c.above)
		if err != nil || got != c.want {
			t.Fatalf("allocation %d above %d = %d, %v; want %d", i, c.above, got, err, c.want)
		}
	}
}
