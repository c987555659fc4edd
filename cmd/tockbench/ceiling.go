package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
)

// ceilingFlags are the flags of --find-ceiling, embedded in cli.
type ceilingFlags struct {
	FindCeiling bool          `name:"find-ceiling" help:"Find the highest rate (executions/s) the cluster keeps up with: spread-minute jobs, one measured window (--duration, after --warmup) per rate, ramp up by --rate-step until a rate is not kept up with, then bisect to --precision. --jobs does not apply."`
	StartRate   int           `name:"start-rate" default:"1000" help:"--find-ceiling: the first rate tried, executions per second (60 jobs per execution/s)."`
	MaxRate     int           `name:"max-rate" default:"20000" help:"--find-ceiling: the highest rate tried."`
	RateStep    int           `name:"rate-step" default:"1000" help:"--find-ceiling: how much the rate grows per step while it is kept up with."`
	Precision   int           `name:"precision" default:"250" help:"--find-ceiling: stop bisecting once the rate kept up with and the one not are this close."`
	MaxFireLag  time.Duration `name:"max-fire-lag" default:"1s" help:"--find-ceiling: a rate is kept up with if its fire lag p99 is at most this (and every scheduled time fired once and finished within --settle)."`
}

// maxCeilingJobs bounds --max-rate: job names are zero-padded to seven
// digits, and removing jobs between steps relies on their order.
const maxCeilingJobs = 10_000_000

func (c *cli) validateCeiling() error {
	switch {
	case c.Mix != mixSpreadMinute:
		return fmt.Errorf("--find-ceiling runs %s jobs; --mix %s does not apply", mixSpreadMinute, c.Mix)
	case c.StartRate < 1:
		return fmt.Errorf("--start-rate %d: want at least 1", c.StartRate)
	case c.MaxRate < c.StartRate:
		return fmt.Errorf("--max-rate %d: want at least --start-rate (%d)", c.MaxRate, c.StartRate)
	case c.MaxRate*60 >= maxCeilingJobs:
		return fmt.Errorf("--max-rate %d: want below %d (%d jobs)", c.MaxRate, maxCeilingJobs/60, maxCeilingJobs)
	case c.RateStep < 1:
		return fmt.Errorf("--rate-step %d: want at least 1", c.RateStep)
	case c.Precision < 1:
		return fmt.Errorf("--precision %d: want at least 1", c.Precision)
	case c.MaxFireLag <= 0:
		return fmt.Errorf("--max-fire-lag %s: want a positive duration", c.MaxFireLag)
	}
	return nil
}

// CeilingReport is what --find-ceiling measured: every step and the
// highest rate kept up with.
type CeilingReport struct {
	Namespace string `json:"namespace"`
	Handler   string `json:"handler"`
	Buckets   int    `json:"buckets"`
	Executors int    `json:"executors"`
	// StoredJobs are the jobs stored beside each step's that do not fire.
	StoredJobs int `json:"stored_jobs,omitempty"`
	// The search's settings; rates are executions per second.
	StartRate     int           `json:"start_rate"`
	MaxRate       int           `json:"max_rate"`
	RateStep      int           `json:"rate_step"`
	Precision     int           `json:"precision"`
	MaxFireLagMS  float64       `json:"max_fire_lag_ms"`
	WindowSeconds float64       `json:"window_seconds"`
	WarmupSeconds float64       `json:"warmup_seconds"`
	SettleSeconds float64       `json:"settle_seconds"`
	Steps         []CeilingStep `json:"steps"`
	// Ceiling is the highest rate kept up with, 0 if none; CeilingJobs
	// the spread-minute jobs that make it.
	Ceiling     int `json:"ceiling"`
	CeilingJobs int `json:"ceiling_jobs"`
	// ReachedMax: every rate up to --max-rate was kept up with, so the
	// ceiling is --max-rate or higher.
	ReachedMax bool `json:"reached_max"`
	// Complete is false when the search stopped early (interrupted, or an
	// error): the ceiling is then what the steps so far showed.
	Complete bool `json:"complete"`
}

// CeilingStep is one rate tried.
type CeilingStep struct {
	Rate  int    `json:"rate"`
	Jobs  int    `json:"jobs"`
	Phase string `json:"phase"`
	// CaughtUp: before the step's warm-up the cluster had no job of the
	// run more than drainLate overdue and little in JetStream, left from
	// the step before (waited for up to --settle).
	CaughtUp bool `json:"caught_up"`
	KeptUp   bool `json:"kept_up"`
	// WhyNot says why the rate was not kept up with.
	WhyNot []string `json:"why_not,omitempty"`
	Report *Report  `json:"report"`
}

