package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// pollEvery is how often the settle phases look at the executions, at
// most: a count that took d waits 10 d before the next, so that counting
// a large backlog does not take much of the Postgres it is waiting for.
const pollEvery = 2 * time.Second

// armAhead is how long before its window spread-once's jobs are armed.
const armAhead = time.Minute

// runWindow runs a recurring mix: warm-up, the measured window, then the
// settle phases, and fills in the report.
func (b *bench) runWindow(ctx context.Context) error {
	// The window starts on a whole second, so that it holds whole seconds
	// of runs. spread-once arms its paused jobs first (and its window
	// starts no sooner than a burst's instant, for the scanners to load
	// them), then analyzes, as same-second does: statistics taken while
	// the jobs were paused (no due job in any partition) would have the
	// planner probe jobs_due rather than the primary key when firing, one
	// statement of 1,000 firings taking over a minute.
	var from time.Time
	if b.Mix == mixSpreadOnce {
		// A minute ahead at least: time to vacuum and analyze a million
		// jobs before the first is due.
		from = b.dbNow().Add(max(b.Warmup, armAhead) + time.Second - 1).Truncate(time.Second)
		if err := b.arm(ctx, from, b.onceSlots()); err != nil {
			return err
		}
		// Arming rewrote every job: vacuumed, the tables are as if the
		// jobs had been created due (no dead row versions for firing to
		// step over), as the recurring mixes' are.
		start := time.Now()
		if err := b.exec(ctx, "VACUUM jobs, job_names"); err != nil {
			return fmt.Errorf("vacuum the jobs tables: %w", err)
		}
		b.say("armed and vacuumed the jobs tables in %s", time.Since(start).Round(time.Millisecond))
	}
	if err := b.analyze(ctx); err != nil {
		return err
	}
	if b.Mix != mixSpreadOnce {
		from = b.dbNow().Add(b.Warmup + time.Second - 1).Truncate(time.Second)
	}
	to := from.Add(b.Duration)
	b.rep.Window = &Window{Start: from, End: to, Seconds: b.Duration.Seconds()}
	k := slots(b.Mix)
	expected := int64(0)
	exp := map[int][]time.Time{}
	if b.Mix == mixSpreadOnce {
		// Each job once, in the window; nothing after it.
		k = b.onceSlots()
		for slot := range min(k, b.Jobs) {
			exp[slot] = []time.Time{from.Add(time.Duration(slot) * time.Second)}
		}
		expected = int64(b.Jobs)
	} else {
		for slot := range min(k, b.Jobs) {
			ts, err := expectedTimes(cronOf(b.Mix, slot), from, to)
			if err != nil {
				return err
			}
			exp[slot] = ts
			expected += int64(len(ts) * jobsInSlot(b.Jobs, k, slot))
		}
	}
	b.rep.Expected = expected
	b.rep.ExpectedPerSecond = float64(expected) / b.Duration.Seconds()
	b.say("warming up until %s; measuring until %s (expect %d executions, %.1f/s)",
		from.Format(time.TimeOnly), to.Format(time.TimeOnly), expected, b.rep.ExpectedPerSecond)

	var during chan error
	if b.duringWindow != nil {
		during = make(chan error, 1)
		go func() { during <- b.duringWindow(ctx, from, to) }()
	}
	if _, err := b.progress(ctx, from); err != nil {
		return err
	}
	atStart := b.backlog(ctx)
	cpu := b.startCPU()
	ivs, err := b.progress(ctx, to)
	if err != nil {
		return err
	}
	b.rep.Intervals, b.rep.MinDeliveredPerSecond = ivs, minDelivered(ivs)
	if b.rep.CPU, err = b.finishCPU(ctx, cpu); err != nil {
		return err
	}
	if during != nil {
		if err := <-during; err != nil {
			return err
		}
	}
	b.rep.BacklogAtEnd = b.backlog(ctx)
	if atStart.recorded >= 0 && b.rep.BacklogAtEnd.recorded >= 0 {
		b.rep.RecorderPerSecond = float64(b.rep.BacklogAtEnd.recorded-atStart.recorded) / b.Duration.Seconds()
	}

	// Settle 1: every run of the window has fired (or the settle time is
	// up). Then the jobs are deleted so that nothing fires any more, and
	// exactly-once is checked on final counts.
	deadline := to.Add(b.Settle)
	if _, err := b.waitFor(ctx, from, to, deadline, "fired", func(c counts) bool { return c.Fired >= expected }); err != nil {
		return err
	}
	if !b.Keep {
		if err := b.deleteJobs(ctx); err != nil {
			return err
		}
	}
	if err := b.check(ctx, k, exp, from, to, false); err != nil {
		return err
	}
	// Settle 2: every execution of the window is recorded as finished.
	if _, err := b.waitFor(ctx, from, to, deadline, "recorded as finished", func(c counts) bool { return c.Finished >= c.Fired }); err != nil {
		return err
	}
	if err := b.windowStats(ctx, from, to); err != nil {
		return err
	}
	if err := b.dependentsStats(ctx, from, to, deadline); err != nil {
		return err
	}
	nodes, err := b.nodeStats(ctx, from, to)
	if err != nil {
		return err
	}
	b.rep.Nodes = nodes
	b.rep.HandlerLag, b.rep.Delivered = b.tr.handlerLag(from, to)
	b.rep.DeliveredPerSecond = float64(b.rep.Delivered) / b.Duration.Seconds()
	return nil
}

