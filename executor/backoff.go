package executor

import (
	"math"
	"time"

	"github.com/tock-sched/tock/executor/wire"
)

// Retry policy defaults, for fields left empty (or invalid: the API
// rejects those, so an executor only sees them from a foreign publisher).
const (
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultMultiplier     = 2.0
	DefaultJitter         = "full"
)

// maxAttempts is how many attempts p allows; 0 means one.
func maxAttempts(p wire.RetryPolicy) int { return max(p.MaxAttempts, 1) }

// retryDelay is how long to wait before the attempt after attempt
// (1-based) when attempt failed: InitialBackoff * Multiplier^(attempt-1),
// capped at MaxBackoff, then jittered with r, a random number in [0, 1):
//
//   - "full": uniform in [0, d), which spreads a burst of failures best;
//   - "equal": uniform in [d/2, d), which keeps a floor;
//   - "none": d.
func retryDelay(p wire.RetryPolicy, attempt int, r float64) time.Duration {
	initial := parseDuration(p.InitialBackoff, DefaultInitialBackoff)
	maxB := parseDuration(p.MaxBackoff, DefaultMaxBackoff)
	if maxB < initial {
		maxB = initial
	}
	mult := p.Multiplier
	if mult < 1 || math.IsNaN(mult) || math.IsInf(mult, 0) {
		mult = DefaultMultiplier
	}
	// Float math cannot overflow into a negative duration here: the
	// power saturates at +Inf and the cap applies before converting.
	d := float64(initial) * math.Pow(mult, float64(max(attempt, 1)-1))
	d = min(d, float64(maxB))
	switch p.Jitter {
	case "none":
	case "equal":
		d = d/2 + r*d/2
	default: // "full" and unknown
		d = r * d
	}
	return time.Duration(d)
}

func parseDuration(s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return def
	}
	return d
}
