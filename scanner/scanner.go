// Package scanner fires due jobs in the buckets this node owns: it loads
// the jobs due within a short look-ahead into a timer heap, fires them on
// their time in batched transactions that check the bucket's fencing
// epoch, and hands the executions to the dispatcher.
//
// One goroutine (Run) owns all state, so a bucket's release waits for any
// firing transaction in flight to finish. The scanner hears about created
// and changed jobs through Postgres LISTEN/NOTIFY, so a job due within the
// look-ahead does not wait for the next scan; and about executions put
// back in the outbox (retries, deferred deliveries, manual runs,
// re-drives), which it reads at once and hands to the dispatcher to
// publish when due. (Running executions that stopped giving signs of life
// are re-queued by maintenance.LostWorkRescuer, in the buckets Owned reports.)
// Time is the database's clock (Config.Clock), which the scanner keeps
// fresh: it re-syncs it whenever a sync is due.
//
// Missed runs. A run that could not fire within its grace (the cluster was
// down, a bucket moved, the scanner fell behind, or firing was held back
// because the executors were behind: Config.Backlog) is missed, and the job's
// missed-run policy decides which missed runs fire (skip, latest, all up
// to a maximum); the others are recorded as skipped. Every scheduled time
// fires at most once either way (see plan).
package scanner

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/telemetry"
)

// Store is what the scanner needs from Postgres.
type Store interface {
	Now(ctx context.Context) (time.Time, error)
	ClaimBucket(ctx context.Context, bucket int, node string, epoch int64) error
	ReleaseBufferedExecutions(ctx context.Context, buckets []int) (int, error)
	ListDueJobs(ctx context.Context, buckets []int, after, until time.Time, limit int) ([]model.Due, error)
	// ListCalendars is read only for due jobs that name calendars.
	ListCalendars(ctx context.Context, namespace string) ([]model.Calendar, error)
	GetJob(ctx context.Context, id uuid.UUID) (*model.Job, error)
	Fire(ctx context.Context, node string, epochs map[int]int64, firings []store.Firing) (model.FireResult, error)
	ListUndispatchedExecutions(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error)
	ListRedispatches(ctx context.Context, buckets []int, limit int, until time.Time) ([]*model.Execution, error)
	Listen(ctx context.Context, fn func(channel, payload string), channels ...string) error
}

// Dispatcher publishes fired executions; dispatcher.Dispatcher is one.
// Hold keeps its publish positions (see store.AdvancePublishPositions) at or before
// floor while a firing transaction is in flight, until release.
type Dispatcher interface {
	Dispatch(ctx context.Context, execs []*model.Execution)
	Hold(floor time.Time) (release func())
}

// Clock is the database's clock; *clock.DB is one. The scanner judges
// due times by Now, holds the dispatcher's publish positions at Passed
// (see Dispatcher.Hold), and calls SyncIfDue on every step.
type Clock interface {
	Now() time.Time
	Passed() time.Time
	SyncIfDue(ctx context.Context) error
}