// mainCeiling runs --find-ceiling and prints its report; it returns the
// exit code: 1 if a step fired a scheduled time more than once (a
// correctness failure, whatever the rate) or the run failed.
func (c *cli) mainCeiling() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := c.runCeiling(ctx)
	if rep != nil && len(rep.Steps) > 0 {
		if werr := rep.write(os.Stdout, c.Output); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	for _, s := range rep.Steps {
		if s.Report.MultiFired > 0 || s.Report.Unexpected > 0 {
			return 1
		}
	}
	return 0
}

// runCeiling sets up as run does (store, NATS, executors, cleanup), then
// walks the rates of a rateSearch, one step each. Jobs persist from one
// step to the next: a higher rate adds jobs, a lower one removes the
// newest. It returns the report so far with an error.
func (c *cli) runCeiling(ctx context.Context) (*CeilingReport, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.validateCeiling(); err != nil {
		return nil, err
	}
	b := c.newBench()

	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.close()
	rep := &CeilingReport{
		Namespace: b.ns, Handler: b.Handler, Buckets: b.buckets, Executors: b.Executors, StoredJobs: b.StoredJobs,
		StartRate: b.StartRate, MaxRate: b.MaxRate, RateStep: b.RateStep, Precision: b.Precision,
		MaxFireLagMS: float64(b.MaxFireLag.Microseconds()) / 1000, WindowSeconds: b.Duration.Seconds(),
		WarmupSeconds: b.Warmup.Seconds(), SettleSeconds: b.Settle.Seconds(),
	}
	b.say("finding the ceiling: %d to %d executions/s in steps of %d, precision %d, fire lag p99 ≤ %s; namespace %s, handler %s, %d buckets",
		b.StartRate, b.MaxRate, b.RateStep, b.Precision, b.MaxFireLag, b.ns, b.Handler, b.buckets)

	b.tr = newTracker(b.offset, b.LogBytes)
	execCtx, stopExecutors := context.WithCancel(context.WithoutCancel(ctx))
	executorsDone, err := startExecutors(execCtx, b.NATSURL, b.Handler, b.suffix, b.Executors, b.tr, b.log)
	if err != nil {
		stopExecutors()
		return nil, err
	}
	keep := b.Keep
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.Keep = keep
		b.cleanup(cctx, stopExecutors, executorsDone)
	}()
	if err := b.createStored(ctx); err != nil {
		return rep, err
	}
	actx, stopAnalyze := context.WithCancel(ctx)
	analyzed := make(chan struct{})
	go func() { defer close(analyzed); b.analyzeLoop(actx) }()
	defer func() { stopAnalyze(); <-analyzed }()

	s := &rateSearch{start: b.StartRate, max: b.MaxRate, step: b.RateStep, precision: b.Precision}
	have := 0 // jobs job-0000000 … jobName(have-1) exist
	for {
		rate, phase, ok := s.next()
		if !ok {
			break
		}
		step, err := b.ceilingStep(ctx, rate, phase, &have)
		if step != nil {
			rep.Steps = append(rep.Steps, *step)
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				err = errors.New("interrupted")
			}
			rep.Ceiling, rep.ReachedMax = s.ceiling()
			rep.CeilingJobs = rep.Ceiling * 60
			return rep, err
		}
		s.record(rate, step.KeptUp)
		verdict := "kept up"
		if !step.KeptUp {
			verdict = "not kept up: " + strings.Join(step.WhyNot, "; ")
		}
		b.say("step %d/s (%s): %s", rate, phase, verdict)
	}
	rep.Ceiling, rep.ReachedMax = s.ceiling()
	rep.CeilingJobs = rep.Ceiling * 60
	rep.Complete = true
	return rep, nil
}

