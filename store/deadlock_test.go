package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// lockTestFor is how long TestNoDeadlocks runs its writers against each
// other.
const lockTestFor = 4 * time.Second

// lockTestDeadlockTimeout is the deadlock_timeout of TestNoDeadlocks'
// sessions (when its role may set it): far below the default second, so
// that a cycle of waits is found while it lasts, not only one that
// outlives every lock_timeout of the statements in it.
const lockTestDeadlockTimeout = "50ms"

// Every writer of executions, attempts, job_successes, job_failures and
// jobs rows, run against the others at once on the same rows, takes its
// row locks in the order store/doc.go (Lock order) sets, so that none of
// them deadlocks with another: recorders recording overlapping batches
// of the same executions' events in different orders (first-attempt
// successes on the fast path beside starts, heartbeats, retries, deaths
// and later attempts, of several executions of the same jobs), firing
// (plain firings, and firings whose overlap policy cancels the job's
// running executions), retention deleting ended executions in batches
// (plain and archived) and completed one-shot jobs with their last
// successes, job deletions, the lost-work and wipe re-queues, and the
// dispatcher marking executions published. No call fails with a
// deadlock (SQLSTATE 40P01), and the database counts none
// (pg_stat_database.deadlocks: Fire retries a deadlock itself).
func TestNoDeadlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.PostgresFrom(t, testSchema)
	before := dbDeadlocks(t, url)
	var opts []Option
	if superuser(t, url) {
		opts = append(opts, func(c *openConfig) {
			c.pool.ConnConfig.RuntimeParams["deadlock_timeout"] = lockTestDeadlockTimeout
		})
	} else {
		t.Logf("deadlock_timeout left at the server's: the test's role may not set it")
	}
	s, err := Open(ctx, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Init(ctx, testBuckets); err != nil {
		t.Fatal(err)
	}

	w := newLockWorkload(t, s)
	w.run(ctx, lockTestFor)
	s.Close() // its sessions flush their statistics as they end
	after := dbDeadlocks(t, url)

	t.Logf("%s", w.tally.summary())
	if n := after - before; n != 0 || w.tally.deadlocks() != 0 {
		t.Errorf("%d deadlocks counted by the database, %d seen in errors (%s)", n, w.tally.deadlocks(), w.tally.deadlockOps())
	}
	if err := w.tally.unexpected(); err != nil {
		t.Error(err)
	}
	if w.tally.done["record"] == 0 || w.tally.done["fire"] == 0 {
		t.Errorf("the workload did not run: %s", w.tally.summary())
	}
}

// superuser reports whether url's role is a superuser (and so may set
// deadlock_timeout).
func superuser(t *testing.T, url string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var on string
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('is_superuser')").Scan(&on); err != nil {
		t.Fatal(err)
	}
	return on == "on"
}

// dbDeadlocks is pg_stat_database.deadlocks of url's database, once no
// other session is connected to it (a session reports its counts when it
// ends, at the latest).
func dbDeadlocks(t *testing.T, url string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var others int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still connected to the test's database", others)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockTally counts what the workload's calls did.
type lockTally struct {
	mu        sync.Mutex
	done      map[string]int
	dead      map[string]int
	tolerated map[string]int // errors the workload may meet: lock timeouts of retention, a job deleted twice
	rows      map[string]int64
	errs      []error
}

// count adds n to what rows says of what.
func (c *lockTally) count(what string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows[what] += n
}

func (c *lockTally) add(op string, err error, tolerable func(error) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.done[op]++
	case pgCode(err) == "40P01":
		c.dead[op]++
	case tolerable != nil && tolerable(err):
		c.tolerated[op]++
	default:
		if len(c.errs) < 10 {
			c.errs = append(c.errs, fmt.Errorf("%s: %w", op, err))
		}
	}
}

func (c *lockTally) deadlocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.dead {
		n += k
	}
	return n
}

func (c *lockTally) deadlockOps() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.dead)
}

func (c *lockTally) unexpected() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