// Config configures a Scanner. Store, Dispatcher and NodeID are required.
type Config struct {
	Store      Store
	Dispatcher Dispatcher
	NodeID     string
	// Clock is the database's clock, shared with the dispatcher, which
	// publishes nothing before its Passed. Default: a clock.DB of
	// Store.Now with clock.Options' defaults (a sync of five round trips
	// every 30s, 5s after a failed one).
	Clock Clock
	// Lookahead is how far ahead due jobs are loaded; default 6s. It
	// bounds the adaptive fire lead (see MaxFireLead).
	Lookahead time.Duration
	// ScanInterval is how often owned buckets are scanned; default 1s.
	ScanInterval time.Duration
	// OutboxInterval is how often the outbox is read: executions not yet
	// published (a crash, a lost ack, a manual run) and retries and
	// deferred deliveries coming due. Each read takes what is due within
	// OutboxInterval + 1s, which the dispatcher holds until its time, so a
	// retry is published on time however long its backoff. Default 2s.
	OutboxInterval time.Duration
	// FirstDispatchEvery: every this many outbox passes (and when it takes
	// buckets) the outbox read includes fired executions' first dispatches
	// not yet covered by their bucket's publish position; the other passes
	// read re-dispatches and manual runs only. The node's own dispatcher
	// publishes what it fires and retries what JetStream did not
	// acknowledge, so the first dispatches' read is a safety net, and read
	// every pass it cost Postgres and tockd about 8 µs an execution (it
	// found, and threw away, every execution fired in the last seconds;
	// docs/bench.md, issue 36). Default 15 (30 s with the default
	// OutboxInterval); 1 reads them every pass.
	FirstDispatchEvery int
	// BatchSize caps the firings in one transaction; default 1000.
	BatchSize int
	// FireConcurrency is how many firing transactions may be in flight
	// at once: a busy second's batches overlap their round trips and
	// commits. Default 3.
	FireConcurrency int
	// FireLead is how long before its time a run is fired: its execution
	// is committed early, so that the dispatcher, which publishes nothing
	// before its scheduled time, can publish it on the dot. A job paused,
	// changed or deleted less than FireLead before a run still has that
	// run. Default 500ms; it must be below Lookahead.
	FireLead time.Duration
	// MaxFireLead bounds the adaptive fire lead. When more runs fall on
	// the same seconds than firing can commit within FireLead (a burst:
	// thousands of jobs at the top of the hour), those seconds are fired
	// earlier, as early as the runs due up to them take to fire at the
	// rate firing has been measured to sustain, so that all of them are
	// committed, and held by the dispatcher, before their time. A job
	// changed less than the lead before such a run still has that run.
	// Default 5s, or five sixths of Lookahead if that is less (but not
	// below FireLead); at least FireLead and below Lookahead.
	MaxFireLead time.Duration
	// Missed is the missed-run policy of jobs whose stored policy leaves
	// fields empty (jobs stored before policies existed); its empty
	// fields are domain.DefaultMissed's.
	Missed domain.MissedPolicy
	// ScanLimit caps the jobs one scan loads; default 500,000.
	ScanLimit int
	// FullScanEvery: every this many scans, the whole look-ahead is read
	// again (jobs whose change notification was missed); the scans in
	// between read only the slice that came into the look-ahead since the
	// last one. Default 10.
	FullScanEvery int
	// Cancel, if set, tells the executors to stop an execution that an
	// overlap policy (cancel_running) cancelled; wire.CancelExecution is
	// the one to use. Without it the execution is cancelled in the
	// database only: a running attempt goes on, and its result cannot
	// revive it.
	Cancel func(ctx context.Context, id uuid.UUID) error
	// Backlog, if set, holds firing back while too much waits for
	// executors (backpressure): the executions in the exec queues and
	// those the dispatcher holds due and unpublished, as last read
	// (dispatcher.BacklogWatch is the one to use; nil: firing is never
	// held back). Before each batch the scanner adds the runs it fired
	// since that reading; when the sum reaches the limit (see BacklogFor
	// and MinBacklog), further batches wait, and their runs stay due in
	// Postgres until the executors catch up. They fire late, in due
	// order, and the jobs' missed-run policies apply as after an outage:
	// under the default (latest, 60s grace) a run held back less than the
	// grace fires; of a job's runs held back longer, only the newest
	// fires, and the others are skipped as missed. A queue counts
	// at most 2 x BacklogFor of its own delivery rate, so a queue far
	// behind on its own (a slow custom handler, its executors down) does
	// not hold back the others. Without a reading (NATS down, none yet)
	// firing is not held back. Runs fired ahead of a burst (the adaptive
	// lead, MaxFireLead) are not counted until they are due, so an empty
	// backlog changes nothing.
	Backlog Backlog
	// BacklogFor sets the backlog limit: what the executors take in this
	// long, at the delivery rate measured over all queues; default 3s.
	BacklogFor time.Duration
	// MinBacklog is the least backlog limit, whatever the rate; default
	// 5000.
	MinBacklog int
	// LeaseValid, if set, is asked before every firing transaction; when
	// it says no (the node cannot prove its etcd lease is alive), nothing
	// fires. partition.Node.Valid is the one to use.
	LeaseValid func() bool
	// Logger is where it logs; tockd's carries the node id (node=...).
	Logger *slog.Logger
	// Tracer, if set, makes a telemetry.SpanFire span for each execution
	// fired (sampled by its id): from the firing transaction's start to
	// its commit; the dispatcher's publish span is its child.
	Tracer trace.Tracer
	// Registerer is where the scanner's Prometheus metrics (tock_fired_total,
	// tock_buckets_owned, tock_skipped_total, tock_fire_backlog and the
	// others of metrics.go) are registered; nil registers them nowhere.
	// tockd passes the node's registry.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the durations and sizes it leaves zero (or
// negative, where noted) set to their defaults, and a clock.DB of
// Store.Now and the default logger if none is given.
func (c Config) WithDefaults() Config {
	orDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orInt := func(n *int, def int) {
		if *n <= 0 {
			*n = def
		}
	}
	orDuration(&c.Lookahead, 6*time.Second)
	orDuration(&c.ScanInterval, time.Second)
	orDuration(&c.OutboxInterval, 2*time.Second)
	orInt(&c.FirstDispatchEvery, 15)
	orInt(&c.BatchSize, 1000)
	orInt(&c.FireConcurrency, 3)
	if c.FireLead == 0 {
		c.FireLead = 500 * time.Millisecond
	}
	if c.MaxFireLead == 0 {
		c.MaxFireLead = max(c.FireLead, min(5*time.Second, c.Lookahead*5/6))
	}
	c.Missed = c.Missed.WithDefaults(domain.DefaultMissed)
	orInt(&c.ScanLimit, 500_000)
	orInt(&c.FullScanEvery, 10)
	orDuration(&c.BacklogFor, 3*time.Second)
	orInt(&c.MinBacklog, 5000)
	if c.Clock == nil && c.Store != nil {
		c.Clock = clock.New(c.Store.Now, clock.Options{})
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate rejects a configuration (with its defaults) that cannot work.
func (c *Config) validate() error {
	if c.Store == nil || c.Dispatcher == nil || c.NodeID == "" {
		return errors.New("scanner: Config.Store, Dispatcher and NodeID are required")
	}
	if c.ScanInterval > c.Lookahead {
		return fmt.Errorf("scanner: ScanInterval %s must not exceed Lookahead %s", c.ScanInterval, c.Lookahead)
	}
	if c.FireLead < 0 || c.FireLead >= c.Lookahead {
		return fmt.Errorf("scanner: FireLead %s must be at least 0 and below Lookahead %s", c.FireLead, c.Lookahead)
	}
	if c.MaxFireLead < c.FireLead || c.MaxFireLead >= c.Lookahead {
		return fmt.Errorf("scanner: MaxFireLead %s must be at least FireLead %s and below Lookahead %s", c.MaxFireLead, c.FireLead, c.Lookahead)
	}
	return nil
}

// Scanner fires due jobs in owned buckets. It implements partition.Assignee.
type Scanner struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	acquire chan ownership
	release chan releaseReq
	notify  chan string // "<bucket>:<job id>" or "<bucket>" for the outbox
	stopped chan struct{}
	clock   Clock

	// Owned by Run's goroutine.
	owned      map[int]int64
	heap       entryHeap
	index      map[uuid.UUID]*entry
	loaded     time.Time // jobs due up to here are in the heap
	nextScan   time.Time
	nextOutbox time.Time
	outboxDue  map[int]bool // buckets whose outbox changed (ExecChannel)
	// outboxPasses counts the regular outbox passes (FirstDispatchEvery).
	outboxPasses int
	pending      []ownership   // acquired but not yet recorded in Postgres
	claimRetry   retry.Backoff // paces claimPending while a claim fails
	claimPause   time.Duration // until claimPending tries pending again
	scans        int           // scans since the last full one
	fullNext     bool          // the next scan reads the whole look-ahead
	compiled     schedule.Cache
	// calendars are the compiled calendars of the namespaces whose due
	// jobs name some, each read at most calendarTTL ago.
	calendars map[string]nsCalendars
	// renotify are the jobs announced changed while a firing of theirs
	// was in flight (their announcements): read again once it is done,
	// since the firing's result puts back the job as it was read before
	// the change (a chain created on it, say, would otherwise miss its
	// runs until the next full scan).
	renotify map[uuid.UUID]string
	// Firing transactions in flight: their results arrive on fired; the
	// jobs they fire are in firing, so that a scan meanwhile does not
	// load them again at the time being fired.
	results chan fireResult
	flying  int
	firing  map[uuid.UUID]bool
	// The adaptive fire lead (Config.MaxFireLead): the heap's runs counted
	// by second when it was last scanned, and the firing rate measured.
	dueBy    []dueCount
	fireRate float64 // runs per second, all transactions in flight together
	// Backpressure (Config.Backlog): runs counted against the backlog in
	// transactions in flight, and landed in the dispatcher since the
	// oldest reading that may not include them; since when firing is held
	// back (zero: it is not), and when that was last logged.
	flyingCounted int
	landed        []landing
	heldAt        time.Time
	heldLogged    time.Time

	// ownedList is owned's buckets, sorted, for Owned, which other
	// goroutines call; Run's goroutine replaces it when owned changes.
	ownedMu   sync.Mutex
	ownedList []int
}

// dueCount is how many runs in the heap were due at or before the end of
// second at, when it was counted.
type dueCount struct {
	at  time.Time // a whole second
	cum int
}

// fireResult is what a firing transaction in flight did.
type fireResult struct {
	started time.Time // local clock
	counted int       // runs counted against the backlog (mayFire)
	batch   []*entry
	firings []store.Firing
	res     model.FireResult
	err     error
	release func()
}

type ownership struct {
	bucket int
	epoch  int64
}

type releaseReq struct {
	bucket int
	done   chan struct{}
}

// New checks cfg and returns a Scanner that does nothing until Run.
func New(cfg Config) (*Scanner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("scanner: register metrics: %w", err)
	}
	return &Scanner{
		cfg:       cfg,
		log:       cfg.Logger,
		m:         m,
		acquire:   make(chan ownership, 4096),
		release:   make(chan releaseReq),
		notify:    make(chan string, 4096),
		stopped:   make(chan struct{}),
		clock:     cfg.Clock,
		owned:     map[int]int64{},
		index:     map[uuid.UUID]*entry{},
		outboxDue: map[int]bool{},
		results:   make(chan fireResult, cfg.FireConcurrency),
		firing:    map[uuid.UUID]bool{},
		calendars: map[string]nsCalendars{},
		renotify:  map[uuid.UUID]string{},
		// Postgres is down, or the row is locked: try again in about a
		// second, not in step with the other nodes.
		claimRetry: retry.Backoff{Initial: time.Second, Max: time.Second},
	}, nil
}

// Acquire starts firing in bucket once epoch is recorded in Postgres.
func (s *Scanner) Acquire(bucket int, epoch int64) {
	select {
	case s.acquire <- ownership{bucket, epoch}:
	case <-s.stopped:
	}
}

// Release stops firing in bucket and returns when no firing transaction
// in it is in flight.
func (s *Scanner) Release(bucket int) {
	req := releaseReq{bucket, make(chan struct{})}
	select {
	case s.release <- req:
		<-req.done
	case <-s.stopped:
	}
}

// Run fires jobs until ctx ends. Firing stops before Run returns.
func (s *Scanner) Run(ctx context.Context) error {
	defer close(s.stopped)
	var wg sync.WaitGroup
	defer wg.Wait()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.listen(lctx)
	}()

	s.syncClock(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.land(ctx)
			s.m.bucketsOwned.Sub(float64(len(s.owned)))
			s.setOwnedList(nil)
			return nil
		case o := <-s.acquire:
			s.pending = append(s.pending, o)
		case r := <-s.release:
			s.drop(r.bucket)
			// Handed over only once no firing transaction is in flight.
			s.land(ctx)
			close(r.done)
		case r := <-s.results:
			s.fired(ctx, r)
		case n := <-s.notify:
			s.onNotify(ctx, n)
			// Take what else has come, so that a burst of outbox
			// notifications (the recorder re-queuing retries) costs one
			// outbox read.
			for more := true; more; {
				select {
				case n := <-s.notify:
					s.onNotify(ctx, n)
				default:
					more = false
				}
			}
		case <-timer.C:
		}
		s.step(ctx)
		timer.Reset(s.sleep())
	}
}

