package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// maxStale is how many times a change is redone after a firing or another
// change won the race for the job (store.ErrStale) before the last
// ErrStale is returned.
const maxStale = 10

// Patch is a change to a job: each field set replaces the job's (a
// Patch with none leaves the job as it is). The namespace and name never
// change.
type Patch struct {
	// IfRevision, when not 0, is the job's revision the caller read (an
	// If-Match): the change is made only while the job is still at it,
	// else Update fails with store.ErrRevision.
	IfRevision int64
	// Schedule replaces the schedule. A new one gives an active or
	// completed job its first run from now (a completed job runs again);
	// a paused job stays paused and computes its next run when resumed.
	// The same schedule changes nothing.
	Schedule *schedule.Spec
	// Handler replaces the handler; an http handler's Method defaults to
	// POST. Its secret headers come from SecretHeaders, and a plain
	// header whose name is sensitive (domain.SensitiveHeader) given as
	// domain.SecretMask keeps its stored value.
	Handler *domain.Handler
	// SecretHeaders, with an http Handler, are its secret headers in
	// clear (see NewJob.SecretHeaders): nil keeps the stored ones, a
	// pointer to an empty map removes them, and a value of
	// domain.SecretMask keeps that header's stored value. Stored values
	// are kept only if the new handler calls the same origin (scheme,
	// host and port) as the stored one; otherwise they must be given
	// again.
	SecretHeaders *map[string]string
	// Payload replaces the payload; nil or empty inside removes it.
	Payload *json.RawMessage
	// Retry replaces the retry policy; the fields it leaves out come from
	// Config.DefaultRetry (so an empty policy resets it to the default).
	Retry *domain.RetryPolicy
	// Priority replaces the priority class; "" is normal.
	Priority *domain.Priority
	// Timeout replaces the attempt timeout; 0 removes it.
	Timeout *time.Duration
	// Labels replaces all the labels; an empty map removes them.
	Labels *domain.Labels
	// Description replaces the description; "" removes it.
	Description *string
	// Missed replaces the missed-run policy and Overlap the overlap
	// policy; what they leave out comes from the cluster's defaults.
	Missed  *domain.MissedPolicy
	Overlap *string
	// Concurrency replaces the concurrency policy; a zero one ({})
	// removes it.
	Concurrency *domain.Concurrency
	// RateLimit replaces the rate limit; a zero one ({}) removes it.
	RateLimit *domain.RateLimit
	// Calendars replaces the calendars the job's runs must be allowed by
	// (a pointer to an empty list removes them, and on_excluded with
	// them); OnExcluded replaces what happens to a run they exclude.
	Calendars  *[]string
	OnExcluded *string
	// Depends replaces what the job waits for (its fields left out take
	// their defaults); an empty On removes the job's dependencies. A job
	// without a schedule of its own cannot lose them (it would never
	// run): give it a schedule in the same patch. MayRead is as
	// NewJob's.
	Depends *DependsSpec
	MayRead func(namespace string) bool
}

func (p *Patch) empty() bool {
	return p.Schedule == nil && p.Handler == nil && p.SecretHeaders == nil && p.Payload == nil && p.Retry == nil &&
		p.Priority == nil && p.Timeout == nil && p.Labels == nil && p.Description == nil &&
		p.Missed == nil && p.Overlap == nil && p.Depends == nil && p.Concurrency == nil && p.RateLimit == nil &&
		p.Calendars == nil && p.OnExcluded == nil
}

// checkedPatch is a Patch whose values passed the checks, with defaults
// filled in and the new schedule's next run.
type checkedPatch struct {
	Patch
	next    time.Time
	handler domain.Handler
	// keep are the secret headers sent as domain.SecretMask; seal seals
	// a stored plain value kept as a secret one (nil without a key).
	keep     []string
	seal     sealFunc
	retry    domain.RetryPolicy
	priority domain.Priority
	policy   *domain.JobPolicy
	// concurrency is Concurrency checked, nil when it removes it.
	concurrency *domain.Concurrency
	rateLimit   *domain.RateLimit
}

// CheckPatch says whether Update would accept p, without reading or
// changing any job: nil, an *InvalidError listing every fault, or the
// error of reading the clock (which it reads when p has a valid schedule).
func (s *Service) CheckPatch(ctx context.Context, p Patch) error {
	_, err := s.checkPatch(ctx, p)
	return err
}

