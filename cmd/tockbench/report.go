package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Report is what a run measured. Lags are in milliseconds.
type Report struct {
	Mix  string `json:"mix"`
	Jobs int    `json:"jobs"`
	// StoredJobs are the jobs stored beside Jobs that do not fire.
	StoredJobs int    `json:"stored_jobs,omitempty"`
	Buckets    int    `json:"buckets"`
	Namespace  string `json:"namespace"`
	Handler    string `json:"handler"`
	Executors  int    `json:"executors"`

	Create Creation `json:"create"`
	// Dependents is --dependents' part.
	Dependents *DependentsReport `json:"dependents,omitempty"`
	// Window is the measured window (recurring mixes).
	Window *Window `json:"window,omitempty"`
	// Burst is the due instant and its timings (same-second).
	Burst *Burst `json:"burst,omitempty"`

	// Expected executions: scheduled times in the window (or one per
	// job for same-second).
	Expected          int64   `json:"expected"`
	ExpectedPerSecond float64 `json:"expected_per_second,omitempty"`
	// Counts of the executions scheduled in the window, at report time.
	Fired      int64 `json:"fired"`
	Dispatched int64 `json:"dispatched"`
	Started    int64 `json:"started"`
	Succeeded  int64 `json:"succeeded"`
	// Rates over the window (recurring mixes).
	FiresPerSecond    float64 `json:"fires_per_second,omitempty"`
	ExecutedPerSecond float64 `json:"executed_per_second,omitempty"`

	// FireLag is scheduled_for → dispatched_at (JetStream's ack recorded).
	FireLag Lag `json:"fire_lag_ms"`
	// StartLag is scheduled_for → started_at (the executor's started
	// event, as recorded).
	StartLag Lag `json:"start_lag_ms"`
	// HandlerLag is scheduled time → first call of the handler, measured
	// by the in-process executors: it needs no recorder.
	HandlerLag         Lag     `json:"handler_lag_ms"`
	Delivered          int64   `json:"delivered"`
	DeliveredPerSecond float64 `json:"delivered_per_second,omitempty"`
	// Intervals are the window's 10-s intervals as they went (recurring
	// mixes): what the executors were handed and the recorder wrote per
	// second in each, whatever its runs' scheduled times. Under overload
	// it shows whether executed/s held up throughout, which the window's
	// averages (of runs scheduled in it) cannot.
	Intervals []Interval `json:"intervals,omitempty"`
	// MinDeliveredPerSecond is the least DeliveredPerSecond of the
	// intervals of at least 5 s (nil: none).
	MinDeliveredPerSecond *float64 `json:"min_delivered_per_second,omitempty"`

	// Exactly once: scheduled times that fired zero times or more than
	// once, and executions at times that were not scheduled.
	ZeroFired  int64 `json:"zero_fired"`
	MultiFired int64 `json:"multi_fired"`
	Unexpected int64 `json:"unexpected"`
	// At least once: execution ids the executors saw more than once, and
	// deliveries with attempt > 1.
	Redeliveries     int64 `json:"redeliveries"`
	RepeatDeliveries int64 `json:"deliveries_with_attempt_gt_1"`

	// RecorderPerSecond is how many events the recorder wrote per second
	// during the window (recurring mixes): one per quick execution (its
	// end, carrying its start), two for one that runs longer than the
	// executors' StartReportDelay.
	RecorderPerSecond float64 `json:"recorder_events_per_second,omitempty"`
	// BacklogAtEnd is the JetStream backlog at the end of the window (or
	// when the burst had fired).
	BacklogAtEnd Backlog `json:"backlog_at_end"`
	// Nodes is each scheduler node's part: with several nodes, it shows
	// that all of them fired.
	Nodes []NodeStats `json:"nodes"`
	// CPU is the CPU time per execution of each process on this machine
	// during the window (recurring mixes): Postgres, tockd, nats-server,
	// the executors.
	CPU *CPU `json:"cpu,omitempty"`
	// LogChunks and LogBytes are the execution log stored for the
	// window's executions (with --log-bytes).
	LogChunks int64 `json:"log_chunks,omitempty"`
	LogBytes  int64 `json:"log_bytes,omitempty"`
}

// Interval is a stretch of the window, by the database's clock.
type Interval struct {
	End     time.Time `json:"end"`
	Seconds float64   `json:"seconds"`
	// DeliveredPerSecond is the in-process executors' handler calls a
	// second (0 with --executors 0); RecordedPerSecond the events the
	// recorder wrote a second (-1: unknown).
	DeliveredPerSecond float64 `json:"delivered_per_second"`
	RecordedPerSecond  float64 `json:"recorded_per_second"`
	// ExecPending is what waited in the handler's queue at its end (-1:
	// unknown).
	ExecPending int64 `json:"exec_pending"`
}