func (c *lockTally) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("calls done %v, deadlocked %v, tolerated errors %v; rows %v", c.done, c.dead, c.tolerated, c.rows)
}

// lockExec is an execution the workload fired.
type lockExec struct {
	id, job uuid.UUID
	at      time.Time
}

// lockWorkload is TestNoDeadlocks' writers and what they share: the jobs
// fired every round, and the executions fired so far.
type lockWorkload struct {
	t      *testing.T
	s      *Store
	epochs map[int]int64
	// plain jobs are fired plainly, policy jobs with the overlap policy
	// cancel_running; mortal ones (some of the plain) are deleted.
	plain, policy, mortal []*model.Job
	next                  time.Time // the next round's scheduled time

	mu    sync.Mutex
	execs []lockExec
	tally lockTally
}

// lockJobs is how many jobs of each kind the workload fires every round.
const lockPlainJobs, lockPolicyJobs = 24, 6

func newLockWorkload(t *testing.T, s *Store) *lockWorkload {
	w := &lockWorkload{t: t, s: s, epochs: map[int]int64{},
		tally: lockTally{done: map[string]int{}, dead: map[string]int{}, tolerated: map[string]int{}, rows: map[string]int64{}}}
	for b := range testBuckets {
		claim(t, s, "lock", 1, b)
		w.epochs[b] = 1
	}
	// Rounds a second apart, from 20 minutes ago: executions scheduled
	// in the past, in today's partition (or yesterday's), never due
	// after now.
	w.next = baseTime().Add(-20 * time.Minute)
	for i := range lockPlainJobs + lockPolicyJobs {
		j := mustCreate(t, s, testJob(fmt.Sprintf("lock-%02d", i), &w.next))
		if i < lockPlainJobs {
			w.plain = append(w.plain, j)
		} else {
			w.policy = append(w.policy, j)
		}
	}
	w.mortal = slices.Clone(w.plain[:lockPlainJobs/3])
	return w
}

// run runs every writer for d.
func (w *lockWorkload) run(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w.fire(ctx) // a first round for the recorders to start on
	var wg sync.WaitGroup
	loop := func(every time.Duration, step func(ctx context.Context)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				step(ctx)
				if sleep(ctx, every) != nil {
					return
				}
			}
		})
	}
	loop(25*time.Millisecond, w.fire)
	for i := range 4 {
		rng := rand.New(rand.NewPCG(uint64(i), 37))
		loop(0, func(ctx context.Context) { w.record(ctx, rng) })
	}
	loop(20*time.Millisecond, w.deleteRows)
	loop(50*time.Millisecond, w.deleteCompletedJobs)
	rng := rand.New(rand.NewPCG(99, 37))
	loop(150*time.Millisecond, func(ctx context.Context) { w.deleteJob(ctx, rng) })
	loop(10*time.Millisecond, w.requeue)
	wg.Wait()
}

// add notes fired executions for the recorders.
func (w *lockWorkload) add(execs []*model.Execution) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range execs {
		w.execs = append(w.execs, lockExec{e.ID, e.JobID, e.ScheduledFor})
	}
}

// recent returns up to n executions of the last few rounds.
func (w *lockWorkload) recent(rng *rand.Rand, n int) []lockExec {
	w.mu.Lock()
	defer w.mu.Unlock()
	from := max(0, len(w.execs)-5*(lockPlainJobs+lockPolicyJobs))
	pool := w.execs[from:]
	out := make([]lockExec, 0, n)
	for range min(n, len(pool)) {
		out = append(out, pool[rng.IntN(len(pool))])
	}
	return out
}