func (s *Service) checkPatch(ctx context.Context, p Patch) (*checkedPatch, error) {
	c := &checkedPatch{Patch: p, seal: s.sealFunc()}
	var f faults
	if p.Schedule != nil {
		if sched := s.compile(*p.Schedule, &f); sched != nil {
			now, err := s.Now(ctx)
			if err != nil {
				return nil, err
			}
			if c.next, err = sched.First(now); err != nil {
				addScheduleError(err, &f)
			}
		}
	}
	if p.Handler != nil {
		c.handler = s.checkHandler(*p.Handler, &f)
		if p.SecretHeaders != nil {
			sealed, keep, err := s.sealSecrets(c.handler.Type, *p.SecretHeaders, true, &f)
			if err != nil {
				return nil, err
			}
			c.handler.SecretHeaders, c.keep = sealed, keep
		}
	} else if p.SecretHeaders != nil {
		f.add("handler.secret_headers", "can be changed only with the handler")
	}
	if p.Payload != nil {
		checkPayload(*p.Payload, &f)
	}
	if p.Retry != nil {
		c.retry = s.checkRetry(*p.Retry, &f)
	}
	if p.Priority != nil {
		c.priority = checkPriority(*p.Priority, &f)
	}
	if p.Timeout != nil {
		checkTimeout(*p.Timeout, &f)
	}
	if p.Labels != nil {
		checkLabels(*p.Labels, &f)
	}
	if p.Description != nil {
		checkDescription(*p.Description, &f)
	}
	if p.Missed != nil || p.Overlap != nil {
		c.policy = s.checkPolicy(deref(p.Missed), deref(p.Overlap), &f)
	}
	if p.Concurrency != nil && *p.Concurrency != (domain.Concurrency{}) {
		c.concurrency = checkConcurrency(p.Concurrency, &f)
	}
	if p.RateLimit != nil && *p.RateLimit != (domain.RateLimit{}) {
		c.rateLimit = checkRateLimit(p.RateLimit, &f)
	}
	if p.Calendars != nil || p.OnExcluded != nil {
		checkCalendarNames(deref(p.Calendars), deref(p.OnExcluded), &f)
	}
	if p.Depends != nil {
		checkDepends(p.Depends, false, &f)
	}
	return c, f.err()
}

// apply writes the change to j. It fails, changing nothing, with an
// *InvalidError when the change keeps stored header values it may not
// (see resolveSecrets).
func (c *checkedPatch) apply(j *model.Job) error {
	var handler domain.Handler
	if c.Handler != nil {
		var err error
		if handler, err = resolveSecrets(c.handler, j.Handler, c.SecretHeaders != nil, c.keep, c.seal); err != nil {
			return err
		}
	}
	if c.Schedule != nil && !sameSpec(*c.Schedule, j.Schedule) {
		j.Schedule = *c.Schedule
		// The old schedule's runs are no concern of the new one's.
		j.PausedNextRunAt, j.SkipBefore = nil, nil
		if j.State != domain.JobPaused {
			next := c.next
			j.State, j.NextRunAt = domain.JobActive, &next
		}
	}
	if c.policy != nil {
		p := *c.policy
		// A patch of one policy keeps the other.
		if c.Missed == nil && j.Policy != nil {
			p.Missed = j.Policy.Missed
		}
		if c.Overlap == nil && j.Policy != nil {
			p.Overlap = j.Policy.Overlap
		}
		if j.Policy != nil {
			p.Concurrency, p.RateLimit = j.Policy.Concurrency, j.Policy.RateLimit
			p.Calendars, p.OnExcluded = j.Policy.Calendars, j.Policy.OnExcluded
		}
		j.Policy = &p
	}
	if c.Concurrency != nil || c.RateLimit != nil {
		p := policyOf(j)
		if c.Concurrency != nil {
			p.Concurrency = c.concurrency
		}
		if c.RateLimit != nil {
			p.RateLimit = c.rateLimit
		}
		j.Policy = &p
	}
	if c.Calendars != nil || c.OnExcluded != nil {
		p := policyOf(j)
		names, on := p.Calendars, p.OnExcluded
		if c.Calendars != nil {
			names = *c.Calendars
		}
		if c.OnExcluded != nil {
			on = *c.OnExcluded
			if len(names) == 0 && on != "" {
				return &InvalidError{Faults: []domain.FieldError{{Field: "on_excluded", Message: "applies only to a job with calendars"}}}
			}
		}
		p.Calendars, p.OnExcluded = calendarPolicy(names, on)
		j.Policy = &p
	}
	if c.Handler != nil {
		j.Handler = handler
	}
	if c.Payload != nil {
		j.Payload = *c.Payload
	}
	if c.Retry != nil {
		j.Retry = c.retry
	}
	if c.Priority != nil {
		j.Priority = c.priority
	}
	if c.Timeout != nil {
		j.Timeout = *c.Timeout
	}
	if c.Labels != nil {
		j.Labels = nil
		if len(*c.Labels) > 0 {
			j.Labels = *c.Labels
		}
	}
	if c.Description != nil {
		j.Description = *c.Description
	}
	return nil
}

