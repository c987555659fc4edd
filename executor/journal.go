package executor

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// Why a journal. An attempt's events go to the event stream, and only
// then is its message acknowledged. If JetStream loses the event stream
// before the recorders have read those events (the stream is deleted, or
// NATS restarts on an empty store), Postgres never learns that the
// attempt ran, and the scheduler, seeing an execution that never started
// and whose message is gone too, publishes it again: the handler would
// run it twice, both times as attempt 1. So each executor keeps, in
// memory, the events of its recent attempts. When the event stream is new
// it sends them again (their message ids are the same, so the new stream
// drops any it has already), and the recorders write them; and when a
// delivery is one of those attempts again (same execution, dispatch and
// attempt: the scheduler published it again before Postgres knew), the
// executor answers it with the attempt's result instead of running it.
//
// The journal is bounded: JournalSpan of attempts, at most JournalBytes.
// An executor that restarted, or events older than that still unread by
// the recorders when the stream was lost (recorders far behind), are not
// covered: such an execution runs again, as attempt 1.
const (
	// JournalSpan is how long an ended attempt's events are kept.
	JournalSpan = 2 * time.Minute
	// JournalBytes bounds the memory the journal holds (about: events
	// are counted by their error and output, plus a fixed overhead).
	JournalBytes = 32 << 20
	// journalEntryBytes is what an entry costs beyond its strings.
	journalEntryBytes = 400
)

// attemptKey names one attempt: a delivery of one publish of an
// execution. JetStream's own redeliveries are later attempts; only a
// publish JetStream took as new (after losing its stream) repeats a key.
type attemptKey struct {
	execution string
	dispatch  int
	attempt   int
}

func keyOfEvent(ev wire.Event) attemptKey { return attemptKey{ev.ExecutionID, ev.Dispatch, ev.Attempt} }

// journalEntry is one attempt's state and its newest event to re-send:
// its started event while it runs, then its last event (with the start
// folded in).
type journalEntry struct {
	key     attemptKey
	running bool        // the attempt is in progress here
	ev      *wire.Event // nil until an event was published
	ended   time.Time   // when ev became the attempt's last event
	size    int
	elem    *list.Element // in journal.ended, once ended
}

type journal struct {
	mu      sync.Mutex
	entries map[attemptKey]*journalEntry
	// ends holds the entries that ended with the attempt's end (not a
	// deferral), by execution and attempt: a delivery of the same attempt
	// under another dispatch is answered from them too (see begin).
	ends  map[endKey]*journalEntry
	ended *list.List // ended entries, oldest first
	bytes int
	now   func() time.Time
}

// endKey names an attempt whatever dispatch delivered it.
type endKey struct {
	execution string
	attempt   int
}

func newJournal(now func() time.Time) *journal {
	return &journal{entries: map[attemptKey]*journalEntry{}, ends: map[endKey]*journalEntry{}, ended: list.New(), now: now}
}

// begin marks an attempt in progress, unless the journal knows it
// already: then it reports known, and ev is the attempt's last event if
// it has ended here (nil while it runs here).
func (j *journal) begin(k attemptKey) (known bool, ev *wire.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e, ok := j.entries[k]; ok {
		if e.running {
			return true, nil
		}
		return true, e.ev
	}
	// The attempt ended here under another dispatch: tock published it
	// again without knowing it had run (Postgres lost the recording of
	// its end, and the rescue of a waiting execution published it as its
	// next dispatch). Attempt numbers count across the execution's life,
	// so the same number is the same attempt; only a deferral, which did
	// not run it, is not answered so.
	if e, ok := j.ends[endKey{k.execution, k.attempt}]; ok {
		return true, e.ev
	}
	j.entries[k] = &journalEntry{key: k, running: true}
	return false, nil
}

// finish marks the attempt over. An attempt that ended without a last
// event published (its message given back to JetStream, or abandoned) is
// forgotten: it reported nothing, so a new delivery of it must run.
func (j *journal) finish(k attemptKey) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[k]
	if !ok || !e.running {
		return
	}
	e.running = false
	if e.ev == nil || !isLast(e.ev.Type) {
		delete(j.entries, k)
		j.bytes -= e.size
		return
	}
	e.ended = j.now()
	e.elem = j.ended.PushBack(e)
	if e.ev.Type.Ends() {
		j.ends[endKey{k.execution, k.attempt}] = e
	}
	j.trim()
}

// isLast reports whether an event of type typ is a delivery's last: an
// attempt's end, or a deferral.
func isLast(typ domain.EventType) bool {
	return typ.Ends() || typ == domain.EventDeferred
}

