package schedule

import "time"

// Spec is a job's schedule as users write it. At most one of Cron, At and
// In is set; none of them means "run now". Timezone (an IANA name,
// default UTC) applies to Cron. Anchor, allowed only with "@every", is
// when the interval's runs start (default the Unix epoch).
//
// StartAt, EndAt and MaxRuns, for Cron only, bound the runs: none before
// StartAt or after EndAt, at most MaxRuns fired in all (the store counts
// them); the job completes after its last. Jitter (any kind, a Go
// duration) publishes each run up to that much after its time, by a
// deterministic offset (Schedule.Offset).
type Spec struct {
	Cron     string     `json:"cron,omitempty"`
	Timezone string     `json:"timezone,omitempty"`
	At       *time.Time `json:"at,omitempty"`
	In       string     `json:"in,omitempty"`
	Anchor   *time.Time `json:"anchor,omitempty"`
	StartAt  *time.Time `json:"start_at,omitempty"`
	EndAt    *time.Time `json:"end_at,omitempty"`
	MaxRuns  int64      `json:"max_runs,omitempty"`
	Jitter   string     `json:"jitter,omitempty"`
}

// Kind says which way a job is scheduled.
type Kind string

// The kinds of schedule, one per field of Spec.
const (
	// KindCron runs on every match of a cron expression (Spec.Cron).
	KindCron Kind = "cron"
	// KindAt runs once at a moment (Spec.At).
	KindAt Kind = "at"
	// KindIn runs once after a delay from creation (Spec.In).
	KindIn Kind = "in"
	// KindNow runs once, as soon as the job is created.
	KindNow Kind = "now"
)

// Kind reports which field of s is set: KindCron, KindAt or KindIn, or
// KindNow when none is. A Cron of only spaces counts as set (and Compile
// rejects it). If several are set, which Compile rejects, the first in the
// order Cron, At, In wins.
func (s Spec) Kind() Kind {
	switch {
	case s.Cron != "":
		return KindCron
	case s.At != nil:
		return KindAt
	case s.In != "":
		return KindIn
	default:
		return KindNow
	}
}
