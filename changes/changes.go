// Package changes is tock's change feed: which executions and jobs
// changed, and into what state, published once the change is committed
// to Postgres, for live views (the API's GET /v1/changes, which the web
// UI and `tockctl executions watch` read).
//
// The feed is a notification, not a record: Postgres holds the truth. A
// change can go missing (NATS unreachable when it was published), so a
// view that must be exact reloads from the API's lists when told to
// resync: after a reconnect past the feed's retention, or when it falls
// behind. Changes live in the JetStream stream wire.ChangeStream, a
// message per namespace and kind of change holding a batch; the stream's
// sequence number of that message is the feed's position, which a reader
// resumes from.
package changes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/wire"
)

// Kind is what changed.
type Kind string

// The kinds of change.
const (
	// KindExecution: an execution's state changed (it was queued for an
	// executor, started running, finished, failed and waits to retry,
	// died, was cancelled or re-driven, or was created by a manual run).
	// One execution's changes come from several processes and can arrive
	// out of order: At orders them.
	KindExecution Kind = "execution"
	// KindJob: a job was created, changed, paused, resumed or deleted.
	// A change of many jobs at once (a bulk pause) is one change with no
	// JobID: reload the namespace's jobs.
	KindJob Kind = "job"
)

// StateDeleted is the State of a job change that deleted the job.
const StateDeleted = "deleted"