// Update checks p (as CheckPatch does, before the job is read, so that an
// invalid change is refused whether or not the job exists) and applies it
// to job id. It fails with an *InvalidError, or with store.ErrNotFound.
func (s *Service) Update(ctx context.Context, id uuid.UUID, p Patch) (*model.Job, error) {
	c, err := s.checkPatch(ctx, p)
	if err != nil {
		return nil, err
	}
	j, err := s.modify(ctx, id, func(j *model.Job) (bool, error) {
		if p.IfRevision != 0 && j.Revision != p.IfRevision {
			return false, store.ErrRevision
		}
		if err := unlocked(j); err != nil {
			return false, err
		}
		if c.empty() {
			return false, nil
		}
		if err := c.apply(j); err != nil {
			return false, err
		}
		if err := s.applyDepends(ctx, c.Patch, j); err != nil {
			return false, err
		}
		if p.Calendars != nil || p.OnExcluded != nil || p.Schedule != nil {
			if err := s.CheckCalendars(ctx, j); err != nil {
				return false, err
			}
		}
		return true, slotFault(j)
	})
	if err != nil {
		return nil, s.DependsFault(ctx, err, model.JobRef{ID: id, Name: jobName(j)})
	}
	return j, nil
}

func jobName(j *model.Job) string {
	if j == nil {
		return "this job"
	}
	return j.Name
}

// applyDepends writes p's dependencies to j. A chain stays a chain
// until it gets a schedule; a job that gets a schedule stops being one.
func (s *Service) applyDepends(ctx context.Context, p Patch, j *model.Job) error {
	// An empty schedule ({}: "run once, now" for other jobs) leaves a
	// chain a chain: apply kept its schedule, the same empty one.
	chain := j.Depends != nil && j.Depends.Chain && (p.Schedule == nil || p.Schedule.Kind() == schedule.KindNow)
	if p.Depends == nil {
		if j.Depends != nil && j.Depends.Chain && !chain {
			d := *j.Depends
			d.Chain = false
			j.Depends = &d
		}
		return nil
	}
	if len(p.Depends.On) == 0 {
		if chain {
			return &InvalidError{Faults: []domain.FieldError{{Field: "depends_on",
				Message: "a job without a schedule (a chain) needs its upstreams; give it a schedule to remove them"}}}
		}
		j.Depends = nil
		return nil
	}
	var f faults
	checkDepends(p.Depends, chain, &f)
	if err := f.err(); err != nil {
		return err
	}
	d, err := s.resolveDepends(ctx, j.Namespace, p.Depends, chain, p.MayRead)
	if err != nil {
		return err
	}
	j.Depends = d
	return nil
}

// Pause stops job id firing until Resume: it has no next run meanwhile.
// Pausing a paused job changes nothing; a completed one fails with
// ErrCompleted.
func (s *Service) Pause(ctx context.Context, id uuid.UUID) (*model.Job, error) {
	return s.modify(ctx, id, func(j *model.Job) (bool, error) {
		switch j.State {
		case domain.JobCompleted:
			return false, fmt.Errorf("pause job %s: %w", id, ErrCompleted)
		case domain.JobPaused:
			return false, nil
		}
		j.State, j.PausedNextRunAt, j.NextRunAt = domain.JobPaused, j.NextRunAt, nil
		return true, nil
	})
}

// Resume makes paused job id active again. A recurring job that was
// active when paused picks up at the first run of the pause: with
// catchUp, its missed-run policy decides which of the pause's runs fire
// (those past its grace are missed); without, the runs of the pause are
// skipped, recorded with reason "paused". A job created paused, or whose
// schedule changed while paused, gets its next run from now. A one-shot
// job whose moment passed meanwhile runs now. Resuming an active job
// changes nothing; a completed one fails with ErrCompleted, one whose
// schedule has no run left with ErrNoNextRun.
func (s *Service) Resume(ctx context.Context, id uuid.UUID, catchUp bool) (*model.Job, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	return s.modify(ctx, id, func(j *model.Job) (bool, error) {
		return resume(j, now, catchUp)
	})
}