// runBurst runs the same-second mix: arm every job for one instant,
// wait for all to be fired and recorded, and fill in the report.
func (b *bench) runBurst(ctx context.Context) error {
	at := b.dbNow().Add(burstDelay + time.Second - 1).Truncate(time.Second)
	if err := b.arm(ctx, at, 1); err != nil {
		return err
	}
	if err := b.analyze(ctx); err != nil {
		return err
	}
	b.rep.Burst = &Burst{At: at}
	b.rep.Expected = int64(b.Jobs)
	b.say("all %d jobs due at %s", b.Jobs, at.Format(time.TimeOnly))
	if err := b.sleepUntil(ctx, at); err != nil {
		return err
	}
	to := at.Add(time.Millisecond)
	deadline := at.Add(b.Settle)
	n := int64(b.Jobs)
	if _, err := b.waitFor(ctx, at, to, deadline, "fired", func(c counts) bool { return c.Fired >= n }); err != nil {
		return err
	}
	b.rep.BacklogAtEnd = b.backlog(ctx)
	if err := b.check(ctx, 1, map[int][]time.Time{0: {at}}, at, to, true); err != nil {
		return err
	}
	if _, err := b.waitFor(ctx, at, to, deadline, "recorded as finished", func(c counts) bool { return c.Finished >= c.Fired }); err != nil {
		return err
	}
	if err := b.burstStats(ctx, at); err != nil {
		return err
	}
	nodes, err := b.nodeStats(ctx, at, to)
	if err != nil {
		return err
	}
	b.rep.Nodes = nodes
	b.rep.HandlerLag, b.rep.Delivered = b.tr.handlerLag(at, to)
	if last := b.tr.lastCall(); !last.IsZero() {
		b.rep.Burst.ToLastHandlerCallMS = ptr(float64(last.Sub(at).Microseconds()) / 1000)
	}
	return nil
}

// progress prints the executors' delivery rate and the queues' backlog
// every 10 s until the database clock reaches until, and returns those
// intervals (the last one cut short at until, if it lasted a second).
func (b *bench) progress(ctx context.Context, until time.Time) ([]Interval, error) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	end := time.NewTimer(time.Until(until.Add(-b.offset)))
	defer end.Stop()
	var ivs []Interval
	last, lastAt, lastRec := b.tr.total.Load(), time.Now(), b.backlog(ctx).recorded
	interval := func(now time.Time) (Interval, Backlog) {
		n, bl := b.tr.total.Load(), b.backlog(ctx)
		secs := now.Sub(lastAt).Seconds()
		iv := Interval{End: b.dbNow(), Seconds: secs, DeliveredPerSecond: float64(n-last) / secs,
			RecordedPerSecond: -1, ExecPending: bl.ExecPending}
		if bl.recorded >= 0 && lastRec >= 0 {
			iv.RecordedPerSecond = float64(bl.recorded-lastRec) / secs
		}
		last, lastAt, lastRec = n, now, bl.recorded
		return iv, bl
	}
	for {
		select {
		case <-ctx.Done():
			return ivs, ctx.Err()
		case now := <-end.C:
			if now.Sub(lastAt) >= time.Second {
				iv, _ := interval(now)
				ivs = append(ivs, iv)
			}
			return ivs, nil
		case now := <-t.C:
			iv, bl := interval(now)
			ivs = append(ivs, iv)
			b.say("%s  delivered %d (%.0f/s)  exec queue %d pending + %d at executors  recorder backlog %d (%.0f events/s recorded)",
				iv.End.Format(time.TimeOnly), last, iv.DeliveredPerSecond,
				bl.ExecPending, bl.ExecAckPending, bl.EventsPending, iv.RecordedPerSecond)
		}
	}
}

