package schedule

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
)

// Schedule is a validated Spec, ready to compute run times. Get one from
// Compile; the zero value is not usable. It is immutable and safe for
// concurrent use.
type Schedule struct {
	kind Kind
	loc  *time.Location

	cron   *cronSpec     // KindCron with fields
	every  time.Duration // KindCron with "@every"; cron is nil then
	anchor int64         // "@every": Unix milliseconds of the first run
	at     time.Time     // KindAt
	in     time.Duration // KindIn

	// The window (Spec.StartAt, Spec.EndAt) in Unix milliseconds, and
	// Spec.Jitter.
	start, end       int64
	hasStart, hasEnd bool
	jitter           time.Duration
}

// Compile validates s and prepares it for computing run times. Every error
// is a *FieldError naming the field at fault.
//
// Rules beyond the syntax of each field:
//   - At most one of Cron, At and In may be set.
//   - Timezone is an IANA name (default UTC); "Local" is refused because it
//     would mean whatever zone each server runs in. It is validated for
//     every kind but only affects Cron: At is an absolute moment and In a
//     duration, so a zone changes neither.
//   - Cron takes 5 fields (minute first) or 6 (second first), or one of
//     @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly,
//     @every <duration>. A TZ= or CRON_TZ= prefix is refused: Timezone is
//     the one way to name a zone. The day fields also take L, L-n and nW
//     (day of month) and DAY#n and DAYL (day of week); see the package
//     documentation. Expressions that can never run (such as February 30,
//     or "*/20" and "MON#2", which must both match) are refused.
//   - "@every d" needs a whole number of seconds from 1s to 10 years. Its
//     runs fall at Anchor plus multiples of d (Anchor, then Anchor+d, and
//     so on), whatever the time zone; Anchor defaults to the Unix epoch,
//     1970-01-01T00:00:00Z, so intervals that divide a day land on round
//     UTC times ("@every 15m" runs at :00, :15, :30, :45) and a new job's
//     first run comes within d of its creation. A fixed anchor is what
//     lets Next depend on its argument alone, so runs keep their times
//     across restarts, pauses and updates. Anchor must be a whole second
//     and is refused with anything but "@every".
//   - In is a Go duration ("90s", "1h30m") above zero and at most 10 years.
//   - At may be any moment; First refuses one already past.
func Compile(s Spec) (*Schedule, error) {
	var set []string
	if s.Cron != "" {
		set = append(set, "cron")
	}
	if s.At != nil {
		set = append(set, "at")
	}
	if s.In != "" {
		set = append(set, "in")
	}
	if len(set) > 1 {
		return nil, &FieldError{fieldSchedule, fmt.Sprintf("only one of cron, at and in may be set, found %s", strings.Join(set, " and "))}
	}

	c := &Schedule{kind: s.Kind(), loc: time.UTC}

	switch s.Timezone {
	case "":
	case "Local":
		return nil, &FieldError{fieldTimezone, `"Local" is not allowed, it depends on the server; name an IANA time zone such as "Europe/Berlin"`}
	default:
		loc, err := loadLocation(s.Timezone)
		if err != nil {
			return nil, &FieldError{fieldTimezone, fmt.Sprintf("unknown time zone %q; want an IANA name such as \"America/New_York\"", s.Timezone)}
		}
		c.loc = loc
	}

	switch c.kind {
	case KindCron:
		expr := strings.TrimSpace(s.Cron)
		if expr == "" {
			return nil, &FieldError{fieldCron, "must not be empty"}
		}
		spec, every, err := parseCron(expr)
		if err != nil {
			return nil, &FieldError{fieldCron, err.Error()}
		}
		c.cron, c.every = spec, every
	case KindAt:
		c.at = *s.At
	case KindIn:
		d, err := time.ParseDuration(strings.TrimSpace(s.In))
		switch {
		case err != nil:
			return nil, &FieldError{fieldIn, fmt.Sprintf("invalid duration %q, want one such as \"90s\" or \"1h30m\"", s.In)}
		case d <= 0:
			return nil, &FieldError{fieldIn, fmt.Sprintf("must be positive, got %s", d)}
		case d > maxDelay:
			return nil, &FieldError{fieldIn, fmt.Sprintf("%s is longer than %s (10 years)", d, maxDelay)}
		}
		c.in = d
	}

	if s.Anchor != nil {
		if c.kind != KindCron || c.cron != nil {
			return nil, &FieldError{fieldAnchor, `is only allowed with "@every <duration>"`}
		}
		if s.Anchor.Nanosecond() != 0 {
			return nil, &FieldError{fieldAnchor, fmt.Sprintf("must be a whole second, got %s", s.Anchor.UTC().Format(time.RFC3339Nano))}
		}
		c.anchor = s.Anchor.UnixMilli()
	}
	if err := c.compileBounds(s); err != nil {
		return nil, err
	}
	return c, nil
}

