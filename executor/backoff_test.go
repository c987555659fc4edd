package executor

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tock-sched/tock/executor/wire"
)

func TestRetryDelay(t *testing.T) {
	none := func(p wire.RetryPolicy) wire.RetryPolicy { p.Jitter = "none"; return p }
	tests := []struct {
		name    string
		policy  wire.RetryPolicy
		attempt int
		want    time.Duration // with jitter none
	}{
		{"defaults first", wire.RetryPolicy{}, 1, time.Second},
		{"defaults second", wire.RetryPolicy{}, 2, 2 * time.Second},
		{"defaults tenth", wire.RetryPolicy{}, 10, 5 * time.Minute}, // 512s, capped
		{"custom", wire.RetryPolicy{InitialBackoff: "100ms", Multiplier: 3}, 3, 900 * time.Millisecond},
		{"multiplier one is constant", wire.RetryPolicy{InitialBackoff: "2s", Multiplier: 1}, 7, 2 * time.Second},
		{"capped", wire.RetryPolicy{InitialBackoff: "1s", MaxBackoff: "10s"}, 5, 10 * time.Second},
		{"huge attempt saturates at cap", wire.RetryPolicy{MaxBackoff: "1h"}, 100000, time.Hour},
		{"max below initial", wire.RetryPolicy{InitialBackoff: "30s", MaxBackoff: "1s"}, 1, 30 * time.Second},
		{"bad durations use defaults", wire.RetryPolicy{InitialBackoff: "soon", MaxBackoff: "-1s"}, 2, 2 * time.Second},
		{"bad multiplier uses default", wire.RetryPolicy{Multiplier: 0.5}, 3, 4 * time.Second},
		{"attempt zero like one", wire.RetryPolicy{}, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryDelay(none(tt.policy), tt.attempt, 0.7); got != tt.want {
				t.Errorf("none: retryDelay = %v, want %v", got, tt.want)
			}
			for _, r := range []float64{0, 0.25, 0.5, 0.999999} {
				full := tt.policy
				full.Jitter = "full"
				if got := retryDelay(full, tt.attempt, r); got < 0 || got >= tt.want || got != time.Duration(r*float64(tt.want)) {
					t.Errorf("full r=%v: %v, want in [0, %v)", r, got, tt.want)
				}
				if got := retryDelay(tt.policy, tt.attempt, r); got != retryDelay(full, tt.attempt, r) {
					t.Errorf("default jitter r=%v: %v, want full jitter", r, got)
				}
				equal := tt.policy
				equal.Jitter = "equal"
				if got := retryDelay(equal, tt.attempt, r); got < tt.want/2 || got > tt.want {
					t.Errorf("equal r=%v: %v, want in [%v, %v]", r, got, tt.want/2, tt.want)
				}
			}
		})
	}
}

func TestMaxAttempts(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{0, 1}, {1, 1}, {-3, 1}, {5, 5}} {
		if got := maxAttempts(wire.RetryPolicy{MaxAttempts: tt.in}); got != tt.want {
			t.Errorf("maxAttempts(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	p := Permanent(base)
	if !IsPermanent(p) || !IsPermanent(fmt.Errorf("wrapped: %w", p)) {
		t.Error("IsPermanent false for a Permanent error")
	}
	if !errors.Is(p, base) || p.Error() != "bad input" {
		t.Errorf("Permanent hides its cause: %v", p)
	}
	if IsPermanent(base) || IsPermanent(nil) || Permanent(nil) != nil {
		t.Error("IsPermanent/Permanent wrong for plain or nil errors")
	}
}