// minFullInterval is the shortest interval minDelivered counts: the
// window's last one may be a sliver.
const minFullInterval = 5 * time.Second

// minDelivered is the least delivery rate of the intervals of at least
// minFullInterval, nil if there are none.
func minDelivered(ivs []Interval) *float64 {
	var low *float64
	for _, iv := range ivs {
		if iv.Seconds < minFullInterval.Seconds() {
			continue
		}
		if low == nil || iv.DeliveredPerSecond < *low {
			low = ptr(iv.DeliveredPerSecond)
		}
	}
	return low
}

// Creation is how fast the jobs were stored.
type Creation struct {
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	// AnalyzeSeconds is how long ANALYZE of the jobs tables took after
	// (0: skipped with --no-analyze).
	AnalyzeSeconds float64 `json:"analyze_seconds"`
}

// Window is the measured window, by the database's clock.
type Window struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Seconds float64   `json:"seconds"`
	// LastSucceededAfterS is how long after End the last execution
	// scheduled in the window succeeded (negative: before End; nil: none
	// did).
	LastSucceededAfterS *float64 `json:"last_succeeded_after_s,omitempty"`
}

// Burst is a same-second run's instant and the time from it until the
// last execution reached each stage, in ms (null: none did).
type Burst struct {
	At                  time.Time `json:"at"`
	ToLastFiredMS       *float64  `json:"to_last_fired_ms"`
	ToLastDispatchedMS  *float64  `json:"to_last_dispatched_ms"`
	ToLastStartedMS     *float64  `json:"to_last_started_ms"`
	ToLastSucceededMS   *float64  `json:"to_last_succeeded_ms"`
	ToLastHandlerCallMS *float64  `json:"to_last_handler_call_ms"`
}

// Lag is a latency distribution in ms; nil when nothing was measured.
type Lag struct {
	P50 *float64 `json:"p50"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// Backlog is what waits in JetStream: executions for the handler not yet
// delivered and delivered but not acknowledged, and events the recorder
// has not written. -1: unknown.
type Backlog struct {
	ExecPending    int64 `json:"exec_pending"`
	ExecAckPending int64 `json:"exec_ack_pending"`
	EventsPending  int64 `json:"events_pending"`
	// recorded is the recorder consumer's ack floor (a stream sequence):
	// its growth is the events recorded.
	recorded int64
}

// counts are the executions of the run scheduled in a range.
type counts struct {
	Fired, Finished int64
}

// windowFilter selects the run's scheduled executions in [$2, $3). The
// id bounds let Postgres read just that range of the primary key: an
// execution id begins with its scheduled time in milliseconds.
const windowFilter = `namespace = $1 AND scheduled_for >= $2 AND scheduled_for < $3
	AND id >= $4 AND id < $5 AND NOT manual`

// windowArgs are windowFilter's arguments.
func (b *bench) windowArgs(from, to time.Time) []any {
	return []any{b.ns, from, to, timeID(from), timeID(to)}
}

// timeID is the smallest execution id of time t.
func timeID(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	id[0], id[1], id[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	id[3], id[4], id[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	return id
}

func (b *bench) counts(ctx context.Context, from, to time.Time) (counts, error) {
	var c counts
	err := b.st.Pool().QueryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE state IN ('succeeded', 'dead', 'cancelled'))
		FROM executions WHERE `+windowFilter, b.windowArgs(from, to)...).Scan(&c.Fired, &c.Finished)
	if err != nil {
		return c, fmt.Errorf("count executions: %w", err)
	}
	return c, nil
}

// statsSQL reads the counts and lags of the run's executions selected by
// windowFilter.
const statsSQL = `
SELECT count(*), count(dispatched_at), count(started_at), count(*) FILTER (WHERE state = 'succeeded'),
	percentile_cont(0.5) WITHIN GROUP (ORDER BY fire_lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY fire_lag), max(fire_lag),
	percentile_cont(0.5) WITHIN GROUP (ORDER BY start_lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY start_lag), max(start_lag),
	max(created_at) - min(scheduled_for), max(dispatched_at) - min(scheduled_for),
	max(started_at) - min(scheduled_for), max(finished_at) FILTER (WHERE state = 'succeeded') - min(scheduled_for)
FROM (
	SELECT *,
		extract(epoch FROM dispatched_at - scheduled_for)::float8 * 1000 AS fire_lag,
		extract(epoch FROM started_at - scheduled_for)::float8 * 1000 AS start_lag
	FROM executions WHERE ` + windowFilter + `
) e`