// step does whatever is due: record new ownerships, sync the clock, scan,
// re-dispatch the outbox, fire.
func (s *Scanner) step(ctx context.Context) {
	if len(s.pending) > 0 {
		s.claimPending(ctx)
	}
	s.syncClock(ctx)
	now := s.clock.Now()
	if !now.Before(s.nextScan) {
		if s.heldAt.IsZero() {
			s.scan(ctx, now)
		} else {
			// Firing is held back (Config.Backlog): the heap has more due
			// than may fire, and whatever a scan would add is due later
			// still. Re-reading the due jobs every second would cost more
			// the longer the overload; the scan comes once the heap's due
			// runs have fired (setHeld).
			s.nextScan = now.Add(s.cfg.ScanInterval)
		}
	}
	if !now.Before(s.nextOutbox) {
		s.outboxPasses++
		s.outbox(ctx, s.ownedBuckets(), s.outboxPasses%s.cfg.FirstDispatchEvery == 0)
		s.nextOutbox = now.Add(s.cfg.OutboxInterval)
		clear(s.outboxDue)
	} else if len(s.outboxDue) > 0 {
		var buckets []int
		for b := range s.outboxDue {
			if _, ok := s.owned[b]; ok {
				buckets = append(buckets, b)
			}
		}
		clear(s.outboxDue)
		sort.Ints(buckets)
		s.outbox(ctx, buckets, false)
	}
	s.fireDue(ctx)
}

