package domain

import "fmt"

// LogPolicy is what a job keeps of each attempt's log (issue 38): up to
// CapBytes (default DefaultLogCap), and past it what Policy says.
type LogPolicy struct {
	CapBytes int64  `json:"cap_bytes,omitempty"`
	Policy   string `json:"policy,omitempty"` // LogHeadTail (default), LogHead or LogFail
}

// What happens to an attempt's log past its cap.
const (
	// LogHeadTail keeps the first and the last half of the cap, and marks
	// the cut between them with the number of bytes dropped.
	LogHeadTail = "head_tail"
	// LogHead keeps the first CapBytes and marks the rest as dropped.
	LogHead = "head"
	// LogFail ends the attempt as failed, with an error naming the cap.
	LogFail = "fail"
)

// DefaultLogCap is an attempt's log cap unless its job says otherwise;
// MinLogCap the smallest a job may ask for.
const (
	DefaultLogCap int64 = 1 << 20
	MinLogCap     int64 = 1 << 10
	// DefaultMaxLogCap is the largest cap a job may ask for unless the
	// cluster says otherwise (tockd --log-max-cap).
	DefaultMaxLogCap int64 = 64 << 20
)

// WithDefaults is p with its empty fields set.
func (p LogPolicy) WithDefaults() LogPolicy {
	if p.CapBytes == 0 {
		p.CapBytes = DefaultLogCap
	}
	if p.Policy == "" {
		p.Policy = LogHeadTail
	}
	return p
}

// Validate lists what is wrong with p, given the cluster's largest cap
// (maxCap; 0 means no bound).
func (p LogPolicy) Validate(maxCap int64) []FieldError {
	var errs []FieldError
	switch {
	case p.CapBytes != 0 && p.CapBytes < MinLogCap:
		errs = append(errs, FieldError{"cap_bytes", fmt.Sprintf("must be at least %d", MinLogCap)})
	case maxCap > 0 && p.CapBytes > maxCap:
		errs = append(errs, FieldError{"cap_bytes", fmt.Sprintf("must be at most %d (the cluster's --log-max-cap)", maxCap)})
	}
	switch p.Policy {
	case "", LogHeadTail, LogHead, LogFail:
	default:
		errs = append(errs, FieldError{"policy", fmt.Sprintf("must be %s, %s or %s", LogHeadTail, LogHead, LogFail)})
	}
	return errs
}