// stats runs statsSQL; the four durations are from the earliest
// scheduled time to the last execution created, dispatched, started and
// succeeded.
func (b *bench) stats(ctx context.Context, from, to time.Time) (last [4]*time.Duration, err error) {
	r := b.rep
	err = b.st.Pool().QueryRow(ctx, statsSQL, b.windowArgs(from, to)...).Scan(
		&r.Fired, &r.Dispatched, &r.Started, &r.Succeeded,
		&r.FireLag.P50, &r.FireLag.P99, &r.FireLag.Max,
		&r.StartLag.P50, &r.StartLag.P99, &r.StartLag.Max,
		&last[0], &last[1], &last[2], &last[3])
	if err != nil {
		return last, fmt.Errorf("execution statistics: %w", err)
	}
	r.FireLag, r.StartLag = r.FireLag.rounded(), r.StartLag.rounded()
	return last, nil
}

func (b *bench) windowStats(ctx context.Context, from, to time.Time) error {
	last, err := b.stats(ctx, from, to)
	if err != nil {
		return err
	}
	if last[3] != nil {
		// How long after the window its last execution ended: under an
		// overload that ends with the window (spread-once), the time its
		// backlog took to drain.
		b.rep.Window.LastSucceededAfterS = ptr((*last[3] - to.Sub(from)).Seconds())
	}
	secs := to.Sub(from).Seconds()
	b.rep.FiresPerSecond = float64(b.rep.Fired) / secs
	b.rep.ExecutedPerSecond = float64(b.rep.Succeeded) / secs
	if b.LogBytes > 0 {
		if err := b.st.Pool().QueryRow(ctx, `SELECT count(*), coalesce(sum(bytes), 0) FROM execution_logs
			WHERE (execution_id, scheduled_for) IN (SELECT id, scheduled_for FROM executions WHERE `+windowFilter+`)`,
			b.windowArgs(from, to)...).Scan(&b.rep.LogChunks, &b.rep.LogBytes); err != nil {
			return fmt.Errorf("log statistics: %w", err)
		}
	}
	return nil
}

func (b *bench) burstStats(ctx context.Context, at time.Time) error {
	last, err := b.stats(ctx, at, at.Add(time.Millisecond))
	if err != nil {
		return err
	}
	ms := func(d *time.Duration) *float64 {
		if d == nil {
			return nil
		}
		return ptr(float64(d.Microseconds()) / 1000)
	}
	bu := b.rep.Burst
	bu.ToLastFiredMS, bu.ToLastDispatchedMS, bu.ToLastStartedMS, bu.ToLastSucceededMS = ms(last[0]), ms(last[1]), ms(last[2]), ms(last[3])
	return nil
}

// check compares the run's executions scheduled in [from, to) with the
// runs expected there: job i (named jobName(i)) is expected at the times
// exp[i % slots]. Jobs are matched by the name their executions carry, so
// the check works after the jobs are deleted. With outside, executions of
// the run outside [from, to) count as unexpected too.
func (b *bench) check(ctx context.Context, slots int, exp map[int][]time.Time, from, to time.Time, outside bool) error {
	var slotArg []int
	var schedArg []time.Time
	for slot, ts := range exp {
		for _, t := range ts {
			slotArg, schedArg = append(slotArg, slot), append(schedArg, t)
		}
	}
	args := append(b.windowArgs(from, to), slotArg, schedArg, b.Jobs, slots, outside)
	r := b.rep
	err := b.st.Pool().QueryRow(ctx, `
		WITH want AS (
			SELECT 'job-' || lpad(i::text, greatest(7, length(i::text)), '0') AS name, e.sched
			FROM generate_series(0, $8 - 1) AS i
			JOIN unnest($6::int[], $7::timestamptz[]) AS e(slot, sched) ON e.slot = i % $9
		), got AS (
			SELECT job_name AS name, scheduled_for AS sched, count(*) AS n FROM executions
			WHERE `+windowFilter+` GROUP BY 1, 2
		)
		SELECT count(*) FILTER (WHERE want.name IS NOT NULL AND got.n IS NULL),
			count(*) FILTER (WHERE want.name IS NOT NULL AND got.n > 1),
			count(*) FILTER (WHERE want.name IS NULL)
				+ CASE WHEN $10 THEN (SELECT count(*) FROM executions
					WHERE namespace = $1 AND NOT (scheduled_for >= $2 AND scheduled_for < $3)) ELSE 0 END
		FROM want FULL JOIN got ON got.name = want.name AND got.sched = want.sched`, args...).
		Scan(&r.ZeroFired, &r.MultiFired, &r.Unexpected)
	if err != nil {
		return fmt.Errorf("exactly-once check: %w", err)
	}
	return nil
}