// maxJitter caps Spec.Jitter.
const maxJitter = 24 * time.Hour

// compileBounds checks and keeps s's window, run limit and jitter.
func (c *Schedule) compileBounds(s Spec) error {
	cronOnly := func(field string) error {
		return &FieldError{field, "is only allowed with a cron schedule (a one-shot job runs once)"}
	}
	if s.StartAt != nil {
		if c.kind != KindCron {
			return cronOnly(fieldStartAt)
		}
		c.start, c.hasStart = s.StartAt.UnixMilli(), true
	}
	if s.EndAt != nil {
		if c.kind != KindCron {
			return cronOnly(fieldEndAt)
		}
		c.end, c.hasEnd = s.EndAt.UnixMilli(), true
		if c.hasStart && c.end < c.start {
			return &FieldError{fieldEndAt, fmt.Sprintf("must not be before start_at (%s)", s.StartAt.UTC().Format(time.RFC3339Nano))}
		}
	}
	switch {
	case s.MaxRuns < 0:
		return &FieldError{fieldMaxRuns, fmt.Sprintf("must be at least 1, got %d", s.MaxRuns)}
	case s.MaxRuns > 0 && c.kind != KindCron:
		return cronOnly(fieldMaxRuns)
	}
	if s.Jitter != "" {
		d, err := time.ParseDuration(strings.TrimSpace(s.Jitter))
		switch {
		case err != nil:
			return &FieldError{fieldJitter, fmt.Sprintf("invalid duration %q, want one such as \"30s\"", s.Jitter)}
		case d < time.Millisecond:
			return &FieldError{fieldJitter, fmt.Sprintf("must be at least 1ms, got %s", d)}
		case d > maxJitter:
			return &FieldError{fieldJitter, fmt.Sprintf("%s is longer than %s", d, maxJitter)}
		}
		c.jitter = d.Truncate(time.Millisecond)
	}
	return nil
}

// Jitter is the schedule's jitter (Spec.Jitter); 0 for none.
func (c *Schedule) Jitter() time.Duration { return c.jitter }

// Offset is how long after scheduled time t the run of job key is
// published: a number of milliseconds in [0, Jitter) derived from key and
// t alone (FNV-1a), so every node, every retry of a firing and every
// preview agree, and a million jobs due at midnight spread evenly over
// the jitter. It is 0 without jitter.
func (c *Schedule) Offset(key [16]byte, t time.Time) time.Duration {
	if c.jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	var b [24]byte
	copy(b[:16], key[:])
	binary.BigEndian.PutUint64(b[16:], uint64(t.UnixMilli()))
	h.Write(b[:])
	return time.Duration(h.Sum64()%uint64(c.jitter.Milliseconds())) * time.Millisecond
}

// Kind reports how the job is scheduled.
func (c *Schedule) Kind() Kind { return c.kind }

// Recurring reports whether the job runs more than once, which only cron
// jobs do.
func (c *Schedule) Recurring() bool { return c.kind == KindCron }

// Location returns the schedule's time zone: UTC unless Spec.Timezone named
// another. Only cron expressions are read in it.
func (c *Schedule) Location() *time.Location { return c.loc }

