// Package waits says why an execution waits, in words, from what tock
// knows: its own state and times, the handler's circuit breakers and
// load as the executors report them (wire.BreakerBucket), the queue's
// consumers in JetStream, and when an executor last served the handler
// (store.ListHandlersSeen). It guesses nothing: where tock cannot tell,
// it says what it knows ("published, waiting for an executor to take
// it").
//
// Explain is pure; Cache gathers and keeps, for a second, the snapshot of
// the handlers and queues that Explain reads, so that a page listing many
// executions costs one read of each source.
package waits

import (
	"fmt"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// Kinds of waiting.
const (
	// Scheduled: not due yet (its time, or its time plus the job's jitter).
	Scheduled = "scheduled"
	// RetryBackoff: an attempt failed; the next one is due at Until.
	RetryBackoff = "retry_backoff"
	// Deferred: an executor handed the execution back unrun; it is
	// published again at Until.
	Deferred = "deferred"
	// Buffered: the job's overlap policy (buffer_one) keeps it until the
	// job's earlier executions end.
	Buffered = "buffered"
	// Dependency: waiting for its upstream jobs (waiting_for says which).
	Dependency = "dependency"
	// Concurrency: every slot of its concurrency key is held (Key says
	// which).
	Concurrency = "concurrency"
	// RateLimit: its rate-limit key's window has no room before Until.
	RateLimit = "rate_limit"
	// BreakerOpen: the handler's breaker is open on every executor that
	// serves it; Since when, Until when it half-opens (next probe).
	BreakerOpen = "breaker_open"
	// NoExecutor: no executor serves the handler's queue.
	NoExecutor = "no_executor"
	// AtLimit: every executor of the handler runs as many of its attempts
	// as its concurrency limit allows.
	AtLimit = "at_limit"
	// Publishing: due, not yet published to its queue.
	Publishing = "publishing"
	// InQueue: due and published, waiting for an executor to take it.
	InQueue = "in_queue"
)

// Reason is why an execution waits.
type Reason struct {
	Kind string
	// Message says it in words, with the times in UTC.
	Message string
	// Since and Until, when known: since when it waits for this, and when
	// the wait is due to end.
	Since, Until *time.Time
	// Handler is the handler's key when the reason is about the handler.
	Handler string
	// Key is the concurrency key when the reason is Concurrency.
	Key string
}

// Handler is what tock knows of one handler key and its queue.
type Handler struct {
	Key, Queue string
	// Known: the rest was read (NATS answered); when not, only the
	// execution's own state and times explain it.
	Known bool
	// Executors are the live executors' reports on this key.
	Executors []wire.BreakerState
	// QueueServed: some live executor serves the queue (a report on any
	// key of it, or a pull request waiting on its consumers).
	QueueServed bool
	// ConsumerExists: some executor made the queue's consumers once.
	ConsumerExists bool
	// Ahead: messages of the queue not yet taken, over its priorities.
	Ahead uint64
	// LastSeen: when an executor last reported serving the key (nil:
	// never).
	LastSeen *time.Time
}

// Snapshot is what tock knows of every handler and queue at one time.
type Snapshot struct {
	At        time.Time
	byKey     map[string][]wire.BreakerState
	byQueue   map[string]bool // queue → a live executor reports on it
	consumers map[string]queueLoad
	seen      map[string]time.Time
}

type queueLoad struct {
	ahead   uint64
	waiting int
}

// NewSnapshot builds a Snapshot from the sources' answers.
func NewSnapshot(at time.Time, states []wire.BreakerState, consumers []wire.QueueConsumer, seen []model.HandlerSeen) *Snapshot {
	s := &Snapshot{At: at, byKey: map[string][]wire.BreakerState{}, byQueue: map[string]bool{},
		consumers: map[string]queueLoad{}, seen: map[string]time.Time{}}
	for _, st := range states {
		s.byKey[st.Key] = append(s.byKey[st.Key], st)
		s.byQueue[st.Queue] = true
	}
	for _, c := range consumers {
		l := s.consumers[c.Queue]
		l.ahead += c.Pending
		l.waiting += c.Waiting
		s.consumers[c.Queue] = l
	}
	for _, h := range seen {
		s.seen[h.Handler] = h.LastSeen
	}
	return s
}

// Handler is what the snapshot knows of handler h.
func (s *Snapshot) Handler(h domain.Handler) Handler {
	out := Handler{Key: h.Key(), Queue: h.Queue()}
	if s == nil {
		return out
	}
	out.Known = true
	out.Executors = s.byKey[out.Key]
	load, ok := s.consumers[out.Queue]
	out.ConsumerExists, out.Ahead = ok, load.ahead
	out.QueueServed = s.byQueue[out.Queue] || load.waiting > 0
	if t, ok := s.seen[out.Key]; ok {
		out.LastSeen = &t
	}
	return out
}

// Explain says why e waits at now, h being what is known of its handler;
// nil when it does not wait (running, or ended).
func Explain(e *model.Execution, h Handler, now time.Time) *Reason {
	switch e.State {
	case domain.ExecWaiting:
		if e.SlotKey != "" {
			return &Reason{Kind: Concurrency, Key: e.SlotKey,
				Message: "waiting for a slot of concurrency key " + e.SlotKey + ": every slot its limit allows is held"}
		}
		return &Reason{Kind: Dependency, Message: "waiting for its upstream jobs"}
	case domain.ExecQueued, domain.ExecFailed:
	default:
		return nil
	}
	if e.Buffered {
		return &Reason{Kind: Buffered, Message: "kept until the job's earlier executions end (overlap policy buffer_one)"}
	}
	due := e.DueAt()
	if e.NextAttemptAt == nil && e.JitteredDue != nil {
		due = *e.JitteredDue
	}
	if due.After(now) {
		switch {
		case e.State == domain.ExecFailed:
			return &Reason{Kind: RetryBackoff, Until: &due,
				Message: fmt.Sprintf("attempt %d failed; the next is due at %s (the job's retry backoff)", e.Attempts, stamp(due))}
		case e.RateKey != "" && e.Dispatches == 0 && e.NextAttemptAt != nil && e.NextAttemptAt.After(e.ScheduledFor):
			return &Reason{Kind: RateLimit, Until: &due, Key: e.RateKey,
				Message: fmt.Sprintf("held back by rate limit key %s: released at %s", e.RateKey, stamp(due))}
		case e.NextAttemptAt != nil && e.Dispatches > 0:
			// Handed back by an executor: say why if the handler says.
			if r := handlerReason(h, now); r != nil && (r.Kind == BreakerOpen || r.Kind == AtLimit) {
				return r
			}
			return &Reason{Kind: Deferred, Until: &due,
				Message: fmt.Sprintf("handed back unrun by an executor; published again at %s", stamp(due))}
		}
		return &Reason{Kind: Scheduled, Until: &due, Message: fmt.Sprintf("due at %s", stamp(due))}
	}
	if r := handlerReason(h, now); r != nil {
		return r
	}
	if e.DispatchedAt == nil {
		return &Reason{Kind: Publishing, Since: &due, Message: fmt.Sprintf("due since %s, not yet published to its queue", stamp(due))}
	}
	msg := fmt.Sprintf("due since %s, waiting for an executor to take it", stamp(due))
	if h.Ahead > 0 {
		msg += fmt.Sprintf(" (%d messages of queue %s not yet taken)", h.Ahead, h.Queue)
	}
	return &Reason{Kind: InQueue, Since: &due, Message: msg, Handler: h.Key}
}

// handlerReason is why the handler does not take work, if it does not.
func handlerReason(h Handler, now time.Time) *Reason {
	if !h.Known {
		return nil
	}
	if !h.ConsumerExists {
		return &Reason{Kind: NoExecutor, Handler: h.Key,
			Message: fmt.Sprintf("no executor has ever served the queue %s", h.Queue)}
	}
	if len(h.Executors) > 0 {
		open, atLimit := 0, 0
		var since, probe *time.Time
		reason := ""
		for _, x := range h.Executors {
			if x.Breaker == wire.BreakerOpen || x.Breaker == wire.BreakerHalfOpen {
				open++
				if since == nil || x.Since.Before(*since) {
					t := x.Since
					since, reason = &t, x.Reason
				}
				if x.ProbeAt != nil && (probe == nil || x.ProbeAt.Before(*probe)) {
					probe = x.ProbeAt
				}
			}
			if x.Limit > 0 && x.InFlight >= x.Limit {
				atLimit++
			}
		}
		if open == len(h.Executors) {
			msg := fmt.Sprintf("the circuit breaker of %s is open on every executor serving it (%d) since %s", h.Key, open, stamp(*since))
			if reason != "" {
				msg += " (" + reason + ")"
			}
			if probe != nil {
				msg += fmt.Sprintf("; next probe at %s", stamp(*probe))
			} else {
				msg += "; probing now"
			}
			return &Reason{Kind: BreakerOpen, Handler: h.Key, Since: since, Until: probe, Message: msg}
		}
		if atLimit == len(h.Executors) {
			return &Reason{Kind: AtLimit, Handler: h.Key,
				Message: fmt.Sprintf("every executor of %s (%d) runs as many of its attempts as its concurrency limit allows", h.Key, atLimit)}
		}
		return nil
	}
	if !h.QueueServed {
		msg := fmt.Sprintf("no executor serves %s now", h.Key)
		if h.LastSeen != nil {
			msg = fmt.Sprintf("no executor serves %s: none seen for %s (last at %s)", h.Key, ago(now.Sub(*h.LastSeen)), stamp(*h.LastSeen))
		} else if h.Key != h.Queue {
			msg = fmt.Sprintf("no executor serves the queue %s now", h.Queue)
		}
		return &Reason{Kind: NoExecutor, Handler: h.Key, Since: h.LastSeen, Message: msg}
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// ago is a duration in words, to the minute past two minutes.
func ago(d time.Duration) string {
	if d < 2*time.Minute {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes()))
}
