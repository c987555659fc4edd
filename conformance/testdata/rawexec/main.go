// Command rawexec is a broken executor for the kit's tests, written
// against JetStream without the SDK: with -mode twice it reports each
// attempt's end twice (under two message ids); with -mode nobeat it sends
// no in-progress acks nor heartbeats, so JetStream hands a long attempt's
// message out again. Otherwise it does what the instructions say.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/signal"
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
	mode := flag.String("mode", "", "twice or nobeat")
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
	c, err := wire.EnsureConsumer(ctx, js, queue, domain.PriorityNormal, wire.ConsumerOptions{})
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
	var e wire.Execution
	if json.Unmarshal(m.Data(), &e) != nil || e.ExecutionID == "" {
		_ = m.Term()
		return
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
	publish(ctx, js, ev, ev.MsgID())
	if mode == "twice" {
		publish(ctx, js, ev, uuid.NewString()) // the broken part: the same end under another id
	}
	_ = m.Ack()
}
