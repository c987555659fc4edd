package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Store is what the use cases need of tock's database; *store.Store is
// the real one.
type Store interface {
	// Now reads the database's clock; the default Clock measures it.
	Now(ctx context.Context) (time.Time, error)
	CreateJob(ctx context.Context, j *model.Job) error
	CreateJobBatch(ctx context.Context, jobs []*model.Job) ([]error, error)
	GetJob(ctx context.Context, id uuid.UUID) (*model.Job, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]*model.Job, string, error)
	UpdateJob(ctx context.Context, j *model.Job) error
	DeleteJob(ctx context.Context, id uuid.UUID) (namespace string, err error)
	DeleteJobAtRevision(ctx context.Context, id uuid.UUID, revision int64, unlink bool) (namespace string, unlinked []model.JobRef, err error)
	DeleteJobUnlinking(ctx context.Context, id uuid.UUID) (namespace string, unlinked []model.JobRef, err error)
	ListJobRefs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]model.JobRef, error)
	GetJobRef(ctx context.Context, namespace, name string) (model.JobRef, error)
	CreateManualExecution(ctx context.Context, jobID uuid.UUID, at time.Time) (*model.Execution, error)
	CancelExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error)
	RedriveExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error)
	CreateBackfill(ctx context.Context, jobID uuid.UUID, from, to time.Time, total int64) (*model.Backfill, error)
	StopBackfill(ctx context.Context, jobID, id uuid.UUID) (*model.Backfill, error)
	ListCalendars(ctx context.Context, namespace string) ([]model.Calendar, error)
	ListCalendarJobs(ctx context.Context, namespace string, names []string, limit int) ([]*model.Job, error)
	UpdateJobNextRuns(ctx context.Context, moves []model.NextRunMove) (int, error)
}

// Clock is the database's clock, from which first runs are computed (the
// scanners judge due times by it); *clock.DB is the real one.
type Clock interface {
	// Fresh is the database's time, in UTC, from an offset measured
	// recently enough.
	Fresh(ctx context.Context) (time.Time, error)
}

// Executors is how a cancellation reaches the executors, which stop a
// running attempt; api.JetStreamExecutors is the real one.
type Executors interface {
	Cancel(ctx context.Context, executionID uuid.UUID) error
}

// clockEvery is how long the default Clock uses a measured offset to the
// database's clock before it measures it again. Reading the database's
// clock for every job created cost a round trip to Postgres per job, a
// third of POST /v1/jobs's. One round trip per sync: the offset's error,
// half of it, is well under a millisecond, and a sync delays the call that
// makes it.
const clockEvery = 10 * time.Second

// Config configures a Service. Call WithDefaults, or let New do it.
type Config struct {
	// Store is the database. Required.
	Store Store
	// Clock is the database's clock. When nil, WithDefaults makes one
	// over Store.Now that measures the offset every 10 s, one round trip
	// at a time.
	Clock Clock
	// Executors is told of cancellations. Optional: without it Cancel
	// fails with ErrNoExecutors and changes nothing.
	Executors Executors
	// DefaultRetry is the cluster's retry policy: fields a job leaves out
	// are filled from it when the job is created or its retry policy
	// replaced. The zero value means one attempt.
	DefaultRetry domain.RetryPolicy
	// DefaultMissed and DefaultOverlap are the cluster's missed-run and
	// overlap policies: what a job leaves out is filled from them when it
	// is created (and stored with it, so that GET shows what applies).
	// Their empty fields are domain.DefaultMissed's and
	// domain.DefaultOverlap.
	DefaultMissed  domain.MissedPolicy
	DefaultOverlap string
	// MaxLogCap is the largest log cap a job may ask for
	// (handler.log.cap_bytes); 0 means domain.DefaultMaxLogCap.
	MaxLogCap int64
	// HTTPPolicy says which URLs an http handler may call; a job whose
	// URL it refuses by its text (egress.Policy.CheckURL) is invalid
	// (handler.url). Nil is egress's default: private, loopback,
	// link-local and metadata addresses are refused.
	HTTPPolicy *egress.Policy
	// Secrets seals the values of http handlers' secret headers before
	// they are stored (the store, job specs, executions and the messages
	// to executors hold them sealed). Nil: a job given secret headers is
	// invalid (handler.secret_headers: this server has no
	// --secret-key-file).
	Secrets Sealer
}

