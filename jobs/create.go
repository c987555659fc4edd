package jobs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// DefaultNamespace is the namespace of a job whose creator names none.
const DefaultNamespace = "default"

// NewJob is what a caller says about a job to create.
type NewJob struct {
	// Namespace and Name name the job; both are required (see
	// NameProblem), DefaultNamespace is the usual namespace.
	Namespace string
	Name      string
	// Schedule says when the job runs; the zero Spec runs it once, now.
	Schedule schedule.Spec
	// Handler says who runs it; an http handler's Method defaults to POST.
	// Its SecretHeaders stay empty: secret values are given, in clear,
	// in SecretHeaders.
	Handler domain.Handler
	// SecretHeaders are the http handler's secret headers, name → value
	// in clear: Build seals each value (Config.Secrets) into
	// Handler.SecretHeaders, and the clear values go no further. Each
	// value is non-empty, at most MaxSecretValue bytes, without control
	// characters, and not domain.SecretMask; names are header names that
	// do not repeat Handler.Headers' in any case; at most
	// MaxSecretHeaders.
	SecretHeaders map[string]string
	// Payload is the JSON its executions carry, nil for none: what
	// Postgres's jsonb stores as it is, at most MaxPayloadBytes.
	Payload json.RawMessage
	// Retry is its retry policy; the fields it leaves out come from
	// Config.DefaultRetry.
	Retry domain.RetryPolicy
	// Priority is its class; "" is normal.
	Priority domain.Priority
	// Timeout bounds each attempt, at most MaxTimeout; 0 is none.
	Timeout time.Duration
	// Paused creates the job paused: it has no next run until Resume.
	Paused bool
	// Labels are key/value labels (domain.Labels' syntax) for selectors;
	// Description is free text for people, at most
	// domain.MaxDescription bytes.
	Labels      domain.Labels
	Description string
	// Missed and Overlap are its missed-run and overlap policies; what
	// they leave out comes from Config.DefaultMissed and DefaultOverlap.
	Missed  domain.MissedPolicy
	Overlap string
	// Concurrency, when set, limits how many executions sharing its key
	// run at once (domain.Concurrency).
	Concurrency *domain.Concurrency
	// RateLimit, when set, bounds how many executions sharing its key
	// start per window (domain.RateLimit).
	RateLimit *domain.RateLimit
	// Calendars name calendars of the job's namespace that must allow
	// its runs (at most domain.MaxJobCalendars); OnExcluded says what
	// happens to a run they do not allow (domain.OnExcludedSkip, the
	// default, or OnExcludedNextAllowed), given only with Calendars.
	// Create checks that they exist and allow a run (CheckCalendars).
	Calendars  []string
	OnExcluded string
	// Depends, when set, makes the job wait for others; with a zero
	// Schedule the job is a chain (it runs once per scheduled run of its
	// upstreams) rather than a run now.
	Depends *DependsSpec
	// MayRead says whether the caller may read a namespace: an upstream
	// in another namespace must pass it (nil: none may).
	MayRead func(namespace string) bool
}

// Chain reports whether nj is a chain: dependencies and no schedule.
func (nj *NewJob) Chain() bool { return nj.chain() }

// chain reports whether nj is a chain: dependencies and no schedule.
func (nj *NewJob) chain() bool {
	return nj.Depends != nil && nj.Schedule.Kind() == schedule.KindNow
}

