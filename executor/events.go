package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/wire"
)

// Events go to the event stream in batches: every attempt that reports
// within batchLinger of another shares one JetStream message (a JSON
// array on wire.EventBatchSubject) with it, so that under load the event
// stream, and the recorder reading it, handle one message per batch
// instead of one or two per execution. Each caller still waits for its
// batch's publish acknowledgement before it settles its execution
// message, so an event is never lost behind an ack.
const (
	eventBatchMax    = 200
	eventBatchLinger = 2 * time.Millisecond
	// eventPublishers bounds the batches being published at once.
	eventPublishers = 4
)

// eventBatcher publishes events in batches for the attempts of a Worker.
type eventBatcher struct {
	js  jetstream.JetStream
	in  chan *queuedEvent
	sem chan struct{}
	wg  sync.WaitGroup
}

type queuedEvent struct {
	ev   wire.Event
	done chan error
}

func newEventBatcher(js jetstream.JetStream) *eventBatcher {
	return &eventBatcher{js: js, in: make(chan *queuedEvent, eventBatchMax), sem: make(chan struct{}, eventPublishers)}
}

// run gathers and publishes batches until ctx ends, then waits for the
// batches being published.
func (b *eventBatcher) run(ctx context.Context) {
	defer b.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var batch []*queuedEvent
		select {
		case q := <-b.in:
			batch = append(batch, q)
		case <-ctx.Done():
			return
		}
		timer.Reset(eventBatchLinger)
	gather:
		for len(batch) < eventBatchMax {
			select {
			case q := <-b.in:
				batch = append(batch, q)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		select {
		case b.sem <- struct{}{}:
		case <-ctx.Done():
			for _, q := range batch {
				q.done <- ctx.Err()
			}
			return
		}
		b.wg.Go(func() {
			defer func() { <-b.sem }()
			err := b.publish(ctx, batch)
			for _, q := range batch {
				q.done <- err
			}
		})
	}
}

// publish sends one batch, retrying for a while. Its Nats-Msg-Id is made
// once, so a retried publish is dropped by JetStream if the first one
// made it.
func (b *eventBatcher) publish(ctx context.Context, batch []*queuedEvent) error {
	evs := make([]wire.Event, len(batch))
	for i, q := range batch {
		evs[i] = q.ev
	}
	data, err := json.Marshal(evs)
	if err != nil {
		return fmt.Errorf("encode %d events: %w", len(evs), err)
	}
	m := &nats.Msg{Subject: wire.EventBatchSubject, Data: data}
	if err := publishRetrying(ctx, b.js, m, "batch:"+uuid.NewString(), wire.EventStream, publishRetryFor); err != nil {
		return fmt.Errorf("publish %d events: %w", len(evs), err)
	}
	return nil
}

// publishRetrying publishes m to stream under Nats-Msg-Id id, retrying
// with backoff for up to retryFor (not after the connection closed), so
// that a retry JetStream already has is dropped as a duplicate.
func publishRetrying(ctx context.Context, js jetstream.JetStream, m *nats.Msg, id, stream string, retryFor time.Duration) error {
	deadline := time.Now().Add(retryFor)
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}
	for {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		_, err := js.PublishMsg(pctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(stream))
		cancel()
		if err == nil {
			return nil
		}
		pause := backoff.Next()
		if errors.Is(err, nats.ErrConnectionClosed) || time.Now().Add(pause).After(deadline) {
			return err
		}
		if !retry.Sleep(ctx, pause) {
			return err
		}
	}
}

// send queues ev and waits until its batch is acknowledged, or ctx ends.
func (b *eventBatcher) send(ctx context.Context, ev wire.Event) error {
	q := &queuedEvent{ev: ev, done: make(chan error, 1)}
	select {
	case b.in <- q:
	case <-ctx.Done():
		return fmt.Errorf("publish %s event %s: %w", ev.Type, ev.MsgID(), ctx.Err())
	}
	select {
	case err := <-q.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("publish %s event %s: %w", ev.Type, ev.MsgID(), ctx.Err())
	}
}

// event returns d's event of type typ, from this executor, at now.
func (w *Worker) event(d *delivery, typ domain.EventType) wire.Event {
	e := d.e
	ev := wire.Event{
		Type:         typ,
		ExecutionID:  e.ExecutionID,
		ScheduledFor: e.ScheduledFor,
		Attempt:      e.Attempt,
		Dispatch:     e.Dispatch,
		ExecutorID:   w.cfg.ExecutorID,
		At:           w.now().UTC(),
		Namespace:    e.Namespace,
		JobID:        e.JobID,
	}
	if !e.PublishedAt.IsZero() {
		ev.PublishedAt = &e.PublishedAt
	}
	if typ != domain.EventHeartbeat {
		ev.Traceparent = d.traceparent
	}
	return ev
}

// publish sends ev to the event stream, in a batch with other attempts'
// events, and waits for JetStream's ack (retrying for a while). The
// batch's Nats-Msg-Id makes its retries harmless; a redelivered attempt's
// events are recorded idempotently. The journal notes ev once it is in.
func (w *Worker) publish(ev wire.Event) error {
	return w.publishOnce(w.abandonCtx, ev)
}

// publishOnce is publish bounded by ctx.
func (w *Worker) publishOnce(ctx context.Context, ev wire.Event) error {
	if err := w.events.send(ctx, ev); err != nil {
		return err
	}
	w.journal.record(ev)
	return nil
}