// fire fires the next round of every job: the plain jobs plainly, the
// policy jobs cancelling their executions that have not ended.
func (w *lockWorkload) fire(ctx context.Context) {
	at := w.next
	w.next = at.Add(time.Second)
	next := w.next
	var firings []Firing
	for _, j := range w.plain {
		firings = append(firings, Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next})
	}
	for _, j := range w.policy {
		firings = append(firings, Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: &next,
			Runs: []model.Run{{At: at}}, Overlap: domain.OverlapCancelRunning})
	}
	res, err := w.s.Fire(ctx, "lock", w.epochs, firings)
	w.tally.count("executions cancelled", int64(len(res.Cancelled)))
	if ctx.Err() != nil {
		return
	}
	w.tally.add("fire", err, nil)
	w.add(res.Executions)
	// Published, as the dispatcher marks them (the wipe re-queue takes
	// them back).
	var ds []model.Dispatched
	for _, e := range res.Executions {
		ds = append(ds, model.Dispatched{ID: e.ID})
	}
	err = w.s.MarkExecutionsDispatched(ctx, ds, time.Time{})
	if ctx.Err() != nil {
		return
	}
	w.tally.add("mark dispatched", err, nil)
}

// record records a batch of events about executions of the last rounds,
// which other recorders are recording too: of each, in random order, a
// first attempt's success (the fast path), a start, a heartbeat, a
// failure with a retry, a death, or a second attempt's start and end.
func (w *lockWorkload) record(ctx context.Context, rng *rand.Rand) {
	var batch []model.AttemptEvent
	for _, x := range w.recent(rng, 12+rng.IntN(24)) {
		at := x.at
		ev := func(typ domain.EventType, attempt, dispatch int, d time.Duration) model.AttemptEvent {
			e := model.AttemptEvent{ID: x.id, Attempt: attempt, Dispatch: dispatch, Executor: "e1", Type: typ,
				At: at.Add(d), PublishedAt: ptr(at.Add(5 * time.Millisecond))}
			switch typ {
			case domain.EventSucceeded:
				e.Output, e.StartedAt = "ok", ptr(at.Add(d-time.Second))
			case domain.EventFailed:
				e.Error, e.RetryIn, e.StartedAt = "boom", 10*time.Millisecond, ptr(at.Add(d-time.Second))
			}
			return e
		}
		switch p := rng.IntN(100); {
		case p < 45:
			batch = append(batch, ev(domain.EventSucceeded, 1, 0, 2*time.Second))
		case p < 55:
			batch = append(batch, ev(domain.EventStarted, 1, 0, time.Second))
		case p < 62:
			batch = append(batch, ev(domain.EventHeartbeat, 1, 0, 1500*time.Millisecond))
		case p < 72:
			batch = append(batch, ev(domain.EventFailed, 1, 0, 2*time.Second))
		case p < 84:
			dead := ev(domain.EventFailed, 1+rng.IntN(2), 0, 3*time.Second)
			dead.Final = true
			batch = append(batch, dead)
		case p < 92:
			batch = append(batch, ev(domain.EventStarted, 2, 1, 4*time.Second), ev(domain.EventSucceeded, 2, 1, 5*time.Second))
		default:
			batch = append(batch, ev(domain.EventSucceeded, 1, 0, 2*time.Second), ev(domain.EventHeartbeat, 1, 0, 1500*time.Millisecond))
		}
	}
	if len(batch) == 0 {
		return
	}
	rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	_, err := w.s.RecordAttemptEvents(ctx, batch)
	if ctx.Err() != nil {
		return
	}
	w.tally.add("record", err, nil)
}

// retentionBusy says whether err is a retention delete that gave up
// waiting for its rows' locks (deleteTries times deleteLockWait): rows
// that recorders held that long, not a deadlock.
func retentionBusy(err error) bool { return isLockTimeout(err) }