// Build checks nj and returns the job Create would store: defaults
// filled in, active (unless nj.Paused) with its first run computed from
// now. now is called only when the schedule is valid and the job is not
// paused, so a batch can share one reading of the clock. What is wrong
// with nj comes back as an *InvalidError listing every fault; any other
// error is now's.
func (s *Service) Build(nj NewJob, now func() (time.Time, error)) (*model.Job, error) {
	var f faults
	checkName("name", nj.Name, &f)
	checkName("namespace", nj.Namespace, &f)
	var sched *schedule.Schedule
	if !nj.chain() {
		sched = s.compile(nj.Schedule, &f)
	}
	checkDepends(nj.Depends, nj.chain(), &f)
	// One check after another, so that the faults come in a fixed order
	// (the API reports them in it); the first run's comes last.
	handler := s.checkHandler(nj.Handler, &f)
	sealed, _, err := s.sealSecrets(handler.Type, nj.SecretHeaders, false, &f)
	if err != nil {
		return nil, err
	}
	handler.SecretHeaders = sealed
	checkMaskedHeaders(handler, &f)
	checkSecretNames(handler, &f)
	checkPayload(nj.Payload, &f)
	retry := s.checkRetry(nj.Retry, &f)
	priority := checkPriority(nj.Priority, &f)
	checkTimeout(nj.Timeout, &f)
	checkLabels(nj.Labels, &f)
	checkDescription(nj.Description, &f)
	policy := s.checkPolicy(nj.Missed, nj.Overlap, &f)
	policy.Concurrency = checkConcurrency(nj.Concurrency, &f)
	policy.RateLimit = checkRateLimit(nj.RateLimit, &f)
	checkCalendarNames(nj.Calendars, nj.OnExcluded, &f)
	if len(nj.Calendars) == 0 && nj.OnExcluded != "" {
		f.add("on_excluded", "applies only to a job with calendars")
	}
	policy.Calendars, policy.OnExcluded = calendarPolicy(nj.Calendars, nj.OnExcluded)
	j := &model.Job{
		Policy:    policy,
		Namespace: nj.Namespace,
		Name:      nj.Name,
		Schedule:  nj.Schedule,
		Handler:   handler,
		Payload:   nj.Payload,
		State:     domain.JobActive,
		Retry:     retry,
		Priority:  priority,
		Timeout:   nj.Timeout,
	}
	if len(nj.Labels) > 0 {
		j.Labels = nj.Labels
	}
	j.Description = nj.Description
	if (policy.Concurrency != nil || policy.RateLimit != nil) && nj.Depends != nil {
		f.add(keyedField(policy), "%s", errKeyedDepends)
	} else if f.err() == nil {
		keySlot(j, &f)
	}
	switch {
	case nj.Paused:
		j.State = domain.JobPaused
	case sched != nil:
		t, err := now()
		if err != nil {
			return nil, err
		}
		next, err := sched.First(t)
		if err != nil {
			addScheduleError(err, &f)
		}
		j.NextRunAt = &next
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return j, nil
}

// Create checks nj, computes its first run from the database's clock and
// stores the job. It fails with an *InvalidError when nj is not a valid
// job, and with an error wrapping store.ErrConflict when its name is
// taken in its namespace.
func (s *Service) Create(ctx context.Context, nj NewJob) (*model.Job, error) {
	j, err := s.Build(nj, func() (time.Time, error) { return s.Now(ctx) })
	if err != nil {
		return nil, err
	}
	if nj.Depends != nil {
		if j.Depends, err = s.resolveDepends(ctx, j.Namespace, nj.Depends, nj.chain(), nj.MayRead); err != nil {
			return nil, err
		}
	}
	if err := s.CheckCalendars(ctx, j); err != nil {
		return nil, err
	}
	if err := s.store.CreateJob(ctx, j); err != nil {
		return nil, s.DependsFault(ctx, err, model.JobRef{ID: j.ID, Namespace: j.Namespace, Name: j.Name})
	}
	return j, nil
}

// CreateBatch stores jobs that Build made, in one transaction, and says
// job by job which were stored: errs[i] is nil when jobs[i] was, or says
// why not (wrapping store.ErrConflict when its name is taken); the others
// are stored all the same. The error returned is for the call as a whole:
// then nothing was stored.
func (s *Service) CreateBatch(ctx context.Context, jobs []*model.Job) ([]error, error) {
	return s.store.CreateJobBatch(ctx, jobs)
}
