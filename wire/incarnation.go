package wire

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Incarnation is one life of a JetStream stream. A stream deleted and
// created again, by an operator or because NATS restarted on an empty
// store, keeps its name but is a new incarnation: whatever the old one
// held (messages, consumers, the duplicate window) is gone.
//
// The stream's creation time names the incarnation. Measured with
// nats-server 2.15: it is kept to the nanosecond across server restarts
// and purges, and changes when the stream is deleted and created again or
// the store is lost. A publish ack's sequence going backwards is no
// substitute: it proves a new incarnation, but only until the new stream
// has taken as many messages as the old one had, and acks of concurrent
// publishes arrive out of order anyway.
type Incarnation struct {
	Stream string
	// Created is when the server created the stream, by its clock.
	Created time.Time
	// Age is how long before the read the stream was created, measured
	// by the server's clock alone, so that a caller can place Created on
	// its own clock (now - Age) whatever the offset between the two.
	Age time.Duration
}

// CurrentIncarnation reads stream's incarnation. It fails with an error
// wrapping jetstream.ErrStreamNotFound if the stream does not exist.
func CurrentIncarnation(ctx context.Context, js jetstream.JetStream, stream string) (Incarnation, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return Incarnation{}, fmt.Errorf("read stream %s: %w", stream, err)
	}
	info := s.CachedInfo()
	inc := Incarnation{Stream: stream, Created: info.Created}
	// TimeStamp is the server's clock when it answered; servers before
	// 2.10 do not send it, and then the local clock stands in.
	now := info.TimeStamp
	if now.IsZero() {
		now = time.Now()
	}
	inc.Age = max(now.Sub(info.Created), 0)
	return inc, nil
}

// IncarnationWatch tells when a stream begins a new incarnation. It is
// safe for concurrent use.
type IncarnationWatch struct {
	js     jetstream.JetStream
	stream string

	mu    sync.Mutex
	known time.Time // Created of the incarnation Check saw last
}

// NewIncarnationWatch watches stream through js.
func NewIncarnationWatch(js jetstream.JetStream, stream string) *IncarnationWatch {
	return &IncarnationWatch{js: js, stream: stream}
}

// Check reads the stream's current incarnation and reports whether it is
// a new one: another than the one the previous successful Check saw. The
// first successful Check only learns the incarnation and reports false.
func (w *IncarnationWatch) Check(ctx context.Context) (inc Incarnation, isNew bool, err error) {
	inc, err = CurrentIncarnation(ctx, w.js, w.stream)
	if err != nil {
		return inc, false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	isNew = !w.known.IsZero() && !w.known.Equal(inc.Created)
	w.known = inc.Created
	return inc, isNew, nil
}
