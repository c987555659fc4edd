package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

func TestBucketStats(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	base := baseTime()

	// Bucket 2: two active jobs, and a paused one whose stale next run is
	// earlier (it must not count as due). Bucket 5: one completed job.
	add := func(b int, name string, state domain.JobState, next *time.Time) {
		j := testJob(name, next)
		j.ID = idInBucket(b)
		mustCreate(t, s, j)
		if state != domain.JobActive {
			setState(t, s, j.ID, state, next)
		}
	}
	add(2, "a", domain.JobActive, ptr(base.Add(time.Minute)))
	add(2, "b", domain.JobActive, ptr(base.Add(30*time.Second)))
	add(2, "c", domain.JobPaused, ptr(base.Add(time.Second)))
	add(5, "d", domain.JobCompleted, nil)
	if err := s.ClaimBucket(ctx, 2, "n1", 7); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimBucket(ctx, 9, "n2", 11); err != nil {
		t.Fatal(err)
	}

	stats, err := s.ListBucketStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != testBuckets {
		t.Fatalf("%d rows, want one per bucket (%d)", len(stats), testBuckets)
	}
	for i, st := range stats {
		want := model.BucketStat{Bucket: i}
		switch i {
		case 2:
			want = model.BucketStat{Bucket: 2, Jobs: 3, Active: 2, NextDue: ptr(base.Add(30 * time.Second)), Node: "n1", Epoch: 7}
		case 5:
			want = model.BucketStat{Bucket: 5, Jobs: 1}
		case 9:
			want = model.BucketStat{Bucket: 9, Node: "n2", Epoch: 11}
		}
		if got, w := statText(st), statText(want); got != w {
			t.Errorf("row %d: %s, want %s", i, got, w)
		}
		if st.NextDue != nil && st.NextDue.Location() != time.UTC {
			t.Errorf("bucket %d next due not in UTC: %v", i, st.NextDue)
		}
	}

	// A new claim shows at once.
	if err := s.ClaimBucket(ctx, 2, "n3", 20); err != nil {
		t.Fatal(err)
	}
	if stats, err = s.ListBucketStats(ctx); err != nil || stats[2].Node != "n3" || stats[2].Epoch != 20 {
		t.Fatalf("after a new claim: %+v, %v", stats[2], err)
	}
}

func TestBucketStatsNeedsInit(t *testing.T) {
	if _, err := (&Store{}).ListBucketStats(context.Background()); err == nil {
		t.Fatal("ListBucketStats before Init succeeded")
	}
}

func statText(s model.BucketStat) string {
	due := "-"
	if s.NextDue != nil {
		due = s.NextDue.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{bucket %d jobs %d active %d due %s node %q epoch %d}", s.Bucket, s.Jobs, s.Active, due, s.Node, s.Epoch)
}