// record notes an event JetStream acknowledged. Heartbeats are not kept:
// the start says as much.
func (j *journal) record(ev wire.Event) {
	if ev.Type == domain.EventHeartbeat {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[keyOfEvent(ev)]
	if !ok || !e.running {
		return // not an attempt of this process, or over already
	}
	if isLast(ev.Type) && ev.StartedAt == nil && e.ev != nil && e.ev.Type == domain.EventStarted {
		at := e.ev.At
		ev.StartedAt = &at
	}
	j.bytes -= e.size
	e.ev = &ev
	e.size = journalEntryBytes + len(ev.Error) + len(ev.Output)
	j.bytes += e.size
}

// trim drops ended entries older than JournalSpan and, while the journal
// is over JournalBytes, the oldest ended ones.
func (j *journal) trim() {
	cutoff := j.now().Add(-JournalSpan)
	for f := j.ended.Front(); f != nil; f = j.ended.Front() {
		e := f.Value.(*journalEntry)
		if !e.ended.Before(cutoff) && j.bytes <= JournalBytes {
			return
		}
		j.ended.Remove(f)
		delete(j.entries, e.key)
		if ek := (endKey{e.key.execution, e.key.attempt}); j.ends[ek] == e {
			delete(j.ends, ek)
		}
		j.bytes -= e.size
	}
}

// events returns the events to send again, oldest attempt first: those of
// ended attempts, then the starts of running ones.
func (j *journal) events() []wire.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.trim()
	out := make([]wire.Event, 0, len(j.entries))
	for f := j.ended.Front(); f != nil; f = f.Next() {
		out = append(out, *f.Value.(*journalEntry).ev)
	}
	for _, e := range j.entries {
		if e.running && e.ev != nil {
			out = append(out, *e.ev)
		}
	}
	return out
}

// resendWindow is how many events resend has in flight at once.
const resendWindow = 1000

// resend publishes the journal's events into a new event stream, many at
// a time: the scheduler publishes lost executions again DefaultWipeGrace
// after the new stream appeared, and the events should be in before. It
// reports whether all were acknowledged.
func (w *Worker) resend(ctx context.Context, inc wire.Incarnation) bool {
	evs := w.journal.events()
	w.log.Warn("event stream is new (JetStream lost the old one); sending the events of recent attempts again",
		"stream", inc.Stream, "events", len(evs))
	for sent := 0; sent < len(evs); {
		batch := evs[sent:min(sent+resendWindow, len(evs))]
		futures := make([]jetstream.PubAckFuture, 0, len(batch))
		var err error
		for _, ev := range batch {
			var m *nats.Msg
			if m, err = eventMsg(ev); err != nil {
				break
			}
			var f jetstream.PubAckFuture
			if f, err = w.js.PublishMsgAsync(m, jetstream.WithMsgID(ev.MsgID()), jetstream.WithExpectStream(wire.EventStream)); err != nil {
				break
			}
			futures = append(futures, f)
		}
		timeout := time.NewTimer(publishTimeout)
		for _, f := range futures {
			select {
			case <-f.Ok():
				w.m.journalResent.Inc()
				continue
			case err = <-f.Err():
			case <-timeout.C:
				err = errors.New("no publish ack in time")
			case <-ctx.Done():
				err = ctx.Err()
			}
			break
		}
		timeout.Stop()
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("send events again; trying again", "sent", sent, "of", len(evs), "err", err)
			}
			return false
		}
		sent += len(batch)
	}
	return true
}

// eventMsg is the NATS message of ev, for the event stream.
func eventMsg(ev wire.Event) (*nats.Msg, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	return &nats.Msg{
		Subject: ev.Subject(),
		Data:    data,
		Header:  nats.Header{wire.HeaderExecutionID: []string{ev.ExecutionID}},
	}, nil
}

// answerFromJournal handles a delivery of an attempt this executor knows:
// one it ran (its result is sent again, and the message settled as the
// first time) or one it is running (the copy is acknowledged: the running
// attempt reports for both). It reports false, and marks the attempt
// begun, for any other delivery; the caller then runs it and calls
// w.journal.finish.
func (w *Worker) answerFromJournal(d *delivery) bool {
	known, ev := w.journal.begin(d.attempt())
	if !known {
		return false
	}
	w.m.journalAnswered.WithLabelValues(d.q.name).Inc()
	if ev == nil {
		d.log().Info("delivery of an attempt running here already (JetStream lost its stream); acknowledging the copy")
		if err := d.msg.Ack(); err != nil {
			d.log().Warn("ack copy of a running attempt", "err", err)
		}
		return true
	}
	d.log().Info("delivery of an attempt run here already (JetStream lost its stream); sending its result again", "event", ev.Type)
	if err := w.publish(*ev); err != nil {
		d.log().Error("cannot send the attempt's result again; giving the execution back", "err", err)
		_ = d.msg.NakWithDelay(unreportedRetryDelay)
		return true
	}
	if err := settle(d.msg, *ev); err != nil {
		d.log().Warn("settle execution message", "err", err)
	}
	return true
}