// ceilingStep sets the run's jobs to rate × 60 (one per second of the
// minute per execution/s), waits for the cluster to be caught up, and
// measures one window with runWindow. have is how many jobs exist, kept
// up to date.
func (b *bench) ceilingStep(ctx context.Context, rate int, phase string, have *int) (*CeilingStep, error) {
	want := rate * 60
	b.Jobs = want
	b.rep = &Report{Mix: mixSpreadMinute, Jobs: want, StoredJobs: b.StoredJobs, Buckets: b.buckets, Namespace: b.ns, Handler: b.Handler, Executors: b.Executors}
	b.say("step %d executions/s (%s): %d jobs", rate, phase, want)
	switch {
	case want > *have:
		if err := b.createSpreadMinute(ctx, *have, want); err != nil {
			return nil, err
		}
	case want < *have:
		if err := b.removeJobsFrom(ctx, want); err != nil {
			return nil, err
		}
	}
	*have = want
	step := &CeilingStep{Rate: rate, Jobs: want, Phase: phase, Report: b.rep}
	caughtUp, err := b.drain(ctx, rate)
	if err != nil {
		return nil, err
	}
	step.CaughtUp = caughtUp

	// The tracker holds one step's deliveries, not the whole search's.
	b.tr.forget(b.dbNow().Add(-time.Minute))
	_, retriedBefore := b.tr.redeliveries()
	// runWindow deletes the jobs after its first settle phase unless
	// --keep; here they stay for the next step (cleanup deletes them).
	b.Keep = true
	err = b.runWindow(ctx)
	if err != nil {
		return nil, err
	}
	var retried int64
	b.rep.Redeliveries, retried = b.tr.redeliveries()
	b.rep.RepeatDeliveries = retried - retriedBefore
	step.KeptUp, step.WhyNot = keptUp(b.rep, b.MaxFireLag)
	if !caughtUp && !step.KeptUp {
		step.WhyNot = append(step.WhyNot, "the cluster had not caught up with the step before")
	}
	return step, nil
}

// keptUp judges a step's report: every scheduled time of the window fired
// exactly once, all were recorded as succeeded (the no-op handler never
// fails) within the settle time, and the fire lag's p99 is at most bound.
// whyNot lists what failed.
func keptUp(r *Report, bound time.Duration) (ok bool, whyNot []string) {
	if r.ZeroFired > 0 {
		whyNot = append(whyNot, fmt.Sprintf("%d of %d scheduled times not fired within the settle time", r.ZeroFired, r.Expected))
	}
	if r.MultiFired > 0 {
		whyNot = append(whyNot, fmt.Sprintf("%d scheduled times fired more than once", r.MultiFired))
	}
	if r.Unexpected > 0 {
		whyNot = append(whyNot, fmt.Sprintf("%d executions at times no job was scheduled for", r.Unexpected))
	}
	if n := r.Fired - r.Succeeded; n > 0 {
		whyNot = append(whyNot, fmt.Sprintf("%d executions not recorded as succeeded within the settle time", n))
	}
	boundMS := float64(bound.Microseconds()) / 1000
	switch p99 := r.FireLag.P99; {
	case p99 == nil:
		whyNot = append(whyNot, "no fire lag measured")
	case *p99 > boundMS:
		whyNot = append(whyNot, fmt.Sprintf("fire lag p99 %s > %s", fmtMS(p99), bound))
	}
	return len(whyNot) == 0, whyNot
}

// createSpreadMinute stores jobs lo … hi-1 of the spread-minute mix with
// CopyJobs, createBatch at a time, and records the creation in the
// step's report. Like createJobs, each job's first run is a second or
// more after its batch is built.
func (b *bench) createSpreadMinute(ctx context.Context, lo, hi int) error {
	handler := domain.Handler{Type: domain.HandlerCustom, Name: b.Handler}
	start := time.Now()
	err := b.storeJobs(ctx, lo, hi, func(i int, _ time.Time) jobs.NewJob {
		return jobs.NewJob{Namespace: b.ns, Name: jobName(i), Handler: handler,
			Schedule: schedule.Spec{Cron: cronOf(mixSpreadMinute, i%60)}}
	}, nil)
	if err != nil {
		return err
	}
	took := time.Since(start)
	b.rep.Create = Creation{Seconds: took.Seconds(), JobsPerSecond: float64(hi-lo) / took.Seconds()}
	b.say("created jobs %d to %d in %s (%.0f jobs/s)", lo, hi-1, took.Round(time.Millisecond), b.rep.Create.JobsPerSecond)
	return nil
}

