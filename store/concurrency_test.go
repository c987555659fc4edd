package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// keyedJob stores a job whose executions carry a concurrency key.
func keyedJob(t *testing.T, s *Store, name, slot string, limit int, onLimit string) *model.Job {
	t.Helper()
	j := testJob(name, nil)
	j.Namespace = "default"
	j.Policy = &domain.JobPolicy{Concurrency: &domain.Concurrency{Key: "k", Limit: limit, OnLimit: onLimit, Slot: slot}}
	return mustCreate(t, s, j)
}

// slotState is what the slots table and the executions say of key slot.
func slotState(t *testing.T, s *Store, slot string) (held, waiting, active, waitingExecs int) {
	t.Helper()
	ctx := context.Background()
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE held), count(*) FILTER (WHERE NOT held)
		FROM concurrency_slots WHERE slot_key = $1`, slot).Scan(&held, &waiting); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('queued', 'running', 'failed')),
		count(*) FILTER (WHERE state = 'waiting') FROM executions WHERE slot_key = $1`, slot).Scan(&active, &waitingExecs); err != nil {
		t.Fatal(err)
	}
	return held, waiting, active, waitingExecs
}

// TestConcurrencySlotsProperty drives executions of jobs sharing
// concurrency keys through random lives, from several goroutines at once
// as recorders, the API and the scanner would: manual runs queued,
// attempts started, succeeded, failed and retried, died, timed out,
// cancelled, re-driven, rescued as lost, deleted. At every step, no key has more
// executions queued, running or retrying than its limit (read in one
// snapshot while the others go on); when all is quiet, the slots table
// agrees with the executions, no execution waits while a slot is free,
// and once everything ended no slot is held or waited for.
func TestConcurrencySlotsProperty(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const k1, k2 = "ns:default:k1", "ns:default:k2"
	jobs := []*model.Job{
		keyedJob(t, s, "a", k1, 2, domain.OnLimitWait),
		keyedJob(t, s, "b", k1, 2, domain.OnLimitWait),
		keyedJob(t, s, "c", k2, 1, domain.OnLimitWait),
	}
	limit := map[string]int{k1: 2, k2: 1}

	var (
		mu    sync.Mutex
		execs []uuid.UUID
		over  []string
	)
	pick := func(rng *rand.Rand) (uuid.UUID, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(execs) == 0 {
			return uuid.Nil, false
		}
		return execs[rng.IntN(len(execs))], true
	}
	check := func() {
		for slot, n := range limit {
			var running int
			// Unended executions, and cancelled ones whose attempt has
			// not reported its end (its executor may not have heard yet).
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM executions x
				WHERE slot_key = $1 AND (state IN ('queued', 'running', 'failed')
					OR (state = 'cancelled' AND tock_attempt_open(x)))`, slot).Scan(&running); err != nil {
				t.Error(err)
				return
			}
			if running > n {
				mu.Lock()
				var dump string
				_ = s.pool.QueryRow(ctx, `SELECT string_agg(x.id::text || ' ' || x.state || ' a' || x.attempts || ' held=' || coalesce(c.held::text, '-'), '; ')
					FROM executions x LEFT JOIN concurrency_slots c ON c.execution_id = x.id
					WHERE x.slot_key = $1 AND (x.state IN ('queued', 'running', 'failed')
						OR (x.state = 'cancelled' AND tock_attempt_open(x)))`, slot).Scan(&dump)
				over = append(over, fmt.Sprintf("%s: %d unended over a limit of %d: %s", slot, running, n, dump))
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 43))
			for range 120 {
				check()
				switch p := rng.IntN(100); {
				case p < 30:
					j := jobs[rng.IntN(len(jobs))]
					e, err := s.CreateManualExecution(ctx, j.ID, time.Now().Add(time.Duration(rng.IntN(1000))*time.Millisecond))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					execs = append(execs, e.ID)
					mu.Unlock()
				case p < 45:
					id, ok := pick(rng)
					if ok {
						report(t, s, id, domain.EventStarted, false)
					}
				case p < 65:
					id, ok := pick(rng)
					if ok {
						report(t, s, id, domain.EventSucceeded, false)
					}
				case p < 72:
					id, ok := pick(rng)
					if ok {
						report(t, s, id, domain.EventFailed, false) // a retry to come: it keeps its slot
					}
				case p < 80:
					id, ok := pick(rng)
					if ok {
						report(t, s, id, domain.EventFailed, true) // dead (or timed out for good)
					}
				case p < 84:
					if id, ok := pick(rng); ok {
						if _, err := s.CancelExecution(ctx, id); err != nil && !errors.Is(err, ErrFinished) && !errors.Is(err, ErrNotFound) {
							t.Error(err)
						}
					}
				case p < 88:
					// An executor hears of a cancel: it stops the attempt
					// (or answers a delivery it had not begun); or one that
					// had not heard yet starts the delivery it holds.
					if id, ok := pick(rng); ok {
						answerCancel(t, s, id, rng.IntN(3) == 0)
					}
				case p < 92:
					if id, ok := pick(rng); ok {
						if _, err := s.RedriveExecution(ctx, id); err != nil && !errors.Is(err, ErrNotDead) && !errors.Is(err, ErrNotFound) {
							t.Error(err)
						}
					}
				case p < 94:
					// The lost-work rescue: running executions whose
					// executor went silent are put back, failed, keeping
					// their slots.
					buckets := make([]int, testBuckets)
					for i := range buckets {
						buckets[i] = i
					}
					if _, err := s.RequeueLostExecutions(ctx, buckets, time.Now().Add(time.Second)); err != nil && !isRetryable(err) {
						t.Error(err)
					}
				default:
					if id, ok := pick(rng); ok {
						for try := 0; ; try++ {
							_, err := s.pool.Exec(ctx, "DELETE FROM executions WHERE id = $1", id)
							if err == nil || !isRetryable(err) || try == 5 {
								if err != nil {
									t.Error(err)
								}
								break
							}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	check()
	if len(over) > 0 {
		t.Fatalf("limits exceeded %d times, first: %s", len(over), over[0])
	}
	for slot, n := range limit {
		held, waiting, active, waitingExecs := slotState(t, s, slot)
		releasing := count(t, s, `SELECT count(*) FROM concurrency_slots c JOIN executions x ON x.id = c.execution_id
			WHERE c.slot_key = $1 AND c.held AND c.releasing_at IS NOT NULL AND x.state = 'cancelled'`, slot)
		t.Logf("%s: %d held (%d by cancelled executions not yet answered), %d waiting", slot, held, releasing, waiting)
		if held != active+releasing || waiting != waitingExecs {
			t.Errorf("%s: slots say %d held and %d waiting, executions %d unended, %d cancelled and releasing, %d waiting",
				slot, held, waiting, active, releasing, waitingExecs)
		}
		if held < n && waiting > 0 {
			t.Errorf("%s: %d executions wait while %d of %d slots are held", slot, waiting, held, n)
		}
	}
	// Everything ends: every cancel is answered, every waiting execution
	// gets its slot in turn.
	for range 200 {
		var ids []uuid.UUID
		rows, err := s.pool.Query(ctx, `SELECT id FROM executions x WHERE slot_key IS NOT NULL AND (state IN ('queued', 'running', 'failed')
			OR (state = 'cancelled' AND EXISTS (SELECT 1 FROM concurrency_slots c WHERE c.execution_id = x.id)))`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			report(t, s, id, domain.EventSucceeded, false)
			answerCancel(t, s, id, false)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM concurrency_slots"); n != 0 {
		t.Errorf("%d slots held or waited for once every execution ended", n)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE state = 'waiting'"); n != 0 {
		t.Errorf("%d executions still wait", n)
	}
}

// answerCancel records, for a cancelled execution id, what its executor
// reports: the end of its open attempt, cancelled, or that it did not
// begin the delivery it held; or, with start, that an executor which had
// not heard of the cancel yet began it. Other executions are left alone.
func answerCancel(t *testing.T, s *Store, id uuid.UUID, start bool) {
	t.Helper()
	e, err := s.GetExecution(context.Background(), id)
	if errors.Is(err, ErrNotFound) {
		return
	}
	if err != nil {
		t.Error(err)
		return
	}
	if e.State != domain.ExecCancelled {
		return
	}
	now := time.Now()
	ev := model.AttemptEvent{ID: id, Attempt: e.Attempts + 1, Dispatch: e.Dispatches, Executor: "e1", Type: domain.EventCancelled,
		At: now, PublishedAt: ptr(now.Add(-time.Millisecond))}
	// Its delivery is out while the slot is releasing; once answered,
	// JetStream has it no more.
	out := count(t, s, "SELECT count(*) FROM concurrency_slots WHERE execution_id = $1 AND releasing_at IS NOT NULL", id) > 0
	if n := len(e.AttemptList); n > 0 && e.AttemptList[n-1].FinishedAt == nil {
		ev.Attempt = e.AttemptList[n-1].Number // the open attempt stops
	} else if !out {
		return
	} else if start {
		ev.Type = domain.EventStarted
	}
	if ev.Type == domain.EventStarted || ev.Attempt == e.Attempts {
		ev.StartedAt = ptr(now.Add(-time.Millisecond))
	}
	recordRetrying(t, s, ev)
}

// recordRetrying records ev; a batch that fails whole is retried, as the
// recorder does (a deadlock between two keys' locks, say).
func recordRetrying(t *testing.T, s *Store, ev model.AttemptEvent) {
	t.Helper()
	for try := 0; ; try++ {
		_, err := s.RecordAttemptEvents(context.Background(), []model.AttemptEvent{ev})
		if err == nil || !isRetryable(err) || try == 5 {
			if err != nil {
				t.Error(err)
			}
			return
		}
	}
}

// report records an event of execution id's current attempt, as an
// executor would report it.
func report(t *testing.T, s *Store, id uuid.UUID, typ domain.EventType, final bool) {
	t.Helper()
	ctx := context.Background()
	e, err := s.GetExecution(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return
	}
	if err != nil {
		t.Error(err)
		return
	}
	if e.State != domain.ExecQueued && e.State != domain.ExecRunning && e.State != domain.ExecFailed {
		return
	}
	now := time.Now()
	ev := model.AttemptEvent{ID: id, Attempt: e.Attempts + 1, Dispatch: e.Dispatches, Executor: "e1", Type: typ, At: now,
		PublishedAt: ptr(now.Add(-time.Millisecond))}
	if e.State == domain.ExecRunning {
		ev.Attempt = e.Attempts
	}
	switch typ {
	case domain.EventSucceeded:
		ev.StartedAt = ptr(now.Add(-time.Millisecond))
	case domain.EventFailed:
		ev.Error, ev.RetryIn, ev.Final, ev.StartedAt = "boom", time.Millisecond, final, ptr(now.Add(-time.Millisecond))
	}
	recordRetrying(t, s, ev)
}

// A rate limit releases a key's executions at most limit in any window
// of per, at most burst back to back, in the order they came; each
// execution held to its job's figures, jobs of the key sharing its
// window; on_limit skip refuses a run asked for now when the window has
// no room.
func TestRateLimitReleases(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	rate := func(name string, burst int, onLimit string) *model.Job {
		j := testJob(name, nil)
		j.Namespace = "default"
		j.Policy = &domain.JobPolicy{RateLimit: &domain.RateLimit{Key: "partner", Limit: 5, Per: "1s", Burst: burst,
			OnLimit: onLimit, Slot: "rate:ns:default:partner", PerMS: 1000}}
		return mustCreate(t, s, j)
	}
	a, b := rate("a", 5, domain.RateWait), rate("b", 5, domain.RateWait)
	now := time.Now().UTC()
	var releases []time.Time
	for i := range 23 {
		j := a
		if i%2 == 1 {
			j = b
		}
		e, err := s.CreateManualExecution(ctx, j.ID, now.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if e.State != domain.ExecQueued || e.RateKey != "rate:ns:default:partner" {
			t.Fatalf("execution %d: %s, key %q", i, e.State, e.RateKey)
		}
		releases = append(releases, e.DueAt())
	}
	for i := 1; i < len(releases); i++ {
		if releases[i].Before(releases[i-1]) {
			t.Fatalf("release %d at %s before release %d at %s: not in order", i, releases[i], i-1, releases[i-1])
		}
	}
	for i := range releases {
		in := 0
		for _, r := range releases {
			if !r.Before(releases[i]) && r.Before(releases[i].Add(time.Second)) {
				in++
			}
		}
		if in > 5 {
			t.Fatalf("%d releases in the second from %s; the limit is 5: %v", in, releases[i], releases)
		}
	}
	// 23 executions at 5 a second: the last goes 4 s after the first.
	if span := releases[22].Sub(releases[0]); span < 4*time.Second || span > 4*time.Second+time.Second/2 {
		t.Errorf("23 releases span %s; want about 4s", span)
	}

	// A job with burst 1 is spaced one every 200 ms after the window's
	// last release.
	c := rate("c", 1, domain.RateWait)
	e1, err := s.CreateManualExecution(ctx, c.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := s.CreateManualExecution(ctx, c.ID, now.Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if gap := e2.DueAt().Sub(e1.DueAt()); gap < 200*time.Millisecond {
		t.Errorf("burst 1: releases %s apart; want at least 200ms", gap)
	}

	// on_limit skip: no room now, so a run asked for now is refused.
	d := rate("d", 5, domain.RateSkip)
	if _, err := s.CreateManualExecution(ctx, d.ID, now); !errors.Is(err, ErrAtLimit) {
		t.Errorf("a run now with a full window and on_limit skip: %v; want ErrAtLimit", err)
	}
}

// Firings of keyed jobs (the scanner's path): runs over the limit wait,
// and are not returned to dispatch; with on_limit skip they are skipped
// (reason concurrency, with the key) rather than made; with
// cancel_oldest the key's oldest executions are cancelled to make room,
// returned to be told to their executors.
func TestFireKeyed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime().Add(-time.Minute)
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	keyed := func(name, slot, onLimit string) *model.Job {
		j := testJob(name, &t0)
		j.Namespace = "default"
		j.Policy = &domain.JobPolicy{Concurrency: &domain.Concurrency{Key: "k", Limit: 2, OnLimit: onLimit, Slot: slot}}
		return mustCreate(t, s, j)
	}
	wait, skip, cancel := keyed("wait", "ns:default:w", domain.OnLimitWait), keyed("skip", "ns:default:s", domain.OnLimitSkip),
		keyed("cancel", "ns:default:c", domain.OnLimitCancelOldest)
	epochs := claim(t, s, "n", 1, wait.Bucket, skip.Bucket, cancel.Bucket)
	var firings []Firing
	for _, j := range []*model.Job{wait, skip, cancel} {
		firings = append(firings, Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: ptr(at(10)),
			Runs: []model.Run{{At: at(1)}, {At: at(2)}, {At: at(3)}}, Concurrency: j.Policy.Concurrency})
	}
	res, err := s.Fire(ctx, "n", epochs, firings)
	if err != nil {
		t.Fatal(err)
	}
	dispatched := map[uuid.UUID]int{}
	for _, e := range res.Executions {
		dispatched[e.JobID]++
	}
	for _, j := range []*model.Job{wait, skip, cancel} {
		if dispatched[j.ID] != 2 {
			t.Errorf("%s: %d executions to dispatch, want 2 (its limit)", j.Name, dispatched[j.ID])
		}
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1 AND state = 'waiting'", wait.ID); n != 1 {
		t.Errorf("wait: %d waiting, want 1", n)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1", skip.ID); n != 2 {
		t.Errorf("skip: %d executions, want 2", n)
	}
	if n := count(t, s, `SELECT count(*) FROM skipped_runs WHERE job_id = $1 AND reason = 'concurrency'
		AND detail LIKE '%ns:default:s is at its limit of 2%'`, skip.ID); n != 1 {
		t.Errorf("skip: %d skipped runs of reason concurrency naming the key, want 1", n)
	}
	// cancel_oldest: the firing cancels the key's oldest holders before
	// inserting its runs, but there were none yet: its third run waits.
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1 AND state = 'waiting'", cancel.ID); n != 1 {
		t.Errorf("cancel_oldest's first firing: %d waiting, want 1", n)
	}
	// Its next firing cancels the oldest holder; its slot goes to the
	// waiting run once its executor says it stopped, not before.
	res, err = s.Fire(ctx, "n", epochs, []Firing{{JobID: cancel.ID, Bucket: cancel.Bucket, ScheduledFor: at(10), Next: ptr(at(20)),
		Runs: []model.Run{{At: at(10)}}, Concurrency: cancel.Policy.Concurrency}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cancelled) != 1 {
		t.Errorf("cancel_oldest cancelled %d, want 1 (one run needs one slot)", len(res.Cancelled))
	}
	held, waiting, active, _ := slotState(t, s, "ns:default:c")
	if held != 2 || active != 1 || waiting != 2 {
		t.Errorf("after cancel_oldest: %d held, %d unended, %d waiting; want 2 (one releasing), 1, 2", held, active, waiting)
	}
	oldest := domain.ExecutionID(cancel.ID, at(1))
	if x := get(t, s, oldest); x.State != domain.ExecCancelled ||
		!strings.Contains(x.Error, "cancel_oldest") {
		t.Errorf("the oldest: %s %q", x.State, x.Error)
	}
	if x := get(t, s, domain.ExecutionID(cancel.ID, at(3))); x.State != domain.ExecWaiting {
		t.Errorf("the run that waited, before the cancelled one's executor answered: %s, want waiting", x.State)
	}
	// A firing meanwhile cancels no more: the releasing slot is one
	// being made free already, not one more to take.
	res, err = s.Fire(ctx, "n", epochs, []Firing{{JobID: cancel.ID, Bucket: cancel.Bucket, ScheduledFor: at(20), Next: ptr(at(30)),
		Runs: []model.Run{{At: at(20)}}, Concurrency: cancel.Policy.Concurrency}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cancelled) != 0 {
		t.Errorf("cancel_oldest's third firing, a slot releasing: cancelled %v, want none", res.Cancelled)
	}
	answerCancel(t, s, oldest, false)
	if x := get(t, s, domain.ExecutionID(cancel.ID, at(3))); x.State != domain.ExecQueued {
		t.Errorf("the run that waited, once the cancelled one's delivery was answered: %s, want queued", x.State)
	}
	held, waiting, active, _ = slotState(t, s, "ns:default:c")
	if held != 2 || active != 2 || waiting != 2 {
		t.Errorf("once answered: %d held, %d unended, %d waiting; want 2, 2, 2", held, active, waiting)
	}
}

// A fired run whose rate-limit key has no room, under on_limit skip, is
// not made: the skip ledger has it, reason rate_limit, with the key.
func TestFireRateLimitedSkip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime().Add(-time.Minute)
	j := testJob("rated", &t0)
	j.Namespace = "default"
	j.Policy = &domain.JobPolicy{RateLimit: &domain.RateLimit{Key: "p", Limit: 1, Per: "1m", Burst: 1, OnLimit: domain.RateSkip,
		Slot: "rate:ns:default:p", PerMS: 60_000}}
	mustCreate(t, s, j)
	epochs := claim(t, s, "n", 1, j.Bucket)
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	res, err := s.Fire(ctx, "n", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: ptr(at(10)),
		Runs: []model.Run{{At: at(1)}, {At: at(2)}}, RateLimited: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Executions) != 1 || !res.Executions[0].ScheduledFor.Equal(at(1)) {
		t.Fatalf("executions %d; want the first run only", len(res.Executions))
	}
	if n := count(t, s, `SELECT count(*) FROM skipped_runs WHERE job_id = $1 AND reason = 'rate_limit'
		AND first_at = $2 AND detail LIKE 'rate limit key rate:ns:default:p has no room before %'`, j.ID, at(2)); n != 1 {
		t.Errorf("%d skipped runs of reason rate_limit for the second run, want 1", n)
	}
}

// A cancelled execution keeps its slot while its attempt may still run:
// until its executor reports the attempt's end (heartbeats meanwhile
// keep it), whichever attempt it is (attempt 1 lives in the execution's
// row, later ones in attempts), or until ReleaseSilentSlots finds it
// silent; only then does the key's next waiter run. Without this the
// waiter would start beside the attempt that is being stopped.
func TestCancelledAttemptKeepsItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const slot = "ns:default:one"
	j := keyedJob(t, s, "one", slot, 1, domain.OnLimitWait)
	run := func(offset time.Duration) uuid.UUID {
		t.Helper()
		e, err := s.CreateManualExecution(ctx, j.ID, time.Now().Add(offset))
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	state := func(id uuid.UUID) domain.ExecState { t.Helper(); return get(t, s, id).State }
	cancel := func(id uuid.UUID) {
		t.Helper()
		if _, err := s.CancelExecution(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	event := func(id uuid.UUID, typ domain.EventType, attempt int) {
		t.Helper()
		now := time.Now()
		e := get(t, s, id)
		recordRetrying(t, s, model.AttemptEvent{ID: id, Attempt: attempt, Dispatch: e.Dispatches, Executor: "e1", Type: typ,
			At: now, StartedAt: ptr(now.Add(-time.Millisecond)), PublishedAt: ptr(now.Add(-2 * time.Millisecond)),
			Error: "boom", RetryIn: time.Millisecond})
	}

	// Attempt 1 running, cancelled.
	a := run(0)
	event(a, domain.EventStarted, 1)
	b := run(time.Millisecond)
	if st := state(b); st != domain.ExecWaiting {
		t.Fatalf("b behind a running a: %s, want waiting", st)
	}
	cancel(a)
	if st := state(b); st != domain.ExecWaiting {
		t.Errorf("b once a is cancelled but its attempt not stopped: %s, want waiting", st)
	}
	event(a, domain.EventHeartbeat, 1)
	if st := state(b); st != domain.ExecWaiting {
		t.Errorf("b after a heartbeat of a's cancelled attempt: %s, want waiting", st)
	}
	event(a, domain.EventCancelled, 1)
	if st := state(b); st != domain.ExecQueued {
		t.Errorf("b once a's attempt stopped: %s, want queued", st)
	}

	// Attempt 2 (in attempts) running, cancelled.
	event(b, domain.EventFailed, 1) // a retry to come
	event(b, domain.EventStarted, 2)
	c := run(2 * time.Millisecond)
	cancel(b)
	if st := state(c); st != domain.ExecWaiting {
		t.Errorf("c once b is cancelled, its attempt 2 not stopped: %s, want waiting", st)
	}
	event(b, domain.EventCancelled, 2)
	if st := state(c); st != domain.ExecQueued {
		t.Errorf("c once b's attempt 2 stopped: %s, want queued", st)
	}
	if x := get(t, s, b); len(x.AttemptList) != 2 || x.AttemptList[1].Outcome != domain.OutcomeCancelled {
		t.Errorf("b's attempts: %+v, want 2, the second cancelled", x.AttemptList)
	}

	// An attempt whose executor is gone: no report comes; the backstop
	// frees the slot once it has been silent long enough, not before.
	event(c, domain.EventStarted, 1)
	d := run(3 * time.Millisecond)
	cancel(c)
	buckets := make([]int, testBuckets)
	for i := range buckets {
		buckets[i] = i
	}
	if n, err := s.ReleaseSilentSlots(ctx, buckets, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("ReleaseSilentSlots of slots silent for an hour: %d, %v; want 0", n, err)
	}
	if st := state(d); st != domain.ExecWaiting {
		t.Errorf("d before the backstop: %s, want waiting", st)
	}
	if n, err := s.ReleaseSilentSlots(ctx, buckets, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Errorf("ReleaseSilentSlots: %d, %v; want 1", n, err)
	}
	if st := state(d); st != domain.ExecQueued {
		t.Errorf("d after the backstop: %s, want queued", st)
	}

	// A cancelled execution that was never published (due later) has no
	// attempt to wait for: its slot goes at once.
	event(d, domain.EventSucceeded, 1)
	later := run(time.Hour)
	e := run(time.Hour + time.Millisecond)
	cancel(later)
	if st := state(e); st != domain.ExecQueued {
		t.Errorf("e behind a cancelled run due in an hour: %s, want queued", st)
	}
	if n := count(t, s, "SELECT count(*) FROM concurrency_slots WHERE slot_key = $1", slot); n != 1 {
		t.Errorf("%d slots of the key, want 1 (e's)", n)
	}
}