func (s *Scanner) sleep() time.Duration {
	now := s.clock.Now()
	next := s.nextScan
	if s.nextOutbox.Before(next) {
		next = s.nextOutbox
	}
	switch {
	case !s.heldAt.IsZero():
		// Held back: the top of the heap is due, so look again shortly.
		next = minTime(next, now.Add(holdRecheck))
	case len(s.heap) > 0:
		if at := s.fireAt(s.heap[0].due); at.Before(next) {
			next = at
		}
	}
	if len(s.pending) > 0 {
		next = now.Add(s.claimPause) // retry recording ownership
	}
	d := next.Sub(now)
	if d < 0 {
		d = 0
	}
	return d
}

// syncClock measures the database clock against the local one when a
// sync is due (see clock.DB.Sync).
func (s *Scanner) syncClock(ctx context.Context) {
	if err := s.clock.SyncIfDue(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("read database clock", "err", err)
	}
}

// claimPending records the epochs of newly acquired buckets in Postgres.
// Only then does the scanner fire there: a firing transaction checks the
// recorded epoch, and an older owner's firings stop at this write.
func (s *Scanner) claimPending(ctx context.Context) {
	var failed []ownership
	var added []int
	for _, o := range s.pending {
		err := s.cfg.Store.ClaimBucket(ctx, o.bucket, s.cfg.NodeID, o.epoch)
		switch {
		case err == nil:
			if _, had := s.owned[o.bucket]; !had {
				s.m.bucketsOwned.Inc()
			}
			s.owned[o.bucket] = o.epoch
			added = append(added, o.bucket)
		case errors.Is(err, store.ErrFenced):
			s.log.Warn("bucket already owned at a newer epoch", "bucket", o.bucket, "epoch", o.epoch)
		default:
			if ctx.Err() == nil {
				s.log.Warn("record bucket epoch", "bucket", o.bucket, "err", err)
				failed = append(failed, o)
			}
		}
	}
	s.pending = failed
	if len(failed) > 0 {
		s.claimPause = s.claimRetry.Next()
	} else {
		s.claimRetry.Reset()
	}
	if len(added) > 0 {
		s.setOwnedList(s.ownedBuckets())
		s.load(ctx, added, time.Time{}, s.loaded)
		s.outbox(ctx, added, true)
	}
}