// removeJobsFrom deletes the run's jobs from job n on (by name: names are
// zero-padded, so their order is the jobs' order), in one statement: they
// stop firing, as a lower rate needs.
func (b *bench) removeJobsFrom(ctx context.Context, n int) error {
	start := time.Now()
	err := b.exec(ctx, `
		WITH gone AS (
			DELETE FROM job_names WHERE namespace = $1 AND name >= $2 RETURNING bucket, job_id
		), successes AS (
			DELETE FROM job_successes s USING gone WHERE s.job_id = gone.job_id
		)
		DELETE FROM jobs j USING gone WHERE j.bucket = gone.bucket AND j.id = gone.job_id`,
		b.ns, jobName(n))
	if err != nil {
		return fmt.Errorf("remove jobs from %s on: %w", jobName(n), err)
	}
	b.say("removed jobs from %d on (%s)", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// drainLate is how overdue a job of the run may be when the cluster
// counts as caught up between steps.
const drainLate = 2 * time.Second

// drain waits, up to --settle, until the cluster has caught up with the
// step before: no job of the run more than drainLate overdue, and at
// most two seconds' worth of rate executions and events waiting in
// JetStream. A step right after one that fell behind would otherwise
// measure the backlog, since missed runs are fired late, not skipped.
func (b *bench) drain(ctx context.Context, rate int) (bool, error) {
	deadline := b.dbNow().Add(b.Settle)
	said := false
	for {
		var overdue int64
		err := b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs
			WHERE namespace = $1 AND state = 'active' AND next_run_at < $2`,
			b.ns, b.dbNow().Add(-drainLate)).Scan(&overdue)
		if err != nil {
			return false, fmt.Errorf("count overdue jobs: %w", err)
		}
		bl := b.backlog(ctx)
		waiting := max(bl.ExecPending, 0) + max(bl.EventsPending, 0)
		if overdue == 0 && waiting <= int64(2*rate) {
			return true, nil
		}
		if b.dbNow().After(deadline) {
			b.say("the cluster has not caught up after %s: %d jobs overdue, %d executions and events in JetStream; measuring anyway",
				b.Settle, overdue, waiting)
			return false, nil
		}
		if !said {
			b.say("waiting for the cluster to catch up: %d jobs overdue, %d executions and events in JetStream", overdue, waiting)
			said = true
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// forget drops what the tracker knows of executions scheduled before t,
// so that a long --find-ceiling run holds about one step's deliveries.
func (t *tracker) forget(before time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.seen {
		if domain.ExecutionTime(id).Before(before) {
			delete(t.seen, id)
		}
	}
}

// write prints the ceiling report as text (a table of the steps) or JSON.
func (r *CeilingReport) write(w io.Writer, format string) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	var s strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	p("tockbench --find-ceiling: spread-minute jobs, kept up = fire lag p99 ≤ %s, every scheduled time fired once and succeeded within %.0f s",
		time.Duration(r.MaxFireLagMS*float64(time.Millisecond)), r.SettleSeconds)
	p("  %d buckets, %d executors, windows of %.0f s after %.0f s warm-up (namespace %s)",
		r.Buckets, r.Executors, r.WindowSeconds, r.WarmupSeconds, r.Namespace)
	if r.StoredJobs > 0 {
		p("  %d more jobs stored that do not fire during the search", r.StoredJobs)
	}
	p("  %8s %9s %-6s %9s %9s %9s %9s %9s %11s  %s", "rate/s", "jobs", "phase", "fires/s", "fire p50", "fire p99", "start p99", "handler p99", "zero/multi", "kept up")
	for _, st := range r.Steps {
		rp := st.Report
		verdict := "yes"
		if !st.KeptUp {
			verdict = "no: " + strings.Join(st.WhyNot, "; ")
		}
		p("  %8d %9d %-6s %9.1f %9s %9s %9s %11s %11s  %s", st.Rate, st.Jobs, st.Phase, rp.FiresPerSecond,
			fmtMS(rp.FireLag.P50), fmtMS(rp.FireLag.P99), fmtMS(rp.StartLag.P99), fmtMS(rp.HandlerLag.P99),
			fmt.Sprintf("%d/%d", rp.ZeroFired, rp.MultiFired), verdict)
		if len(rp.Nodes) > 0 {
			p("  %8s nodes: %s", "", nodeSummary(rp.Nodes))
		}
		if rp.CPU != nil {
			p("  %8s cpu: %s", "", cpuSummary(rp.CPU))
		}
	}
	switch {
	case !r.Complete:
		p("  ceiling  %d executions/s so far (the search did not finish)", r.Ceiling)
	case r.ReachedMax:
		p("  ceiling  %d executions/s or more (%d jobs, each once a minute): every rate up to --max-rate was kept up with", r.Ceiling, r.CeilingJobs)
	case r.Ceiling == 0:
		p("  ceiling  none: not even the lowest rate tried was kept up with")
	default:
		p("  ceiling  %d executions/s (%d jobs, each once a minute): the highest rate kept up with; %d/s was not",
			r.Ceiling, r.CeilingJobs, r.lowestBad())
	}
	_, err := io.WriteString(w, s.String())
	return err
}

// lowestBad is the lowest rate tried that was not kept up with, 0 if none.
func (r *CeilingReport) lowestBad() int {
	bad := 0
	for _, st := range r.Steps {
		if !st.KeptUp && (bad == 0 || st.Rate < bad) {
			bad = st.Rate
		}
	}
	return bad
}