// WithDefaults returns c with its defaults filled in.
func (c Config) WithDefaults() Config {
	if c.Clock == nil && c.Store != nil {
		c.Clock = clock.New(c.Store.Now, clock.Options{Every: clockEvery, Rounds: 1})
	}
	c.DefaultMissed = c.DefaultMissed.WithDefaults(domain.DefaultMissed)
	if c.DefaultOverlap == "" {
		c.DefaultOverlap = domain.DefaultOverlap
	}
	return c
}

// validate rejects a Config New cannot work with.
func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("jobs: Config.Store is nil")
	}
	if c.Clock == nil {
		return errors.New("jobs: Config.Clock is nil")
	}
	if c.MaxLogCap != 0 && c.MaxLogCap < domain.MinLogCap {
		return fmt.Errorf("jobs: Config.MaxLogCap %d (--log-max-cap): want at least %d bytes", c.MaxLogCap, domain.MinLogCap)
	}
	if errs := c.DefaultRetry.Validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("jobs: Config.DefaultRetry: %s", strings.Join(msgs, "; "))
	}
	if errs := c.DefaultMissed.Validate(); len(errs) > 0 {
		return fmt.Errorf("jobs: Config.DefaultMissed: %s", errs[0])
	}
	if !domain.ValidOverlap(c.DefaultOverlap) {
		return fmt.Errorf("jobs: Config.DefaultOverlap %q is not one of %v", c.DefaultOverlap, domain.Overlaps)
	}
	return nil
}

// Service carries out the use cases. Its methods are safe for concurrent
// use.
type Service struct {
	store        Store
	clock        Clock
	executors    Executors
	defaultRetry domain.RetryPolicy
	defaults     domain.JobPolicy
	httpPolicy   *egress.Policy
	sealer       Sealer
	maxLogCap    int64

	compiled schedule.Cache
}

// New returns a Service for cfg, with its defaults filled in; it fails if
// cfg makes no sense.
func New(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{store: cfg.Store, clock: cfg.Clock, executors: cfg.Executors, defaultRetry: cfg.DefaultRetry,
		defaults: domain.JobPolicy{Missed: cfg.DefaultMissed, Overlap: cfg.DefaultOverlap}, httpPolicy: cfg.HTTPPolicy, sealer: cfg.Secrets,
		maxLogCap: cmp.Or(cfg.MaxLogCap, domain.DefaultMaxLogCap)}, nil
}

// Now is the database's time, in UTC, as the use cases read it.
func (s *Service) Now(ctx context.Context) (time.Time, error) {
	return s.clock.Fresh(ctx)
}

// Errors of the use cases, for errors.Is. The store's errors come through
// as they are: store.ErrNotFound (no such job or execution),
// store.ErrConflict (a job's name is taken), store.ErrFinished (cancel of
// a finished execution), store.ErrNotDead (re-drive of a live one).
var (
	// ErrCompleted: the job has completed (its one run, or its schedule's
	// last, has fired), so it can be neither paused nor resumed; a new
	// schedule (Update) makes it run again.
	ErrCompleted = errors.New("the job has completed")
	// ErrNoNextRun: the job cannot be resumed, its schedule has no run
	// left. The error also wraps the schedule's *schedule.FieldError.
	ErrNoNextRun = errors.New("the job's schedule has no run left")
	// ErrNoExecutors: the Service was built without Executors, so it can
	// cancel nothing.
	ErrNoExecutors = errors.New("no connection to the executors")
	// ErrNotAnnounced: the cancellation is recorded, but the executors
	// could not be told; cancelling again is safe and tells them.
	ErrNotAnnounced = errors.New("the cancellation is recorded but the executors were not told")
)

// InvalidError lists everything wrong with a job or a change a caller
// asked for. Each fault names its field as the REST API's JSON does:
// "name", "schedule.cron", "handler.url", "retry.max_backoff", "timeout".
type InvalidError struct {
	Faults []domain.FieldError
}

// Error lists the faults: "jobs: invalid: name: is required; …".
func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Faults))
	for i, f := range e.Faults {
		msgs[i] = f.Error()
	}
	return "jobs: invalid: " + strings.Join(msgs, "; ")
}

// Faults is the list of faults in err, if it is (or wraps) an
// *InvalidError, else nil.
func Faults(err error) []domain.FieldError {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Faults
	}
	return nil
}

// faults collects an InvalidError's faults.
type faults []domain.FieldError

func (f *faults) add(field, format string, args ...any) {
	*f = append(*f, domain.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err is nil when nothing was collected, else an *InvalidError.
func (f faults) err() error {
	if len(f) == 0 {
		return nil
	}
	return &InvalidError{Faults: f}
}