// First returns when a job created or resumed at now should first run:
// for cron, Next(now), within the window (Spec.StartAt, Spec.EndAt);
// for cron, Next(now); for at, the moment itself; for in, now plus the
// delay; for now, now. The result is in UTC, truncated to the millisecond.
//
// It fails with a *FieldError on "schedule.at" if the moment is before now,
// and on "schedule.cron" if the expression has no run within the search
// horizon (only one whose every match falls in a skipped DST hour can do
// that).
func (c *Schedule) First(now time.Time) (time.Time, error) {
	switch c.kind {
	case KindCron:
		t, ok := c.Next(now)
		switch {
		case ok:
			return t, nil
		case c.hasEnd:
			if _, exists := c.unbounded(now); exists {
				// The message leaves now out, so that the same request
				// gets the same answer whenever it is made.
				return time.Time{}, &FieldError{fieldEndAt, fmt.Sprintf("the schedule has no run left before end_at (%s)",
					time.UnixMilli(c.end).UTC().Format(time.RFC3339Nano))}
			}
		}
		return time.Time{}, &FieldError{fieldCron, fmt.Sprintf("has no run in the %d years after %s", horizonYears, now.UTC().Format(time.RFC3339))}
	case KindAt:
		if c.at.Before(now) {
			return time.Time{}, &FieldError{fieldAt, fmt.Sprintf("must be in the future, got %s (now is %s)",
				c.at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))}
		}
		return toRunTime(c.at), nil
	case KindIn:
		return toRunTime(now.Add(c.in)), nil
	default:
		return toRunTime(now), nil
	}
}

// Next returns the first run of a recurring schedule strictly after after,
// in UTC with millisecond precision (cron runs fall on whole seconds). It
// depends on after alone, so a scanner that always passes the previous
// scheduled time gets every run exactly once, on any node.
//
// It returns false for one-shot kinds, whose only run is First, for the
// rare expression whose every run falls in a skipped DST hour (see the
// package documentation, "Horizon"), and once the window (Spec.EndAt) is
// over. No run comes before Spec.StartAt.
func (c *Schedule) Next(after time.Time) (time.Time, bool) {
	if c.hasStart && after.UnixMilli() < c.start {
		after = time.UnixMilli(c.start - 1)
	}
	t, ok := c.unbounded(after)
	if !ok || c.hasEnd && t.UnixMilli() > c.end {
		return time.Time{}, false
	}
	return t, true
}

// unbounded is Next without the window.
func (c *Schedule) unbounded(after time.Time) (time.Time, bool) {
	switch {
	case c.kind != KindCron:
		return time.Time{}, false
	case c.cron == nil:
		// "@every": the anchor, or the next multiple of the interval
		// since. Both are whole milliseconds, so floor division on
		// milliseconds gives a time strictly after after.
		a := after.UnixMilli()
		if a < c.anchor {
			return time.UnixMilli(c.anchor).UTC(), true
		}
		step := c.every.Milliseconds()
		n := floorDiv(a-c.anchor, step) + 1
		return time.UnixMilli(c.anchor + n*step).UTC(), true
	default:
		// Unix() rounds down, so "strictly after" at second precision
		// means "at or after the next whole second".
		t, ok := c.cron.next(c.loc, after.Unix())
		if !ok {
			return time.Time{}, false
		}
		return time.Unix(t, 0).UTC(), true
	}
}

// toRunTime puts a run time in the form every run time takes: UTC,
// millisecond precision, no monotonic clock reading.
func toRunTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Millisecond)
}

// locations caches the zones loaded so far, by name. time.LoadLocation
// reads and parses the zone's file on every call, which made up a quarter
// of the API's work when creating jobs in bulk; a *time.Location is
// immutable, so one copy serves every schedule. Only zones that exist
// are kept, so the cache holds at most the few hundred IANA names.
var locations sync.Map // string → *time.Location

// loadLocation is time.LoadLocation, cached.
func loadLocation(name string) (*time.Location, error) {
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}