// deleteRows deletes the ended executions of the workload's days in
// small batches, as retention deletes a namespace's rows from a day it
// keeps: by their addresses, and, every other pass, by the keys an
// archiver returned.
func (w *lockWorkload) deleteRows(ctx context.Context) {
	now := time.Now().UTC()
	for _, day := range []time.Time{now.Add(-24 * time.Hour).Truncate(24 * time.Hour), now.Truncate(24 * time.Hour)} {
		p := model.RetentionPolicy{DeleteBatch: 8, DeletePause: -1}
		if rand.IntN(2) == 0 {
			p.Archive = func(context.Context, time.Time) error { return nil }
			p.ArchiveRows = func(ctx context.Context, sel model.RowSelection) ([]model.ExecutionKey, error) {
				rows, err := w.s.pool.Query(ctx, `SELECT id, scheduled_for FROM `+DayPartition("executions", sel.Day)+`
					WHERE namespace = $1 AND `+finalStates+` AND scheduled_for < $2 AND (scheduled_for, id) > ($3, $4)
					ORDER BY scheduled_for, id LIMIT $5`, sel.Namespace, sel.Before, sel.After.ScheduledFor, sel.After.ID, sel.Limit)
				if err != nil {
					return nil, err
				}
				return pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.ExecutionKey, error) {
					var k model.ExecutionKey
					return k, r.Scan(&k.ID, &k.ScheduledFor)
				})
			}
		}
		var res model.RetentionResult
		archiveErr, err := w.s.deleteNamespaceRows(ctx, day, "default", now.Add(time.Hour), p, &res)
		w.tally.count("executions deleted", res.Deleted)
		w.tally.count("executions archived", res.ArchivedRows)
		if ctx.Err() != nil {
			return
		}
		w.tally.add("retention rows", errors.Join(archiveErr, err), retentionBusy)
	}
}

// deleteCompletedJobs creates and fires a few one-shot jobs, whose
// executions the recorders then record (moving the jobs' last
// successes), and deletes the completed one-shot jobs with retention.
func (w *lockWorkload) deleteCompletedJobs(ctx context.Context) {
	at := baseTime().Add(-10 * time.Minute)
	var firings []Firing
	for range 6 {
		j := testJob("once-"+uuid.NewString(), &at)
		j.Schedule = schedule.Spec{At: &at}
		if err := w.s.CreateJob(ctx, j); err != nil {
			if ctx.Err() == nil {
				w.tally.add("create job", err, nil)
			}
			return
		}
		firings = append(firings, Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: *j.NextRunAt})
	}
	res, err := w.s.Fire(ctx, "lock", w.epochs, firings)
	if ctx.Err() != nil {
		return
	}
	w.tally.add("fire", err, nil)
	w.add(res.Executions)
	ret, err := w.s.ApplyRetention(ctx, time.Now().Add(time.Minute),
		model.RetentionPolicy{Default: 100 * 365 * 24 * time.Hour, CompletedJobs: time.Millisecond})
	w.tally.count("jobs deleted", ret.CompletedJobs)
	if ctx.Err() != nil {
		return
	}
	w.tally.add("retention jobs", err, nil)
}

// deleteJob deletes one of the mortal jobs, which are being fired and
// recorded.
func (w *lockWorkload) deleteJob(ctx context.Context, rng *rand.Rand) {
	j := w.mortal[rng.IntN(len(w.mortal))]
	_, err := w.s.DeleteJob(ctx, j.ID)
	if ctx.Err() != nil {
		return
	}
	w.tally.add("delete job", err, func(err error) bool { return errors.Is(err, ErrNotFound) })
}

// requeue re-queues the running executions (lost work: all of them are
// silent as of an hour from now) and the waiting ones (as after a wipe of
// the stream an hour from now).
func (w *lockWorkload) requeue(ctx context.Context) {
	var buckets []int
	for b := range testBuckets {
		buckets = append(buckets, b)
	}
	n, err := w.s.RequeueLostExecutions(ctx, buckets, time.Now().Add(time.Hour))
	w.tally.count("lost re-queued", int64(n))
	if ctx.Err() != nil {
		return
	}
	w.tally.add("requeue lost", err, nil)
	n, err = w.s.RequeueWipedExecutions(ctx, buckets, time.Now().Add(time.Hour))
	w.tally.count("wiped re-queued", int64(n))
	if ctx.Err() != nil {
		return
	}
	w.tally.add("requeue wiped", err, nil)
}
