// Command rawexec is a broken executor for the kit's tests, written
// against JetStream without the SDK: with -mode twice it reports each
// attempt's end twice (under two message ids); with -mode nobeat it sends
// no in-progress acks nor heartbeats, so JetStream hands a long attempt's
// message out again; with -mode batchrerun it takes batch messages and
// runs every member of every delivery, a batch message delivered again
// too (where the protocol hands its members back). Otherwise it does what
// the instructions say.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/conformance"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

func main() {
	mode := flag.String("mode", "", "twice, nobeat or batchrerun")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect(os.Getenv(conformance.EnvNATSURL))
	if err != nil {
		os.Exit(1)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		os.Exit(1)
	}
	queue := os.Getenv(conformance.EnvHandler)
	c, err := wire.EnsureConsumer(ctx, js, queue, domain.PriorityNormal, wire.ConsumerOptions{Batch: *mode == "batchrerun"})
	if err != nil {
		os.Exit(1)
	}
	for ctx.Err() == nil {
		m, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		go handle(ctx, js, m, *mode)
	}
}

func publish(ctx context.Context, js jetstream.JetStream, ev wire.Event, id string) {
	b, _ := json.Marshal(ev)
	msg := nats.NewMsg(ev.Subject())
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, id)
	_, _ = js.PublishMsg(ctx, msg)
}

func handle(ctx context.Context, js jetstream.JetStream, m jetstream.Msg, mode string) {
	if wire.IsBatch(m.Headers()) {
		members, err := wire.DecodeBatch(m.Data())
		if err != nil {
			_ = m.Term()
			return
		}
		// The broken part of batchrerun: whatever the delivery count.
		var wg sync.WaitGroup
		for _, b := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(ctx, js, m, b, mode)
			}()
		}
		wg.Wait()
		_ = m.Ack()
		return
	}
	if run(ctx, js, m, m.Data(), mode) {
		_ = m.Ack()
	} else {
		_ = m.Term()
	}
}

// run runs one execution whose body is body, delivered in m, and reports
// whether it was one.
func run(ctx context.Context, js jetstream.JetStream, m jetstream.Msg, body []byte, mode string) bool {
	var e wire.Execution
	if json.Unmarshal(body, &e) != nil || e.ExecutionID == "" {
		return false
	}
	meta, _ := m.Metadata()
	ev := wire.Event{ExecutionID: e.ExecutionID, ScheduledFor: e.ScheduledFor, Attempt: e.Attempt(int(meta.NumDelivered)),
		ExecutorID: "rawexec", Dispatch: e.Dispatch, Namespace: e.Namespace, JobID: e.JobID}
	ev.Type, ev.At = domain.EventStarted, time.Now()
	publish(ctx, js, ev, ev.MsgID())
	in, _ := conformance.ReadInstruction(e.Payload)
	if in.Do == conformance.DoWork {
		done := make(chan struct{})
		if mode != "nobeat" { // the broken part of nobeat: no in-progress acks
			go func() {
				for {
					select {
					case <-done:
						return
					case <-time.After(10 * time.Second):
						_ = m.InProgress()
					}
				}
			}()
		}
		time.Sleep(in.Work())
		close(done)
	}
	ev.Type, ev.At, ev.Output = domain.EventSucceeded, time.Now(), in.Output
	if in.EchoID {
		ev.Output = e.ExecutionID
	}
	publish(ctx, js, ev, ev.MsgID())
	if mode == "twice" {
		publish(ctx, js, ev, uuid.NewString()) // the broken part: the same end under another id
	}
	return true
}
