package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
)

// mixLogFlood: one execution whose handler writes its log as fast as it
// can (or at --log-rate) for --duration: what a log costs per MiB, and
// how fast one attempt's log can be stored.
const mixLogFlood = "log-flood"

// logFloodCap is the flood job's log cap: all of it is kept (tockd must
// allow it: tockd dev --log-max-cap 2147483648).
const logFloodCap = 2 << 30

// LogFloodReport is a --mix log-flood run's result.
type LogFloodReport struct {
	Mix          string  `json:"mix"`
	Seconds      float64 `json:"seconds"`
	WrittenMiB   float64 `json:"written_mib"`
	StoredMiB    float64 `json:"stored_mib"`
	Chunks       int64   `json:"chunks"`
	StoredMiBps  float64 `json:"stored_mib_per_second"`
	DroppedMiB   float64 `json:"dropped_mib"`
	SettleSecond float64 `json:"stored_after_seconds"`
	// CPUPerMiB is each component's CPU time per MiB stored, in ms.
	CPUPerMiB map[string]float64 `json:"cpu_ms_per_mib"`
}

func (c *cli) mainLogFlood(ctx context.Context) int {
	rep, err := c.runLogFlood(ctx)
	if err == nil {
		if c.Output == "json" {
			err = json.NewEncoder(os.Stdout).Encode(rep)
		} else {
			rep.write(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	return 0
}

func (r *LogFloodReport) write(w io.Writer) {
	fmt.Fprintf(w, "tockbench log-flood: one attempt writing its log for %.0f s\n", r.Seconds)
	fmt.Fprintf(w, "  written        %.1f MiB (%.1f MiB/s)\n", r.WrittenMiB, r.WrittenMiB/r.Seconds)
	fmt.Fprintf(w, "  stored         %.1f MiB in %d chunks, %.1f MiB/s; dropped %.1f MiB; all stored %.1f s after the writing ended\n",
		r.StoredMiB, r.Chunks, r.StoredMiBps, r.DroppedMiB, r.SettleSecond)
	for name, ms := range r.CPUPerMiB {
		fmt.Fprintf(w, "  CPU/MiB        %-22s %6.1f ms\n", name, ms)
	}
}

func (c *cli) runLogFlood(ctx context.Context) (*LogFloodReport, error) {
	if c.Duration <= 0 {
		return nil, fmt.Errorf("--duration %s: want a positive duration", c.Duration)
	}
	if c.LogRate < 0 {
		return nil, fmt.Errorf("--log-rate %v: want 0 (as fast as it can) or more MiB/s", c.LogRate)
	}
	b := c.newBench()
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.close()

	// The handler: 4 KiB lines, as fast as it can or at --log-rate.
	var written atomic.Int64
	started, finished := make(chan time.Time, 1), make(chan time.Time, 1)
	line := []byte(strings.Repeat("flood ", 4096/6+1)[:4095] + "\n")
	nc, err := nats.Connect(b.NATSURL, nats.Name("tockbench log-flood executor"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	w, err := executor.New(executor.Config{NATS: nc, ExecutorID: "tockbench-flood-" + b.suffix, Logger: b.log})
	if err != nil {
		return nil, err
	}
	w.Handle(b.Handler, func(hctx context.Context, x *executor.Execution) (string, error) {
		out := executor.Log(hctx)
		began := time.Now()
		started <- began
		for time.Since(began) < c.Duration {
			if c.LogRate > 0 {
				// Pace: never ahead of the rate.
				ahead := time.Duration(float64(written.Load())/(c.LogRate*(1<<20))*float64(time.Second)) - time.Since(began)
				if ahead > 0 {
					time.Sleep(ahead)
				}
			}
			_, _ = out.Write(line)
			written.Add(int64(len(line)))
		}
		finished <- time.Now()
		return "flooded", nil
	})
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { _ = w.Run(wctx); close(done) }()
	defer func() { stopWorker(); <-done }()

	svc, err := jobs.New(jobs.Config{Store: b.st, Clock: clock.New(b.st.Now, clock.Options{}), MaxLogCap: logFloodCap})
	if err != nil {
		return nil, err
	}
	at := b.dbNow().Add(2 * time.Second)
	j, err := svc.Create(ctx, jobs.NewJob{Namespace: b.ns, Name: "log-flood", Schedule: schedule.Spec{At: &at},
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: b.Handler, Log: &domain.LogPolicy{CapBytes: logFloodCap, Policy: domain.LogHead}}})
	if err != nil {
		return nil, fmt.Errorf("create the flood job: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = svc.Delete(cctx, j.ID)
	}()
	b.say("log-flood: job %s, handler %s, for %s", j.ID, b.Handler, c.Duration)

	var from, to time.Time
	select {
	case from = <-started:
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("the flood job did not start within a minute")
	}
	cpu := b.startCPU()
	select {
	case to = <-finished:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Wait until what was sent is stored: the stored total stops growing.
	stored := func() (chunks, bytes int64) {
		_ = b.st.Pool().QueryRow(ctx, `SELECT count(*), coalesce(sum(l.bytes), 0) FROM execution_logs l
			JOIN executions e ON e.id = l.execution_id AND e.scheduled_for = l.scheduled_for WHERE e.job_id = $1`, j.ID).Scan(&chunks, &bytes)
		return chunks, bytes
	}
	var chunks, bytes int64
	settled := to
	for last, still := int64(-1), 0; still < 3 && time.Since(to) < c.Settle; time.Sleep(500 * time.Millisecond) {
		chunks, bytes = stored()
		if bytes == last {
			still++
			continue
		}
		last, still, settled = bytes, 0, time.Now()
	}
	usage, err := b.finishCPU(ctx, cpu)
	if err != nil {
		return nil, err
	}
	mib := float64(bytes) / (1 << 20)
	rep := &LogFloodReport{Mix: mixLogFlood, Seconds: to.Sub(from).Seconds(), WrittenMiB: float64(written.Load()) / (1 << 20),
		StoredMiB: mib, Chunks: chunks, StoredMiBps: mib / settled.Sub(from).Seconds(),
		DroppedMiB: float64(written.Load()-bytes) / (1 << 20), SettleSecond: settled.Sub(to).Seconds(), CPUPerMiB: map[string]float64{}}
	if usage != nil && mib > 0 {
		for _, comp := range usage.Components {
			rep.CPUPerMiB[comp.Name] = comp.Cores * usage.Seconds * 1000 / mib
		}
	}
	return rep, nil
}