func (s *Scanner) drop(bucket int) {
	for i, o := range s.pending {
		if o.bucket == bucket {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			break
		}
	}
	if _, ok := s.owned[bucket]; ok {
		delete(s.owned, bucket)
		s.m.bucketsOwned.Dec()
		s.setOwnedList(s.ownedBuckets())
	}
	// Heap entries of the bucket are skipped lazily when popped.
}

// Owned returns the buckets the scanner fires in now (their epochs
// recorded in Postgres), sorted; maintenance.LostWorkRescuer re-queues lost work
// in them. It is safe to call from any goroutine.
func (s *Scanner) Owned() []int {
	s.ownedMu.Lock()
	defer s.ownedMu.Unlock()
	return slices.Clone(s.ownedList)
}

// setOwnedList publishes buckets (owned's, sorted) to Owned.
func (s *Scanner) setOwnedList(buckets []int) {
	s.ownedMu.Lock()
	s.ownedList = buckets
	s.ownedMu.Unlock()
}

func (s *Scanner) ownedBuckets() []int {
	out := make([]int, 0, len(s.owned))
	for b := range s.owned {
		out = append(out, b)
	}
	sort.Ints(out)
	return out
}

func (s *Scanner) scan(ctx context.Context, now time.Time) {
	s.nextScan = now.Add(s.cfg.ScanInterval)
	until := now.Add(s.cfg.Lookahead)
	if len(s.owned) == 0 {
		s.loaded = until
		return
	}
	// Cost grows with the jobs coming due, not with the jobs stored: most
	// scans read only (loaded, until].
	after := s.loaded
	s.scans++
	if s.fullNext || s.scans >= s.cfg.FullScanEvery {
		after, s.scans, s.fullNext = time.Time{}, 0, false
	}
	if s.load(ctx, s.ownedBuckets(), after, until) {
		s.loaded = until
	} else {
		s.fullNext = true
	}
	s.countDue()
}

// load puts the jobs of buckets due in (after, until] into the heap.
func (s *Scanner) load(ctx context.Context, buckets []int, after, until time.Time) bool {
	if len(buckets) == 0 || until.IsZero() {
		return true
	}
	jobs, err := s.cfg.Store.ListDueJobs(ctx, buckets, after, until, s.cfg.ScanLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("scan due jobs", "err", err)
		}
		return false
	}
	if len(jobs) == s.cfg.ScanLimit {
		s.log.Warn("scan hit its limit; the rest is loaded by a later scan", "limit", s.cfg.ScanLimit)
		s.fullNext = true
	}
	for i := range jobs {
		s.upsert(jobs[i])
	}
	return true
}

// upsert puts job d in the heap at its next run, replacing any entry of
// the same job at another time. A job being fired is left alone: its
// firing's result puts it back at its next run.
func (s *Scanner) upsert(d model.Due) {
	if s.firing[d.ID] {
		return
	}
	if old := s.index[d.ID]; old != nil && old.due.Equal(d.NextRunAt) {
		old.job = d
		return
	}
	e := &entry{job: d, due: d.NextRunAt}
	s.index[d.ID] = e
	heap.Push(&s.heap, e)
}

// fullScan is a notify message from the listener: changes may have been
// missed, read the whole look-ahead again.
const fullScan = "*"

