package domain

import (
	"fmt"
	"math"
	"time"
)

// Retry policy defaults, for fields a policy leaves empty.
const (
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultMultiplier     = 2.0
	DefaultJitter         = JitterFull
	// MaxAttemptsLimit is the most attempts a policy may allow.
	MaxAttemptsLimit = 100
)

// Jitter kinds.
const (
	// JitterFull: the delay is uniform in [0, d), which spreads a burst of
	// failures best.
	JitterFull = "full"
	// JitterEqual: uniform in [d/2, d), which keeps a floor.
	JitterEqual = "equal"
	// JitterNone: d.
	JitterNone = "none"
)

// RetryPolicy says how often and how soon a failed execution is tried
// again. The zero value means one attempt only, with the default backoff.
// Durations are Go durations, kept as the user spelled them.
type RetryPolicy struct {
	MaxAttempts    int     `json:"max_attempts,omitempty"`
	InitialBackoff string  `json:"initial_backoff,omitempty"`
	MaxBackoff     string  `json:"max_backoff,omitempty"`
	Multiplier     float64 `json:"multiplier,omitempty"`
	Jitter         string  `json:"jitter,omitempty"` // JitterFull, JitterEqual or JitterNone
}

// FieldError says which field of a value is wrong, and why.
type FieldError struct {
	// Field is the field's JSON name, e.g. "max_backoff".
	Field   string
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate lists what is wrong with p; empty fields are fine (they take
// defaults), set ones must make sense.
func (p RetryPolicy) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxAttemptsLimit {
		add("max_attempts", "must be between 1 and %d", MaxAttemptsLimit)
	}
	initial, msg := checkDuration(p.InitialBackoff)
	if msg != "" {
		add("initial_backoff", "%s", msg)
	}
	maxB, msg := checkDuration(p.MaxBackoff)
	if msg != "" {
		add("max_backoff", "%s", msg)
	}
	if initial > 0 && maxB > 0 && maxB < initial {
		add("max_backoff", "must not be shorter than initial_backoff (%s)", p.InitialBackoff)
	}
	if p.Multiplier != 0 && !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0) {
		add("multiplier", "must be at least 1")
	}
	switch p.Jitter {
	case "", JitterFull, JitterEqual, JitterNone:
	default:
		add("jitter", "must be one of full, equal, none")
	}
	return errs
}

// checkDuration parses an optional positive duration (0 when s is
// empty), or says what is wrong with it.
func checkDuration(s string) (time.Duration, string) {
	if s == "" {
		return 0, ""
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, "must be a duration such as 1s, 1m30s or 2h"
	case d <= 0:
		return 0, "must be above zero"
	}
	return d, ""
}

// WithDefaults fills the fields p leaves empty from d (a cluster's
// default policy).
func (p RetryPolicy) WithDefaults(d RetryPolicy) RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialBackoff == "" {
		p.InitialBackoff = d.InitialBackoff
	}
	if p.MaxBackoff == "" {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = d.Multiplier
	}
	if p.Jitter == "" {
		p.Jitter = d.Jitter
	}
	return p
}

// Attempts is how many attempts p allows in a series; 0 means one.
func (p RetryPolicy) Attempts() int { return max(p.MaxAttempts, 1) }

// Delay is how long to wait before the attempt after attempt (1-based,
// within its series) when attempt failed: InitialBackoff *
// Multiplier^(attempt-1), capped at MaxBackoff, then jittered with r, a
// random number in [0, 1) (see JitterFull, JitterEqual, JitterNone).
// Fields that are empty or invalid (a foreign publisher's; the API
// refuses them) take the defaults.
func (p RetryPolicy) Delay(attempt int, r float64) time.Duration {
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
	case JitterNone:
	case JitterEqual:
		d = d/2 + r*d/2
	default: // full and unknown
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
