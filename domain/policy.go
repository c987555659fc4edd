package domain

import (
	"fmt"
	"time"
)

// Missed-run policies: what a recurring job does with the runs it could
// not fire within its grace period (the cluster was down, its bucket had
// no owner, the scheduler was behind, or it was resumed with catch-up).
const (
	// MissedSkip fires none of the missed runs.
	MissedSkip = "skip"
	// MissedLatest fires only the most recent missed run.
	MissedLatest = "latest"
	// MissedAll fires every missed run, oldest first; when more than Max
	// were missed, the oldest are skipped and the newest Max fire.
	MissedAll = "all"
)

// Overlap policies: what happens when a run comes due while an earlier
// execution of the same job is still queued or running.
const (
	// OverlapAllow runs it anyway, beside the earlier one.
	OverlapAllow = "allow"
	// OverlapSkip skips the new run (reason "overlap").
	OverlapSkip = "skip"
	// OverlapBufferOne keeps at most one run waiting, started when the
	// earlier ones end; further runs meanwhile are skipped.
	OverlapBufferOne = "buffer_one"
	// OverlapCancelRunning cancels the earlier executions (as POST
	// /cancel does) and runs the new one.
	OverlapCancelRunning = "cancel_running"
)

// Reasons a scheduled run was skipped.
const (
	SkipMissed  = "missed"
	SkipOverlap = "overlap"
	// SkipPaused: the run fell while the job was paused, and it was
	// resumed without catch-up.
	SkipPaused = "paused"
	// SkipCalendar: a calendar the job names does not allow the run
	// (the skip's detail names the calendar and its rule).
	SkipCalendar = "calendar"
)

// What a job with calendars does with a run its calendars do not allow
// (JobPolicy.OnExcluded).
const (
	// OnExcludedSkip skips it (reason SkipCalendar): the job next runs at
	// its first scheduled time the calendars allow.
	OnExcludedSkip = "skip"
	// OnExcludedNextAllowed runs it once at the first instant after it
	// that the calendars allow, however many runs they excluded
	// meanwhile (the others are skipped, reason SkipCalendar), unless a
	// scheduled time they allow comes first.
	OnExcludedNextAllowed = "next_allowed"
)

// MaxJobCalendars is the most calendars a job may name.
const MaxJobCalendars = 8

// DefaultMissed is the missed-run policy of a job that names none, unless
// the cluster sets another: fire only the latest missed run, and count a
// run fired within a minute of its time as on time. Latest because a
// recurring job (a report, a sync, a clean-up) usually needs to run once
// after an outage, not once per missed time all at once; a minute of
// grace because a node's failover takes seconds, and runs delayed by one
// should all still fire. Max applies to MissedAll only.
var DefaultMissed = MissedPolicy{Policy: MissedLatest, Grace: "60s", Max: 100}

// DefaultOverlap is the overlap policy of a job that names none, unless
// the cluster sets another: runs never wait for each other.
const DefaultOverlap = OverlapAllow

// MaxMissedLimit is the highest MissedPolicy.Max.
const MaxMissedLimit = 1000

// MissedPolicy says what a recurring job does with missed runs. A run is
// missed when it could not be fired within Grace of its time. The zero
// value takes the cluster's defaults (WithDefaults).
type MissedPolicy struct {
	// Policy is MissedSkip, MissedLatest or MissedAll.
	Policy string `json:"policy,omitempty"`
	// Grace is a Go duration: a run fired this late still counts as on
	// time.
	Grace string `json:"grace,omitempty"`
	// Max caps the runs MissedAll fires at once (1 to MaxMissedLimit).
	Max int `json:"max,omitempty"`
}

// JobPolicy is a job's missed-run, overlap, concurrency and rate-limit
// policies and the calendars its runs must be allowed by, as stored.
type JobPolicy struct {
	Missed      MissedPolicy `json:"missed"`
	Overlap     string       `json:"overlap,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	RateLimit   *RateLimit   `json:"rate_limit,omitempty"`
	// Calendars name calendars of the job's namespace that must all allow
	// a run (package calendar); nil for none.
	Calendars []string `json:"calendars,omitempty"`
	// OnExcluded is OnExcludedSkip ("" too) or OnExcludedNextAllowed;
	// stored only with Calendars.
	OnExcluded string `json:"on_excluded,omitempty"`
}

// ValidOnExcluded reports whether o is an on_excluded choice ("" included:
// skip).
func ValidOnExcluded(o string) bool {
	return o == "" || o == OnExcludedSkip || o == OnExcludedNextAllowed
}

// Validate lists what is wrong with p; empty fields are fine.
func (p MissedPolicy) Validate() []FieldError {
	var errs []FieldError
	switch p.Policy {
	case "", MissedSkip, MissedLatest, MissedAll:
	default:
		errs = append(errs, FieldError{"policy", fmt.Sprintf("must be one of %s, %s, %s", MissedSkip, MissedLatest, MissedAll)})
	}
	if _, msg := checkDuration(p.Grace); msg != "" {
		errs = append(errs, FieldError{"grace", msg})
	} else if d, _ := checkDuration(p.Grace); d > 0 && d < time.Second {
		errs = append(errs, FieldError{"grace", "must be at least 1s"})
	}
	if p.Max < 0 || p.Max > MaxMissedLimit {
		errs = append(errs, FieldError{"max", fmt.Sprintf("must be between 1 and %d", MaxMissedLimit)})
	}
	return errs
}

// WithDefaults fills the fields p leaves empty from d.
func (p MissedPolicy) WithDefaults(d MissedPolicy) MissedPolicy {
	if p.Policy == "" {
		p.Policy = d.Policy
	}
	if p.Grace == "" {
		p.Grace = d.Grace
	}
	if p.Max == 0 {
		p.Max = d.Max
	}
	return p
}

// GraceDuration is Grace parsed; invalid or empty is def.
func (p MissedPolicy) GraceDuration(def time.Duration) time.Duration {
	return parseDuration(p.Grace, def)
}

// ValidOverlap reports whether o is an overlap policy ("" included: the
// default).
func ValidOverlap(o string) bool {
	switch o {
	case "", OverlapAllow, OverlapSkip, OverlapBufferOne, OverlapCancelRunning:
		return true
	}
	return false
}

// Overlaps lists the overlap policies.
var Overlaps = []string{OverlapAllow, OverlapSkip, OverlapBufferOne, OverlapCancelRunning}
