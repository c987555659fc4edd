package executor

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

// BenchmarkWorkerNoop measures the CPU one execution costs a Worker with a
// no-op handler at Concurrency 256, as tockbench's in-process executors
// run. The NATS server is embedded, so cpu-us/exec (getrusage of the whole
// process) and allocs/op include the server's work and the publisher's;
// the publish sub-benchmark publishes the same way with no Worker, as the
// baseline to subtract from paced.
//
//	backlog: b.N executions are stored before the Worker starts (outside
//	         the measurement); the Worker is saturated throughout.
//	paced:   executions are published at benchRate while the Worker runs,
//	         as a dispatcher feeding an executor that keeps up.
//	publish: paced without a Worker.
//
// Run: go test -run '^$' -bench BenchmarkWorkerNoop -benchtime 20000x ./executor/
func BenchmarkWorkerNoop(b *testing.B) {
	b.Run("backlog", func(b *testing.B) { benchWorker(b, true, 0) })
	b.Run("paced", func(b *testing.B) { benchWorker(b, true, benchRate) })
	b.Run("publish", func(b *testing.B) { benchWorker(b, false, benchRate) })
}

// benchRate is the paced publish rate, per second: about what each of
// tockbench's two executors sees at tock's measured ceiling.
const benchRate = 4000

const benchQueue = "bench"

func benchWorker(b *testing.B, withWorker bool, rate int) {
	url := testenv.NATS(b).URL()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	pubNC, evNC, workNC := connect(), connect(), connect()
	js, err := jetstream.New(pubNC)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := wire.EnsureStreams(ctx, js); err != nil {
		b.Fatal(err)
	}

	// The ends reported so far: every no-op attempt ends in a succeeded
	// event, in a batch message.
	var ended atomic.Int64
	succeeded := []byte(`"type":"succeeded"`)
	if _, err := evNC.Subscribe(wire.EventBatchSubject, func(m *nats.Msg) {
		ended.Add(int64(bytes.Count(m.Data, succeeded)))
	}); err != nil {
		b.Fatal(err)
	}
	msgs := make([]*nats.Msg, b.N)
	ids := make([]string, b.N)
	for i := range msgs {
		ex := execution(benchQueue)
		m, err := ex.Msg()
		if err != nil {
			b.Fatal(err)
		}
		msgs[i], ids[i] = m, ex.MsgID()
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.PublishMsgAsync(msgs[i], jetstream.WithMsgID(ids[i])); err != nil {
				b.Fatal(err)
			}
		}
	}
	// stored waits until every publish is acknowledged: stored.
	stored := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatalf("%d publishes unacknowledged", js.PublishAsyncPending())
		}
	}

	if rate == 0 {
		publish(0, b.N)
		stored()
	}

	var w *Worker
	if withWorker {
		w, err = New(Config{NATS: workNC, ExecutorID: "bench", Concurrency: 256,
			ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		w.Handle(benchQueue, func(context.Context, *Execution) (string, error) { return "", nil })
	}

	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	runDone := make(chan error, 1)
	if w != nil {
		go func() { runDone <- w.Run(ctx) }()
	}
	if rate > 0 {
		// Publish in ticks of 1 ms, as a dispatcher's batches would.
		start := time.Now()
		for sent := 0; sent < b.N; {
			time.Sleep(time.Millisecond)
			due := min(b.N, int(time.Since(start).Seconds()*float64(rate)))
			publish(sent, due)
			sent = due
		}
	}
	stored()
	deadline := time.Now().Add(time.Minute)
	for w != nil && ended.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d executions ended", ended.Load(), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	cpu := cpuTime() - before
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/exec")
	cancel()
	if w != nil {
		if err := <-runDone; err != nil {
			b.Error(err)
		}
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
