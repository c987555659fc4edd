package store

import (
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

func TestDecideOverlap(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	runs := func(n int) []model.Run {
		out := make([]model.Run, n)
		for i := range out {
			out[i] = model.Run{At: t0.Add(time.Duration(i) * time.Second)}
		}
		return out
	}
	tests := []struct {
		policy   string
		runs     int
		unended  unended
		fire     int // runs that fire at once
		buffered int
		skipped  int64
		cancel   bool
	}{
		{domain.OverlapSkip, 1, unended{}, 1, 0, 0, false},
		{domain.OverlapSkip, 1, unended{running: 1}, 0, 0, 1, false},
		{domain.OverlapSkip, 3, unended{}, 1, 0, 2, false},
		{domain.OverlapBufferOne, 1, unended{}, 1, 0, 0, false},
		{domain.OverlapBufferOne, 1, unended{running: 1}, 0, 1, 0, false},
		{domain.OverlapBufferOne, 1, unended{running: 1, buffered: 1}, 0, 0, 1, false},
		{domain.OverlapBufferOne, 1, unended{buffered: 1}, 0, 0, 1, false},
		{domain.OverlapBufferOne, 4, unended{}, 1, 1, 2, false},
		{domain.OverlapCancelRunning, 1, unended{running: 2}, 1, 0, 0, true},
		{domain.OverlapCancelRunning, 3, unended{}, 1, 0, 2, true},
	}
	for _, tt := range tests {
		f := Firing{Overlap: tt.policy, Runs: runs(tt.runs)}
		orig := runs(tt.runs)
		decideOverlap(&f, tt.unended)
		fire, buffered := 0, 0
		for _, r := range f.Runs {
			if r.Buffered {
				buffered++
			} else {
				fire++
			}
		}
		var skipped int64
		for _, k := range f.Skips {
			skipped += k.Count
			if k.Reason != domain.SkipOverlap {
				t.Errorf("%s: skip reason %q", tt.policy, k.Reason)
			}
		}
		if fire != tt.fire || buffered != tt.buffered || skipped != tt.skipped || f.cancel != tt.cancel {
			t.Errorf("%s with %d runs and %+v unended: fire %d, buffered %d, skipped %d, cancel %v; want %d, %d, %d, %v",
				tt.policy, tt.runs, tt.unended, fire, buffered, skipped, f.cancel, tt.fire, tt.buffered, tt.skipped, tt.cancel)
		}
		// Every run is accounted for once.
		if int64(len(f.Runs))+skipped != int64(len(orig)) {
			t.Errorf("%s: %d runs kept and %d skipped of %d", tt.policy, len(f.Runs), skipped, len(orig))
		}
	}
}