func (s *Scanner) onNotify(ctx context.Context, n string) {
	if n == fullScan {
		s.fullNext = true
		return
	}
	bstr, idstr, hasID := strings.Cut(n, ":")
	b, err := strconv.Atoi(bstr)
	if err != nil {
		return
	}
	if _, ok := s.owned[b]; !ok {
		return
	}
	if !hasID {
		s.outboxDue[b] = true // read by the next step, at once
		return
	}
	id, err := uuid.Parse(idstr)
	if err != nil {
		return
	}
	if s.firing[id] {
		s.renotify[id] = n
		return
	}
	j, err := s.cfg.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		delete(s.index, id)
		return
	}
	if err != nil {
		s.log.Warn("load changed job", "job_id", id, "err", err)
		return
	}
	if j.Policy != nil && len(j.Policy.Calendars) > 0 {
		// The change may be a calendar's (a job whose calendars changed
		// is announced): read them again before firing it.
		delete(s.calendars, j.Namespace)
	}
	if j.State != domain.JobActive || j.NextRunAt == nil || j.NextRunAt.After(s.loaded) {
		// Paused, completed, or beyond the look-ahead (a later scan loads
		// it): forget any entry at an older time (the compare-and-set
		// would skip it anyway).
		delete(s.index, id)
		return
	}
	s.upsert(model.DueOf(j))
}

