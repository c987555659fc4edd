package domain

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	none := func(p RetryPolicy) RetryPolicy { p.Jitter = "none"; return p }
	tests := []struct {
		name    string
		policy  RetryPolicy
		attempt int
		want    time.Duration // with jitter none
	}{
		{"defaults first", RetryPolicy{}, 1, time.Second},
		{"defaults second", RetryPolicy{}, 2, 2 * time.Second},
		{"defaults tenth", RetryPolicy{}, 10, 5 * time.Minute}, // 512s, capped
		{"custom", RetryPolicy{InitialBackoff: "100ms", Multiplier: 3}, 3, 900 * time.Millisecond},
		{"multiplier one is constant", RetryPolicy{InitialBackoff: "2s", Multiplier: 1}, 7, 2 * time.Second},
		{"capped", RetryPolicy{InitialBackoff: "1s", MaxBackoff: "10s"}, 5, 10 * time.Second},
		{"huge attempt saturates at cap", RetryPolicy{MaxBackoff: "1h"}, 100000, time.Hour},
		{"max below initial", RetryPolicy{InitialBackoff: "30s", MaxBackoff: "1s"}, 1, 30 * time.Second},
		{"bad durations use defaults", RetryPolicy{InitialBackoff: "soon", MaxBackoff: "-1s"}, 2, 2 * time.Second},
		{"bad multiplier uses default", RetryPolicy{Multiplier: 0.5}, 3, 4 * time.Second},
		{"attempt zero like one", RetryPolicy{}, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := none(tt.policy).Delay(tt.attempt, 0.7); got != tt.want {
				t.Errorf("none: Delay = %v, want %v", got, tt.want)
			}
			for _, r := range []float64{0, 0.25, 0.5, 0.999999} {
				full := tt.policy
				full.Jitter = "full"
				if got := full.Delay(tt.attempt, r); got < 0 || got >= tt.want || got != time.Duration(r*float64(tt.want)) {
					t.Errorf("full r=%v: %v, want in [0, %v)", r, got, tt.want)
				}
				if got := tt.policy.Delay(tt.attempt, r); got != full.Delay(tt.attempt, r) {
					t.Errorf("default jitter r=%v: %v, want full jitter", r, got)
				}
				equal := tt.policy
				equal.Jitter = "equal"
				if got := equal.Delay(tt.attempt, r); got < tt.want/2 || got > tt.want {
					t.Errorf("equal r=%v: %v, want in [%v, %v]", r, got, tt.want/2, tt.want)
				}
			}
		})
	}
}

func TestMaxAttempts(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{0, 1}, {1, 1}, {-3, 1}, {5, 5}} {
		if got := (RetryPolicy{MaxAttempts: tt.in}).Attempts(); got != tt.want {
			t.Errorf("Attempts(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	if errs := (RetryPolicy{}).Validate(); len(errs) != 0 {
		t.Errorf("the zero policy: %v", errs)
	}
	ok := RetryPolicy{MaxAttempts: 5, InitialBackoff: "1s", MaxBackoff: "1m", Multiplier: 1.5, Jitter: JitterEqual}
	if errs := ok.Validate(); len(errs) != 0 {
		t.Errorf("%+v: %v", ok, errs)
	}
	for _, tc := range []struct {
		p     RetryPolicy
		field string
	}{
		{RetryPolicy{MaxAttempts: 101}, "max_attempts"},
		{RetryPolicy{MaxAttempts: -1}, "max_attempts"},
		{RetryPolicy{InitialBackoff: "soon"}, "initial_backoff"},
		{RetryPolicy{MaxBackoff: "-1s"}, "max_backoff"},
		{RetryPolicy{InitialBackoff: "1m", MaxBackoff: "1s"}, "max_backoff"},
		{RetryPolicy{Multiplier: 0.5}, "multiplier"},
		{RetryPolicy{Jitter: "some"}, "jitter"},
	} {
		errs := tc.p.Validate()
		if len(errs) != 1 || errs[0].Field != tc.field {
			t.Errorf("%+v: %v, want one error on %s", tc.p, errs, tc.field)
		}
	}
}

func TestRetryPolicyWithDefaults(t *testing.T) {
	d := RetryPolicy{MaxAttempts: 3, InitialBackoff: "2s", MaxBackoff: "1m", Multiplier: 2, Jitter: JitterFull}
	got := RetryPolicy{MaxAttempts: 5, Jitter: JitterNone}.WithDefaults(d)
	want := RetryPolicy{MaxAttempts: 5, InitialBackoff: "2s", MaxBackoff: "1m", Multiplier: 2, Jitter: JitterNone}
	if got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
}