// writeJSON prints a report as indented JSON.
func writeJSON(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// write prints the report as text or JSON.
func (r *Report) write(w io.Writer, format string) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	var s strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	p("tockbench %s: %d jobs in %d buckets, %d executors (namespace %s)", r.Mix, r.Jobs, r.Buckets, r.Executors, r.Namespace)
	if r.StoredJobs > 0 {
		p("  stored         %d more jobs that do not fire during the run", r.StoredJobs)
	}
	p("  created        %.0f jobs/s (%.1f s; then ANALYZE %.1f s)", r.Create.JobsPerSecond, r.Create.Seconds, r.Create.AnalyzeSeconds)
	if r.Window != nil {
		p("  window         %s → %s UTC (%.0f s)", r.Window.Start.Format(time.TimeOnly), r.Window.End.Format(time.TimeOnly), r.Window.Seconds)
		p("  fires/s        %.1f (expected %.1f)", r.FiresPerSecond, r.ExpectedPerSecond)
		p("  executed/s     %.1f (recorded succeeded); delivered/s %.1f (seen by the executors)", r.ExecutedPerSecond, r.DeliveredPerSecond)
		if r.Window.LastSucceededAfterS != nil {
			p("  last succeeded %.1f s after the window's end", *r.Window.LastSucceededAfterS)
		}
	}
	if len(r.Intervals) > 0 {
		rates := make([]string, len(r.Intervals))
		for i, iv := range r.Intervals {
			rates[i] = fmt.Sprintf("%.0f", iv.DeliveredPerSecond)
		}
		low := "-"
		if r.MinDeliveredPerSecond != nil {
			low = fmt.Sprintf("%.0f", *r.MinDeliveredPerSecond)
		}
		p("  per 10 s       delivered/s min %s: %s", low, strings.Join(rates, " "))
	}
	if bu := r.Burst; bu != nil {
		p("  due at         %s UTC", bu.At.Format(time.TimeOnly))
		p("  last fired     %s after it", fmtMS(bu.ToLastFiredMS))
		p("  last dispatched %s, last started %s, last succeeded %s, last handler call %s",
			fmtMS(bu.ToLastDispatchedMS), fmtMS(bu.ToLastStartedMS), fmtMS(bu.ToLastSucceededMS), fmtMS(bu.ToLastHandlerCallMS))
	}
	p("  executions     expected %d, fired %d, dispatched %d, started %d, succeeded %d, delivered %d",
		r.Expected, r.Fired, r.Dispatched, r.Started, r.Succeeded, r.Delivered)
	p("  fire lag       %s   (scheduled → dispatched)", r.FireLag)
	if d := r.Dependents; d != nil {
		p("  dependents     %d jobs: %d upstream successes, %d ran, %d missing, %d twice, %d early, %d skipped",
			d.Jobs, d.Expected, d.Ran, d.Missing, d.Twice, d.Early, d.Skipped)
		p("  release lag    %s   (upstream end → dependent dispatched)", d.ReleaseLag)
		p("  dependent lag  %s   (dependent scheduled → dispatched)", d.FireLag)
	}
	p("  start lag      %s   (scheduled → started, recorded)", r.StartLag)
	p("  handler lag    %s   (scheduled → handler called, executor side)", r.HandlerLag)
	p("  exactly once   zero-fired %d, multi-fired %d, unexpected %d", r.ZeroFired, r.MultiFired, r.Unexpected)
	p("  redeliveries   %d (deliveries with attempt > 1: %d)", r.Redeliveries, r.RepeatDeliveries)
	p("  backlog at end exec queue %d pending + %d at executors, recorder %d events",
		r.BacklogAtEnd.ExecPending, r.BacklogAtEnd.ExecAckPending, r.BacklogAtEnd.EventsPending)
	if r.RecorderPerSecond > 0 {
		p("  recorder       %.0f events/s written", r.RecorderPerSecond)
	}
	if r.LogChunks > 0 {
		p("  logs           %d chunks, %.1f MiB stored for the window's executions", r.LogChunks, float64(r.LogBytes)/(1<<20))
	}
	writeNodes(p, r.Nodes)
	writeCPU(p, r.CPU)
	if r.ZeroFired > 0 || r.MultiFired > 0 {
		p("FAIL: some scheduled times did not fire exactly once")
	}
	_, err := io.WriteString(w, s.String())
	return err
}

// rounded is l to 0.01 ms, which is all the precision there is.
func (l Lag) rounded() Lag {
	r := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		return ptr(math.Round(*v*100) / 100)
	}
	return Lag{P50: r(l.P50), P99: r(l.P99), Max: r(l.Max)}
}

func (l Lag) String() string {
	return fmt.Sprintf("p50 %s  p99 %s  max %s", fmtMS(l.P50), fmtMS(l.P99), fmtMS(l.Max))
}

func fmtMS(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= 10_000:
		return fmt.Sprintf("%.1fs", *v/1000)
	case *v >= 100:
		return fmt.Sprintf("%.0fms", *v)
	default:
		return fmt.Sprintf("%.1fms", *v)
	}
}