// fireDue fires every heap entry whose time has come (its time minus the
// fire lead), in batches.
func (s *Scanner) fireDue(ctx context.Context) {
	now := s.fireHorizon(s.clock.Now())
	var batch []*entry
	held := false
	for len(s.heap) > 0 && !s.heap[0].due.After(now) {
		if len(batch) == 0 && !s.mayFire() {
			held = true // the rest stays in the heap, due
			break
		}
		e := heap.Pop(&s.heap).(*entry)
		if s.index[e.job.ID] != e {
			continue // replaced or forgotten
		}
		delete(s.index, e.job.ID)
		if _, ok := s.owned[e.job.Bucket]; !ok {
			continue
		}
		batch = append(batch, e)
		if len(batch) == s.cfg.BatchSize {
			s.fire(ctx, batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		s.fire(ctx, batch)
	}
	s.setHeld(held)
}

// fire starts a firing transaction for batch, once fewer than
// FireConcurrency are in flight; its result comes back to Run (fired).
func (s *Scanner) fire(ctx context.Context, batch []*entry) {
	if s.cfg.LeaseValid != nil && !s.cfg.LeaseValid() {
		// The partition node is about to release every bucket; the next
		// owner loads these jobs again (their next run did not move).
		s.m.leaseHolds.Inc()
		return
	}
	for s.flying >= s.cfg.FireConcurrency {
		s.fired(ctx, <-s.results)
	}
	firings := make([]store.Firing, 0, len(batch))
	epochs := map[int]int64{}
	clockNow := s.clock.Now()
	counted := 0
	kept := batch[:0]
	for _, e := range batch {
		d := e.job
		d.NextRunAt = e.due
		var cals []*calendar.Calendar
		if len(d.Policy.Calendars) > 0 {
			var err error
			if cals, err = s.calendarsOf(ctx, d, clockNow); err != nil {
				// Not fired without its calendars: the next scan loads it
				// again (its next run did not move).
				if ctx.Err() == nil {
					s.log.Warn("read the calendars of a due job", "job_id", d.ID, "namespace", d.Namespace, "err", err)
				}
				s.fullNext = true
				continue
			}
		}
		if s.counts(e.due, clockNow) {
			counted++
		}
		firings = append(firings, plan(d, s.schedule(d), cals, clockNow, s.cfg.Missed))
		epochs[e.job.Bucket] = s.owned[e.job.Bucket]
		s.firing[e.job.ID] = true
		kept = append(kept, e)
	}
	batch = kept
	if len(batch) == 0 {
		return
	}
	// The executions are created no earlier than this by the database's
	// clock: the dispatcher's publish positions wait for them.
	release := s.cfg.Dispatcher.Hold(s.clock.Passed())
	s.flying++
	s.flyingCounted += counted
	go func() {
		started := time.Now()
		res, err := s.cfg.Store.Fire(ctx, s.cfg.NodeID, epochs, firings)
		s.results <- fireResult{started: started, counted: counted, batch: batch, firings: firings, res: res, err: err, release: release}
	}()
}

// land waits for every firing transaction in flight and handles its
// result.
func (s *Scanner) land(ctx context.Context) {
	for s.flying > 0 {
		s.fired(ctx, <-s.results)
	}
}

// fired handles a firing transaction's result: fenced buckets are
// dropped, fired jobs go back into the heap at their next run, and the
// executions to the dispatcher.
func (s *Scanner) fired(ctx context.Context, r fireResult) {
	s.flying--
	s.flyingCounted -= r.counted
	if r.counted > 0 && s.cfg.Backlog != nil {
		// Counted until a reading taken from now on includes them.
		s.landed = append(s.landed, landing{at: time.Now(), n: r.counted})
	}
	defer r.release()
	for _, e := range r.batch {
		delete(s.firing, e.job.ID)
	}
	defer s.readAgain(ctx, r.batch)
	if r.err != nil {
		if ctx.Err() != nil {
			return
		}
		// Nothing was committed (or, if the commit's answer was lost, the
		// executions are in the outbox and the retry's compare-and-set
		// skips them). The next scan reads everything again.
		s.log.Warn("fire batch", "jobs", len(r.batch), "err", r.err)
		s.fullNext = true
		return
	}
	s.measureFire(len(r.batch), time.Since(r.started))
	res := r.res
	for _, b := range res.Fenced {
		s.m.fenced.Inc()
		s.log.Warn("bucket fenced: another node owns it now", "bucket", b)
		s.drop(b)
	}
	s.m.fired.Add(float64(len(res.Executions)))
	// Put each fired job back at its next run if that is already loaded.
	moved := make(map[uuid.UUID]bool, len(res.Executions)+len(res.Moved))
	for _, x := range res.Executions {
		moved[x.JobID] = true
	}
	for _, id := range res.Moved {
		moved[id] = true
	}
	for reason, n := range res.SkippedRuns {
		s.m.skippedRuns.WithLabelValues(reason).Add(float64(n))
	}
	s.cancel(ctx, res.Cancelled)
	for i, e := range r.batch {
		f := &r.firings[i]
		if !moved[e.job.ID] {
			continue
		}
		s.countExcluded(e.job.Namespace, f.Skips)
		if f.Next == nil || f.Next.After(s.loaded) {
			continue
		}
		if _, ok := s.owned[e.job.Bucket]; !ok {
			continue
		}
		d := e.job
		d.NextRunAt = *f.Next
		if n, ok := res.FiredCounts[d.ID]; ok {
			d.FiredCount = n
		} else {
			d.FiredCount++ // a plain firing fires its one run
		}
		s.upsert(d)
	}
	if len(res.Executions) > 0 {
		if s.cfg.Tracer != nil {
			s.trace(ctx, r, res.Executions)
		}
		s.cfg.Dispatcher.Dispatch(ctx, res.Executions)
	}
}

// readAgain reads again the jobs of batch announced changed while it was
// being fired (renotify), after the firing's result put them back.
func (s *Scanner) readAgain(ctx context.Context, batch []*entry) {
	if len(s.renotify) == 0 {
		return
	}
	for _, e := range batch {
		if n, ok := s.renotify[e.job.ID]; ok {
			delete(s.renotify, e.job.ID)
			if ctx.Err() == nil {
				s.onNotify(ctx, n)
			}
		}
	}
}

// countExcluded counts, by calendar, the runs a moved job's calendars
// excluded (skips of reason calendar, whose detail begins with the
// calendar's name).
func (s *Scanner) countExcluded(namespace string, skips []model.Skip) {
	for _, k := range skips {
		if k.Reason != domain.SkipCalendar {
			continue
		}
		name, _, _ := strings.Cut(k.Detail, ":")
		s.m.excluded.WithLabelValues(namespace + "/" + name).Add(float64(k.Count))
	}
}

// trace makes each fired execution's telemetry.SpanFire span, timed as
// the firing transaction, and hands its context to the dispatcher in the
// execution.
func (s *Scanner) trace(ctx context.Context, r fireResult, execs []*model.Execution) {
	end := trace.WithTimestamp(time.Now())
	started := trace.WithTimestamp(r.started)
	n := attribute.Int(telemetry.AttrBatchSize, len(r.batch))
	for _, x := range execs {
		_, span := s.cfg.Tracer.Start(telemetry.ForExecution(ctx, x.ID), telemetry.SpanFire, started)
		if span.IsRecording() {
			span.SetAttributes(attribute.String(telemetry.AttrExecutionID, x.ID.String()),
				attribute.String(telemetry.AttrJobID, x.JobID.String()),
				attribute.String(telemetry.AttrNamespace, x.Namespace),
				attribute.Int(telemetry.AttrBucket, x.Bucket),
				attribute.String("tock.scheduled_for", x.ScheduledFor.UTC().Format(time.RFC3339Nano)),
				attribute.String("tock.node", s.cfg.NodeID), n)
			x.Fired = span.SpanContext()
		}
		span.End(end)
	}
}

// cancel tells the executors of executions an overlap policy cancelled.
func (s *Scanner) cancel(ctx context.Context, ids []uuid.UUID) {
	if s.cfg.Cancel == nil {
		return
	}
	for _, id := range ids {
		if err := s.cfg.Cancel(ctx, id); err != nil && ctx.Err() == nil {
			s.log.Warn("tell executors of an execution cancelled by a newer run", "execution_id", id, "err", err)
		}
	}
}

// calendarTTL is how long the scanner uses a namespace's calendars as it
// read them: a calendar's change reaches the jobs that name it within
// that (and at once for those the change announces, see onNotify).
const calendarTTL = time.Second

// nsCalendars are a namespace's compiled calendars, as read at at (the
// database's clock).
type nsCalendars struct {
	at   time.Time
	cals map[string]*calendar.Calendar
}

// calendarsOf returns the calendars job d names, compiled, reading its
// namespace's calendars when they were read more than calendarTTL
// before now. A calendar that is gone, or that does not compile, is
// left out (logged): the API refuses to delete a calendar jobs name, so
// only a race with such a delete leaves one named.
func (s *Scanner) calendarsOf(ctx context.Context, d model.Due, now time.Time) ([]*calendar.Calendar, error) {
	nc, ok := s.calendars[d.Namespace]
	if !ok || now.Sub(nc.at) > calendarTTL || now.Before(nc.at) {
		stored, err := s.cfg.Store.ListCalendars(ctx, d.Namespace)
		if err != nil {
			return nil, err
		}
		nc = nsCalendars{at: now, cals: compileCalendars(stored, func(err error) {
			s.log.Error("stored calendars do not compile", "namespace", d.Namespace, "err", err)
		})}
		s.calendars[d.Namespace] = nc
	}
	cals := make([]*calendar.Calendar, 0, len(d.Policy.Calendars))
	for _, name := range d.Policy.Calendars {
		c := nc.cals[name]
		if c == nil {
			s.log.Warn("a job names a calendar that does not exist; it is ignored", "job_id", d.ID, "namespace", d.Namespace, "calendar", name)
			continue
		}
		cals = append(cals, c)
	}
	return cals, nil
}

// compileCalendars compiles stored calendars. When some do not compile,
// it tells bad and compiles the others alone, as far as they compile.
func compileCalendars(stored []model.Calendar, bad func(error)) map[string]*calendar.Calendar {
	specs := make([]calendar.Spec, 0, len(stored))
	for _, c := range stored {
		var sp calendar.Spec
		if err := json.Unmarshal(c.Spec, &sp); err != nil {
			bad(fmt.Errorf("calendar %s: %w", c.Name, err))
			continue
		}
		sp.Name = c.Name
		specs = append(specs, sp)
	}
	out, err := calendar.Compile(specs)
	if err == nil {
		return out
	}
	bad(err)
	out = map[string]*calendar.Calendar{}
	for _, sp := range specs {
		if one, err := calendar.Compile([]calendar.Spec{sp}); err == nil {
			out[sp.Name] = one[sp.Name]
		}
	}
	return out
}

// schedule compiles j's schedule, from the cache: thousands of jobs
// share a handful of expressions. It is nil (the run fires and the job
// completes) if the stored schedule does not compile.
func (s *Scanner) schedule(j model.Due) *schedule.Schedule {
	c, err := s.compiled.Compile(j.Schedule)
	if err != nil {
		s.log.Error("stored job has an invalid schedule", "job_id", j.ID, "err", err)
		return nil
	}
	return c
}

// outbox hands the outbox of buckets to the dispatcher: manual runs,
// and retries, deferred deliveries and re-drives coming due, and with
// firsts executions fired before a crash or by a previous owner (see
// Config.FirstDispatchEvery). It reads what is due before the next pass
// (and a second more); the dispatcher holds each until its time.
func (s *Scanner) outbox(ctx context.Context, buckets []int, firsts bool) {
	if len(buckets) == 0 {
		return
	}
	// Buffered runs (overlap buffer_one) whose job has nothing else left
	// running start now.
	if _, err := s.cfg.Store.ReleaseBufferedExecutions(ctx, buckets); err != nil && ctx.Err() == nil {
		s.log.Warn("release buffered runs", "err", err)
	}
	// One page per pass: the dispatcher skips what it already holds, so
	// looping here would spin on executions being published right now.
	until := s.clock.Now().Add(s.cfg.OutboxInterval + time.Second)
	read := s.cfg.Store.ListRedispatches
	if firsts {
		read = s.cfg.Store.ListUndispatchedExecutions
	}
	execs, err := read(ctx, buckets, 5000, until)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read outbox", "err", err)
		}
		return
	}
	s.cfg.Dispatcher.Dispatch(ctx, execs)
}

func (s *Scanner) listen(ctx context.Context) {
	backoff := retry.Backoff{Initial: time.Second, Max: time.Second}
	for ctx.Err() == nil {
		err := s.cfg.Store.Listen(ctx, func(channel, payload string) {
			select {
			case s.notify <- payload:
			default:
				// Full: the next scan (at most ScanInterval away) finds it.
			}
		}, store.JobsChannel, store.ExecChannel)
		if ctx.Err() != nil {
			return
		}
		// Changes may have been missed meanwhile: ask for a full scan.
		select {
		case s.notify <- fullScan:
		default:
		}
		backoff.Wait(ctx, s.log, "listen for job changes", "err", err)
	}
}

type entry struct {
	job model.Due
	due time.Time
	idx int
}

type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *entryHeap) Push(x any)        { e := x.(*entry); e.idx = len(*h); *h = append(*h, e) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