// resume is Resume's change of j, at now; it says whether it changed j.
func resume(j *model.Job, now time.Time, catchUp bool) (bool, error) {
	switch j.State {
	case domain.JobCompleted:
		return false, fmt.Errorf("resume job %s: %w", j.ID, ErrCompleted)
	case domain.JobActive:
		return false, nil
	}
	j.State, j.SkipBefore = domain.JobActive, nil
	if j.Depends != nil && j.Depends.Chain {
		// A chain has no run of its own: its upstreams' next runs make
		// its executions again.
		return true, nil
	}
	if p := j.PausedNextRunAt; p != nil && j.Schedule.Kind() == schedule.KindCron {
		j.NextRunAt, j.PausedNextRunAt = p, nil
		if !catchUp && p.Before(now) {
			skip := now.Truncate(time.Millisecond)
			j.SkipBefore = &skip
		}
		return true, nil
	}
	next, err := resumeAt(j.Schedule, now)
	if err != nil {
		return false, fmt.Errorf("resume job %s: %w", j.ID, err)
	}
	j.NextRunAt, j.PausedNextRunAt = &next, nil
	return true, nil
}

// resumeAt is the next run of a job with schedule sp resumed at now.
func resumeAt(sp schedule.Spec, now time.Time) (time.Time, error) {
	sched, err := schedule.Compile(sp)
	if err != nil {
		return time.Time{}, fmt.Errorf("compile stored schedule: %w", err)
	}
	if sp.Kind() == schedule.KindAt && sp.At.Before(now) {
		// A one-shot job whose moment passed while it was paused has not
		// run yet: it runs now.
		return now.Truncate(time.Millisecond), nil
	}
	next, err := sched.First(now)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrNoNextRun, err)
	}
	return next, nil
}

// Delete deletes job id and returns its namespace, or fails with
// store.ErrNotFound. Its executions stay: they carry a snapshot of what
// they run. A job others depend on fails with a *store.DependentsError
// naming them (see DeleteUnlinking).
func (s *Service) Delete(ctx context.Context, id uuid.UUID) (namespace string, err error) {
	if err := s.deletable(ctx, id); err != nil {
		return "", err
	}
	return s.store.DeleteJob(ctx, id)
}

// deletable fails with a *LockedError when job id belongs to a locked
// apply set (or with the store's error reading it). A set locked between
// this read and the delete does not stop the delete.
func (s *Service) deletable(ctx context.Context, id uuid.UUID) error {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return err
	}
	return unlocked(j)
}

// DeleteAtRevision deletes job id (first taking it out of its
// dependents' dependencies, with unlink) only while its revision is
// revision (0: any); else it fails with store.ErrRevision.
func (s *Service) DeleteAtRevision(ctx context.Context, id uuid.UUID, revision int64, unlink bool) (namespace string, unlinked []model.JobRef, err error) {
	if err := s.deletable(ctx, id); err != nil {
		return "", nil, err
	}
	return s.store.DeleteJobAtRevision(ctx, id, revision, unlink)
}

// DeleteUnlinking deletes job id as Delete does, first taking it out of
// the dependencies of the jobs that depend on it; it returns them.
func (s *Service) DeleteUnlinking(ctx context.Context, id uuid.UUID) (namespace string, unlinked []model.JobRef, err error) {
	if err := s.deletable(ctx, id); err != nil {
		return "", nil, err
	}
	return s.store.DeleteJobUnlinking(ctx, id)
}

// modify reads job id, lets change edit it, and writes it back if change
// says so. When a firing or another change got to the job in between
// (store.ErrStale), it starts over from a fresh read, so that it never
// writes back an old next run. An error from change is returned as is.
func (s *Service) modify(ctx context.Context, id uuid.UUID, change func(j *model.Job) (bool, error)) (*model.Job, error) {
	for attempt := 0; ; attempt++ {
		j, err := s.store.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		write, err := change(j)
		if err != nil {
			return nil, err
		}
		if !write {
			return j, nil
		}
		err = s.store.UpdateJob(ctx, j)
		if errors.Is(err, store.ErrStale) && attempt < maxStale {
			continue
		}
		if err != nil {
			return nil, err
		}
		return j, nil
	}
}

// sameSpec reports whether two schedules say the same thing.
func sameSpec(a, b schedule.Spec) bool {
	return a.Cron == b.Cron && a.Timezone == b.Timezone && a.In == b.In &&
		sameTime(a.At, b.At) && sameTime(a.Anchor, b.Anchor) && sameTime(a.StartAt, b.StartAt) &&
		sameTime(a.EndAt, b.EndAt) && a.MaxRuns == b.MaxRuns && a.Jitter == b.Jitter
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