// backlog reads the handler's and the recorder's JetStream consumers.
// A consumer that cannot be read counts -1.
func (b *bench) backlog(ctx context.Context) Backlog {
	bl := Backlog{ExecPending: -1, ExecAckPending: -1, EventsPending: -1, recorded: -1}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if info := consumerInfo(ctx, b.js, wire.ExecStream, wire.ConsumerName(b.Handler, domain.PriorityNormal)); info != nil {
		bl.ExecPending, bl.ExecAckPending = int64(info.NumPending), int64(info.NumAckPending)
	}
	if info := consumerInfo(ctx, b.js, wire.EventStream, wire.RecorderConsumer); info != nil {
		bl.EventsPending = int64(info.NumPending) + int64(info.NumAckPending)
		bl.recorded = int64(info.AckFloor.Stream)
	}
	return bl
}

func consumerInfo(ctx context.Context, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	c, err := js.Consumer(ctx, stream, name)
	if err != nil {
		return nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil
	}
	return info
}

// waitFor polls the counts of executions scheduled in [from, to) until
// done holds or the database clock passes deadline, and returns the last
// counts. Running out of time is not an error: the report shows what is
// missing.
func (b *bench) waitFor(ctx context.Context, from, to, deadline time.Time, what string, done func(counts) bool) (counts, error) {
	for {
		start := time.Now()
		c, err := b.counts(ctx, from, to)
		if err != nil {
			return c, err
		}
		took := time.Since(start)
		if done(c) {
			return c, nil
		}
		if b.dbNow().After(deadline) {
			b.say("settle time is up: not all executions %s (%d fired, %d finished)", what, c.Fired, c.Finished)
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(max(pollEvery, 10*took)):
		}
	}
}

// cleanup stops the executors and, unless --keep, deletes the run's jobs,
// executions and JetStream consumer.
func (b *bench) cleanup(ctx context.Context, stopExecutors context.CancelFunc, executorsDone <-chan struct{}) {
	if !b.Keep {
		if err := b.deleteDependents(ctx); err != nil {
			b.say("%v; delete namespace %s's jobs yourself", err, b.depsNamespace())
		}
		// Deleted first so that they stop firing; idempotent.
		if err := b.deleteJobs(ctx); err != nil {
			b.say("%v; delete namespace %s's jobs yourself", err, b.ns)
		}
	}
	stopExecutors()
	select {
	case <-executorsDone:
	case <-time.After(20 * time.Second):
		b.say("executors did not stop in 20s")
	}
	if b.Keep {
		b.say("kept namespace %s's jobs and executions, and the consumers of queue %s", b.ns, b.Handler)
		return
	}
	if b.Executors > 0 {
		for _, p := range domain.Priorities {
			name := wire.ConsumerName(b.Handler, p)
			if err := b.js.DeleteConsumer(ctx, wire.ExecStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				b.say("delete consumer %s: %v", name, err)
			}
		}
		if s, err := b.js.Stream(ctx, wire.ExecStream); err == nil {
			_ = s.Purge(ctx, jetstream.WithPurgeSubject(wire.ExecSubject(b.Handler, "*")))
		}
	}
	// Let the recorder write the events still queued before their
	// executions go (it would log each as unknown), for up to a minute.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if bl := b.backlog(ctx); bl.EventsPending <= 0 {
			break
		}
		time.Sleep(time.Second)
	}
	start := time.Now()
	if err := b.deleteExecutions(ctx); err != nil {
		b.say("%v", err)
		return
	}
	b.say("deleted the run's executions (%s)", time.Since(start).Round(time.Millisecond))
}