// Change is one change to one execution or job.
type Change struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace"`
	// JobID is the job's (of an execution change, its execution's job).
	// Empty on a change of many jobs at once.
	JobID       string `json:"job_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// State is the state after the change: an execution's (queued,
	// running, succeeded, failed, dead, cancelled) or a job's (active,
	// paused, completed, or StateDeleted).
	State string `json:"state,omitempty"`
	// Attempt is an execution change's attempt number, from 1.
	Attempt int       `json:"attempt,omitempty"`
	At      time.Time `json:"at"`
}

// Subject is the subject of a batch of changes of kind in namespace ns.
func Subject(ns string, kind Kind) string {
	return wire.ChangeSubjectPrefix + subjectToken(ns) + "." + string(kind)
}

// NamespaceFilter is the subject filter of every change in namespace ns.
func NamespaceFilter(ns string) string {
	return wire.ChangeSubjectPrefix + subjectToken(ns) + ".>"
}

// subjectToken writes a namespace as one subject token: namespaces may
// hold dots, which NATS reads as separators, and never '~'.
func subjectToken(ns string) string { return strings.ReplaceAll(ns, ".", "~") }

// Publisher publishes changes to the feed without waiting for NATS: a
// change is a notification, and the work it reports is committed already.
// A nil *Publisher publishes nothing.
type Publisher struct {
	nc  *nats.Conn
	log *slog.Logger
}

// NewPublisher publishes on nc.
func NewPublisher(nc *nats.Conn, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{nc: nc, log: log}
}

// Publish sends changes, one message per namespace and kind. It does not
// block on NATS (a core publish into the stream's subjects, buffered by
// the client while it reconnects); a change it cannot send is logged and
// dropped.
func (p *Publisher) Publish(changes ...Change) {
	if p == nil || len(changes) == 0 {
		return
	}
	type key struct {
		ns   string
		kind Kind
	}
	groups := map[key][]Change{}
	var order []key
	for _, c := range changes {
		k := key{c.Namespace, c.Kind}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range order {
		body, err := json.Marshal(groups[k])
		if err == nil {
			err = p.nc.Publish(Subject(k.ns, k.kind), body)
		}
		if err != nil {
			p.log.Warn("publish changes; dropped (views resync)", "namespace", k.ns, "kind", k.kind, "changes", len(groups[k]), "err", err)
		}
	}
}

// Flush waits until NATS has what Publish sent (for tests and
// benchmarks; Publish itself never waits).
func (p *Publisher) Flush() error {
	if p == nil {
		return nil
	}
	return p.nc.Flush()
}

// Batch is one message of the feed: changes of one namespace and kind,
// at position Seq.
type Batch struct {
	Seq     uint64
	Changes []Change
}

// ErrExpired is returned by Watch when the position to resume after is
// older than the feed keeps: the reader must resync.
var ErrExpired = errors.New("changes: the feed no longer holds that position; resync")

// Watch is a reader of the feed.
type Watch struct {
	cc     jetstream.ConsumeContext
	ch     chan Batch
	behind chan struct{}
}

// newWatch reads the feed's batches of the namespaces (none: every
// namespace) after position after (0: from now on) into a buffer of
// buffer batches, until Stop; ctx bounds only the start. A reader that lets the buffer
// fill is behind: Behind is closed and no batch is added after it (the
// reader drains what is buffered, then resyncs). A position the feed no
// longer holds is ErrExpired.
func newWatch(ctx context.Context, js jetstream.JetStream, namespaces []string, after uint64, buffer int) (*Watch, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy}
	for _, ns := range namespaces {
		cfg.FilterSubjects = append(cfg.FilterSubjects, NamespaceFilter(ns))
	}
	s, err := js.Stream(ctx, wire.ChangeStream)
	if err != nil {
		return nil, fmt.Errorf("changes: read the feed's state: %w", err)
	}
	st := s.CachedInfo().State
	// "From now" is from the position after the last one: the consumer
	// is made on the server after this returns, and a change published
	// meanwhile must not be missed.
	cfg.OptStartSeq = st.LastSeq + 1
	if after > 0 {
		// A position past the end is one from before the stream was
		// wiped and made again: resync too.
		if after+1 < st.FirstSeq || after > st.LastSeq {
			return nil, ErrExpired
		}
		cfg.OptStartSeq = after + 1
	}
	cons, err := js.OrderedConsumer(ctx, wire.ChangeStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("changes: read the feed: %w", err)
	}
	w := &Watch{ch: make(chan Batch, max(buffer, 1)), behind: make(chan struct{})}
	full := false
	w.cc, err = cons.Consume(func(msg jetstream.Msg) {
		if full {
			return
		}
		md, err := msg.Metadata()
		if err != nil {
			return
		}
		var b Batch
		if json.Unmarshal(msg.Data(), &b.Changes) != nil {
			return
		}
		b.Seq = md.Sequence.Stream
		select {
		case w.ch <- b:
		default:
			full = true
			close(w.behind)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("changes: read the feed: %w", err)
	}
	return w, nil
}

// Batches delivers the batches in feed order.
func (w *Watch) Batches() <-chan Batch { return w.ch }

// Behind is closed once the reader has fallen a whole buffer behind.
func (w *Watch) Behind() <-chan struct{} { return w.behind }

// Stop stops reading.
func (w *Watch) Stop() { w.cc.Stop() }

// Feed is the change feed over one NATS connection: its Publisher, and
// Watch to read it. A nil *Feed publishes nothing.
type Feed struct {
	// Replicas is the replica count Watch creates the feed's stream with
	// when it is missing (an API-only node started first, or NATS was
	// wiped); 0 is 1.
	Replicas int

	pub *Publisher
	js  jetstream.JetStream
}

// NewFeed is the feed on js (and its connection).
func NewFeed(js jetstream.JetStream, log *slog.Logger) *Feed {
	return &Feed{pub: NewPublisher(js.Conn(), log), js: js}
}

// Publish is Publisher.Publish; on a nil Feed it does nothing.
func (f *Feed) Publish(changes ...Change) {
	if f != nil {
		f.pub.Publish(changes...)
	}
}

// Publisher is the feed's publisher; nil for a nil Feed.
func (f *Feed) Publisher() *Publisher {
	if f == nil {
		return nil
	}
	return f.pub
}

// Watch is newWatch on the feed's JetStream. It creates the feed's stream
// when it is missing (wire.EnsureChangeStream).
func (f *Feed) Watch(ctx context.Context, namespaces []string, after uint64, buffer int) (*Watch, error) {
	// newWatch reads the stream's state before it makes a consumer, so a
	// missing stream is found before any consumer is made.
	w, err := newWatch(ctx, f.js, namespaces, after, buffer)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if err := wire.EnsureChangeStream(ctx, f.js, f.Replicas); err != nil {
			return nil, fmt.Errorf("changes: create the feed: %w", err)
		}
		w, err = newWatch(ctx, f.js, namespaces, after, buffer)
	}
	return w, err
}
