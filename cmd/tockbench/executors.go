package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
)

// executorConcurrency is each in-process executor's Concurrency.
const executorConcurrency = 256

// tracker counts what the in-process executors are handed.
type tracker struct {
	offset time.Duration // database clock minus local clock
	total  atomic.Int64  // deliveries

	mu   sync.Mutex
	seen map[uuid.UUID]delivery
	// retried counts deliveries with Attempt > 1.
	retried int64
	// logText, if set, is what the handler writes to each attempt's log
	// (--log-bytes).
	logText []byte
	// last is the database-clock time of the latest handler call.
	last time.Time
}

// delivery is what the tracker keeps per execution id.
type delivery struct {
	n uint16
	// lagMS is scheduled time → first handler call, by the database clock.
	lagMS float32
}

func newTracker(offset time.Duration, logBytes int) *tracker {
	return &tracker{offset: offset, seen: make(map[uuid.UUID]delivery), logText: logText(logBytes)}
}

// logText is n bytes of log: lines of 100 bytes (the last shorter).
func logText(n int) []byte {
	if n <= 0 {
		return nil
	}
	line := []byte(strings.Repeat("tockbench log line ", 6)[:99] + "\n")
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, line[:min(len(line), n-len(out))]...)
	}
	if out[len(out)-1] != '\n' {
		out[len(out)-1] = '\n'
	}
	return out
}

// handle is the no-op handler: it counts the delivery and succeeds,
// after writing logText to the attempt's log if there is one.
func (t *tracker) handle(ctx context.Context, e *executor.Execution) (string, error) {
	if len(t.logText) > 0 {
		_, _ = executor.Log(ctx).Write(t.logText)
	}
	now := time.Now().Add(t.offset)
	id, err := uuid.Parse(e.ExecutionID)
	if err != nil {
		return "", executor.Permanent(fmt.Errorf("execution id %q: %w", e.ExecutionID, err))
	}
	t.total.Add(1)
	t.mu.Lock()
	d := t.seen[id]
	if d.n == 0 {
		d.lagMS = float32(now.Sub(e.ScheduledFor).Seconds() * 1000)
	}
	if d.n < ^uint16(0) {
		d.n++
	}
	t.seen[id] = d
	if e.Attempt > 1 {
		t.retried++
	}
	if now.After(t.last) {
		t.last = now
	}
	t.mu.Unlock()
	return "", nil
}

// redeliveries are the execution ids delivered more than once, and the
// deliveries with Attempt > 1.
func (t *tracker) redeliveries() (ids, retried int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.seen {
		if d.n > 1 {
			ids++
		}
	}
	return ids, t.retried
}

// lastCall is the database-clock time of the latest handler call.
func (t *tracker) lastCall() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// handlerLag is the distribution of scheduled time → first handler call
// over executions scheduled in [from, to), and how many there were.
func (t *tracker) handlerLag(from, to time.Time) (Lag, int64) {
	t.mu.Lock()
	lags := make([]float64, 0, len(t.seen))
	for id, d := range t.seen {
		if at := domain.ExecutionTime(id); !at.Before(from) && at.Before(to) {
			lags = append(lags, float64(d.lagMS))
		}
	}
	t.mu.Unlock()
	return lagOf(lags), int64(len(lags))
}

// lagOf is the p50, p99 and max of lags (ms), interpolated as Postgres's
// percentile_cont does.
func lagOf(lags []float64) Lag {
	if len(lags) == 0 {
		return Lag{}
	}
	slices.Sort(lags)
	pct := func(p float64) float64 {
		x := p * float64(len(lags)-1)
		i := int(x)
		if i+1 >= len(lags) {
			return lags[len(lags)-1]
		}
		return lags[i] + (x-float64(i))*(lags[i+1]-lags[i])
	}
	return Lag{P50: ptr(pct(0.5)), P99: ptr(pct(0.99)), Max: ptr(lags[len(lags)-1])}.rounded()
}

func ptr[T any](v T) *T { return &v }

// startExecutors runs n no-op executors for handler, each on its own NATS
// connection as separate processes would be, until ctx ends. The returned
// channel is closed when all have stopped.
func startExecutors(ctx context.Context, url, handler, suffix string, n int, tr *tracker, log *slog.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("tockbench %s executor %d", suffix, i)), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("executor %d: connect to NATS %s: %w", i, url, err)
		}
		w, err := executor.New(executor.Config{
			NATS:            nc,
			ExecutorID:      fmt.Sprintf("tockbench-%s-%d", suffix, i),
			Concurrency:     executorConcurrency,
			ShutdownTimeout: 5 * time.Second,
			Logger:          log,
		})
		if err != nil {
			nc.Close()
			return nil, err
		}
		w.Handle(handler, tr.handle)
		wg.Go(func() {
			defer nc.Close()
			if err := w.Run(ctx); err != nil {
				log.Error("executor stopped", "executor", w.ID(), "err", err)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	return done, nil
}
