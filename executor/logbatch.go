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

	"github.com/tock-sched/tock/wire"
)

// Log chunks of all of a Worker's attempts share messages: a chunk waits
// up to logBatchLinger for others, and a message holds up to
// wire.MaxLogMessageBytes of them, so that many attempts each logging a
// line cost the log stream and its recorder one message, not one each.
const (
	logBatchLinger = 20 * time.Millisecond
	// logPublishers is 1: messages go out in order, so an attempt's
	// chunks reach the stream in sequence order (docs/wire-protocol.md).
	logPublishers = 1
	// logRetryFor bounds the retries of one message's publish; after it
	// its chunks are a gap in their logs.
	logRetryFor = 10 * time.Second
)

type logBatcher struct {
	js  jetstream.JetStream
	in  chan queuedChunk
	sem chan struct{}
	wg  sync.WaitGroup
}

type queuedChunk struct {
	c    *wire.LogChunk
	done func(error)
}

func newLogBatcher(js jetstream.JetStream) *logBatcher {
	return &logBatcher{js: js, in: make(chan queuedChunk, 1024), sem: make(chan struct{}, logPublishers)}
}

// send queues c; done is called once its message is acknowledged, or
// with the error that lost it. It does not wait: a caller holding a lock
// may call it. When the batcher is not running, c is lost at once.
func (b *logBatcher) send(c *wire.LogChunk, done func(error)) {
	select {
	case b.in <- queuedChunk{c, done}:
	default:
		// The queue is full: the batcher is far behind (NATS is slow).
		// done takes the caller's lock: not here.
		go done(errLogQueueFull)
	}
}

var errLogQueueFull = errors.New("the executor's log queue is full")

// run gathers and publishes messages until ctx ends; chunks queued after
// that fail.
func (b *logBatcher) run(ctx context.Context) {
	defer b.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var batch []queuedChunk
		size := 0
		select {
		case q := <-b.in:
			batch, size = append(batch, q), q.c.Bytes()
		case <-ctx.Done():
			b.failQueued(ctx.Err())
			return
		}
		timer.Reset(logBatchLinger)
	gather:
		for size < wire.MaxLogMessageBytes/2 {
			select {
			case q := <-b.in:
				batch, size = append(batch, q), size+q.c.Bytes()
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
				q.done(ctx.Err())
			}
			b.failQueued(ctx.Err())
			return
		}
		b.wg.Go(func() {
			defer func() { <-b.sem }()
			b.publish(ctx, batch)
		})
	}
}

// failQueued ends what waits in the queue with err.
func (b *logBatcher) failQueued(err error) {
	for {
		select {
		case q := <-b.in:
			q.done(err)
		default:
			return
		}
	}
}

// publish sends batch in messages of at most wire.MaxLogMessageBytes,
// each retried (under one Nats-Msg-Id) for up to logRetryFor.
func (b *logBatcher) publish(ctx context.Context, batch []queuedChunk) {
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && (n == 0 || size+batch[n].c.Bytes() < wire.MaxLogMessageBytes*3/4) {
			size += batch[n].c.Bytes()
			n++
		}
		part := batch[:n]
		batch = batch[n:]
		err := b.publishOne(ctx, part)
		for _, q := range part {
			q.done(err)
		}
	}
}

func (b *logBatcher) publishOne(ctx context.Context, part []queuedChunk) error {
	chunks := make([]*wire.LogChunk, len(part))
	for i, q := range part {
		chunks[i] = q.c
	}
	data, err := json.Marshal(chunks)
	if err != nil {
		return fmt.Errorf("encode %d log chunks: %w", len(chunks), err)
	}
	m := &nats.Msg{Subject: wire.LogSubject, Data: data}
	if err := publishRetrying(ctx, b.js, m, "logs:"+uuid.NewString(), wire.LogStream, logRetryFor); err != nil {
		return fmt.Errorf("publish %d log chunks: %w", len(chunks), err)
	}
	return nil
}
