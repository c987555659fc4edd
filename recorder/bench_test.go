package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// BenchmarkDecodeMsg measures what the recorder spends on a batch message
// of 100 events (the Go SDK's shape: a started-less succeeded event with
// started_at and published_at) before and after the store: its decoding,
// the store's view of the events and the acks, with a store that writes
// nothing. ns/op and allocs/op are per message; cpu-ns/event (getrusage) per
// event, GC included. feed=on also publishes the executions' new states to
// the change feed, on an embedded NATS server whose work (storing the
// batch) is counted too.
//
// Run: go test -run '^$' -bench BenchmarkDecodeMsg ./recorder/
func BenchmarkDecodeMsg(b *testing.B) {
	const events = 100
	at := time.Date(2030, 1, 2, 3, 4, 5, 123e6, time.UTC)
	evs := make([]wire.Event, events)
	for i := range evs {
		evs[i] = wire.Event{Type: domain.EventSucceeded, ExecutionID: uuid.NewString(), ScheduledFor: at,
			Attempt: 1, ExecutorID: "bench-12345-a1b2c3", At: at, StartedAt: &at, PublishedAt: &at,
			Namespace: "payments", JobID: uuid.NewString()}
	}
	data, err := json.Marshal(evs)
	if err != nil {
		b.Fatal(err)
	}
	for _, feed := range []bool{false, true} {
		b.Run(fmt.Sprintf("feed=%s", map[bool]string{false: "off", true: "on"}[feed]), func(b *testing.B) {
			cfg := Config{JS: nopJS{}, Store: nopStore{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if feed {
				js := testenv.JetStream(b)
				if err := wire.EnsureChangeStream(context.Background(), js, 1); err != nil {
					b.Fatal(err)
				}
				cfg.Changes = changes.NewPublisher(js.Conn(), cfg.Logger)
			}
			r, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			msgs := []jetstream.Msg{benchMsg{subject: wire.EventBatchSubject, data: data}}
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			before := cpuTime()
			for b.Loop() {
				r.handle(context.Background(), msgs)
			}
			if feed {
				_ = cfg.Changes.Flush() // what is buffered is the loop's work too
			}
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N*events), "cpu-ns/event")
		})
	}
}

// cpuTime is the user and system CPU time this process has used: on this
// shared machine, a steadier figure than ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nopStore records nothing and reports every event written.
type nopStore struct{}

func (nopStore) RecordAttemptEvents(_ context.Context, evs []model.AttemptEvent) ([]error, error) {
	return make([]error, len(evs)), nil
}

// nopJS is a JetStream the benchmark never uses.
type nopJS struct{ jetstream.JetStream }

// benchMsg is a message whose settlement does nothing.
type benchMsg struct {
	jetstream.Msg
	subject string
	data    []byte
}

func (m benchMsg) Subject() string                           { return m.subject }
func (m benchMsg) Data() []byte                              { return m.data }
func (m benchMsg) Ack() error                                { return nil }
func (m benchMsg) TermWithReason(string) error               { return nil }
func (m benchMsg) Metadata() (*jetstream.MsgMetadata, error) { return &jetstream.MsgMetadata{}, nil }
