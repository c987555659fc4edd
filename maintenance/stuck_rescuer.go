package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// StuckRescuer defaults.
const (
	// DefaultWaitAfter is how long a published execution may wait
	// unstarted before the rescuer asks JetStream whether its message is
	// still there.
	DefaultWaitAfter = time.Minute
	// DefaultSilentAfter is how long a running attempt may give no sign
	// of life (its executor heartbeats every 10 s by default) before the
	// rescuer asks JetStream whether its message is still held.
	DefaultSilentAfter = time.Minute
	// DefaultStuckInterval is how often the owned buckets are checked, at
	// most (a quarter of the shorter bound if that is less).
	DefaultStuckInterval = 15 * time.Second
	// DefaultStuckLimit bounds the candidates read per pass, oldest first.
	DefaultStuckLimit = 1000
	// DefaultMaxWalk bounds the messages read from each stream per pass.
	DefaultMaxWalk = 20000
)

// StuckStore is what StuckRescuer needs from Postgres; *store.Store is one.
type StuckStore interface {
	ListStuckExecutions(ctx context.Context, buckets []int, publishedBefore, silentBefore time.Time, limit int) ([]model.StuckExecution, error)
	RequeueWaitingExecutions(ctx context.Context, execs []*model.Execution, note string) (int, error)
	RequeueSilentExecutions(ctx context.Context, ids []uuid.UUID, olderThan time.Time) (int, error)
}

// StuckRescuerConfig configures a StuckRescuer. JS, Store and Buckets
// are required.
type StuckRescuerConfig struct {
	JS    jetstream.JetStream
	Store StuckStore
	// Buckets are the buckets this node fires in now; each node rescues
	// its own.
	Buckets func() []int
	// Now is the cluster clock; default time.Now.
	Now func() time.Time
	// WaitAfter, SilentAfter, Interval, Limit and MaxWalk: see the
	// Default* constants (zero takes the default).
	WaitAfter   time.Duration
	SilentAfter time.Duration
	Interval    time.Duration
	Limit       int
	MaxWalk     int
	Logger      *slog.Logger
	// Registerer is where tock_rescued_total is registered; nil
	// registers it nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero set to their
// defaults.
func (c StuckRescuerConfig) WithDefaults() StuckRescuerConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.WaitAfter == 0 {
		c.WaitAfter = DefaultWaitAfter
	}
	if c.SilentAfter == 0 {
		c.SilentAfter = DefaultSilentAfter
	}
	if c.Interval == 0 {
		// Four looks per bound, so a rescue comes at most a quarter late.
		c.Interval = max(min(DefaultStuckInterval, min(c.WaitAfter, c.SilentAfter)/4), 100*time.Millisecond)
	}
	if c.Limit == 0 {
		c.Limit = DefaultStuckLimit
	}
	if c.MaxWalk == 0 {
		c.MaxWalk = DefaultMaxWalk
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// StuckRescuer heals executions that nothing else would move on: a
// published execution that waits for an executor although its message is
// no longer in JetStream, and a running one whose attempt ended without
// its end being recorded. Both happen when Postgres loses its last
// seconds (an asynchronous standby promoted, a restore): the recording of
// an attempt's start or end is gone, and its message, acknowledged, is
// gone too. They also cover a message NATS itself lost.
//
// A candidate (store.ListStuckExecutions: waiting unstarted for
// WaitAfter since it was published, or running and silent for
// SilentAfter) is rescued only when JetStream shows it is not merely
// slow:
//
//  1. its message is not in the exec stream: every message of its
//     subject stored up to its publish (plus a margin for clocks) is read,
//     and none has its Nats-Msg-Id (its own, or its batch's). A message
//     waiting for an executor, held by one while it runs (in-progress
//     acks), or waiting to be redelivered after its executor died, is
//     there; so an execution whose handler has no executor waits as long
//     as it must, and is never rescued;
//  2. then no event about it is in the event stream: the recorder has
//     written everything executors published about it. An executor
//     publishes an attempt's last event before it acknowledges the
//     message (docs/wire-protocol.md), so once the message is gone the
//     event is either here or recorded.
//
// A waiting execution is then published again as its next dispatch (the
// same attempt, since none was recorded), a running one taken for lost
// (its attempt marked lost, the execution published again as the next
// attempt); both conditionally, so that a row that moved on meanwhile is
// left alone. Each rescue leaves a note on the execution and counts in
// tock_rescued_total. If the recording that Postgres lost was the
// attempt's end, the handler runs again: at-least-once, and the execution
// id is the handler's idempotency key.
type StuckRescuer struct {
	cfg     StuckRescuerConfig
	log     *slog.Logger
	rescued *prometheus.CounterVec
	last    prometheus.Gauge
}

// NewStuckRescuer checks cfg (with its defaults) and returns a
// StuckRescuer.
func NewStuckRescuer(cfg StuckRescuerConfig) (*StuckRescuer, error) {
	cfg = cfg.WithDefaults()
	if cfg.JS == nil || cfg.Store == nil || cfg.Buckets == nil {
		return nil, errors.New("maintenance: StuckRescuerConfig.JS, Store and Buckets are required")
	}
	if cfg.WaitAfter < 0 || cfg.SilentAfter < 0 || cfg.Interval < 0 || cfg.Limit < 0 || cfg.MaxWalk < 0 {
		return nil, errors.New("maintenance: StuckRescuerConfig's durations and bounds must not be negative")
	}
	var err error
	r := &StuckRescuer{cfg: cfg, log: cfg.Logger,
		rescued: promreg.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_rescued_total",
			Help: "Executions the rescuer moved on: kind=waiting (published, unstarted, its message gone: published again), kind=lost (running, silent, its message gone: taken for lost).",
		}, []string{"kind"}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("stuck"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register rescue metrics: %w", err)
	}
	r.rescued.WithLabelValues("waiting")
	r.rescued.WithLabelValues("lost")
	return r, nil
}

// Run checks every Interval until ctx ends.
func (r *StuckRescuer) Run(ctx context.Context) error {
	return every(ctx, r.cfg.Interval, r.log, "rescue stuck executions", r.RunOnce)
}

// RunOnce rescues what is stuck in the owned buckets now.
func (r *StuckRescuer) RunOnce(ctx context.Context) error {
	buckets := r.cfg.Buckets()
	now := r.cfg.Now()
	if len(buckets) == 0 {
		r.last.SetToCurrentTime()
		return nil
	}
	cands, err := r.cfg.Store.ListStuckExecutions(ctx, buckets, now.Add(-r.cfg.WaitAfter), now.Add(-r.cfg.SilentAfter), r.cfg.Limit)
	if err != nil || len(cands) == 0 {
		if err == nil {
			r.last.SetToCurrentTime()
		}
		return err
	}
	gone, err := r.gone(ctx, cands)
	if err != nil {
		return err
	}
	if len(gone) == 0 {
		r.last.SetToCurrentTime()
		return nil
	}
	pending, err := r.pendingEvents(ctx)
	if err != nil {
		return err
	}
	var (
		waiting []*model.Execution
		lost    []uuid.UUID
		oldest  time.Time
	)
	for _, c := range gone {
		if pending[c.ID.String()] {
			continue
		}
		if c.State == domain.ExecRunning {
			lost = append(lost, c.ID)
			continue
		}
		waiting = append(waiting, c.Execution)
		if oldest.IsZero() || c.Since.Before(oldest) {
			oldest = c.Since
		}
	}
	if len(waiting) > 0 {
		n, err := r.cfg.Store.RequeueWaitingExecutions(ctx, waiting, rescueNote(now.Sub(oldest)))
		if err != nil {
			return err
		}
		if n > 0 {
			r.rescued.WithLabelValues("waiting").Add(float64(n))
			r.log.Warn("published again executions that waited unstarted with their message gone from JetStream",
				"count", n, "first", waiting[0].ID, "waited", now.Sub(oldest).Round(time.Second))
		}
	}
	if len(lost) > 0 {
		n, err := r.cfg.Store.RequeueSilentExecutions(ctx, lost, now.Add(-r.cfg.SilentAfter))
		if err != nil {
			return err
		}
		if n > 0 {
			r.rescued.WithLabelValues("lost").Add(float64(n))
			r.log.Warn("took for lost running executions that went silent with their message gone from JetStream",
				"count", n, "first", lost[0])
		}
	}
	r.last.SetToCurrentTime()
	return nil
}

// gone returns the candidates whose message the exec stream no longer
// holds. A subject whose messages up to its candidates' publish could not
// all be read (more than MaxWalk) is left for a later pass.
func (r *StuckRescuer) gone(ctx context.Context, cands []model.StuckExecution) ([]model.StuckExecution, error) {
	subjects := map[string][]int{}
	ids := make([][2]string, len(cands)) // message ids: its own, its batch's
	for i := range cands {
		e := cands[i].Execution
		s := wire.ExecSubject(e.Handler.Queue(), e.Priority)
		ids[i][0] = wire.ExecMsgID(e.ID.String(), e.Dispatches)
		if cands[i].Batched() {
			ids[i][1] = wire.BatchMsgID(cands[i].Batch.String(), s)
		}
		subjects[s] = append(subjects[s], i)
	}
	stream, err := r.cfg.JS.Stream(ctx, wire.ExecStream)
	if err != nil {
		return nil, fmt.Errorf("exec stream: %w", err)
	}
	var out []model.StuckExecution
	for s, idx := range subjects {
		// Every message of the subject is read, from the oldest, until
		// each candidate's is found: a message is stored when the
		// dispatcher publishes it, which may be long after the time the
		// store has for it (a dispatcher behind under overload), so no
		// time bounds the search; candidates are the oldest executions
		// waiting, whose messages come first.
		want := map[string]bool{}
		for _, i := range idx {
			for _, id := range ids[i] {
				if id != "" {
					want[id] = true
				}
			}
		}
		present := map[string]bool{}
		complete, err := r.walk(ctx, stream, s, func(m *jetstream.RawStreamMsg) bool {
			if id := m.Header.Get(nats.MsgIdHdr); want[id] {
				present[id] = true
				delete(want, id)
			}
			return len(want) == 0
		})
		if err != nil {
			return nil, err
		}
		if !complete {
			r.log.Warn("rescue: too many messages to read in the exec stream; left for a later pass",
				"subject", s, "max_walk", r.cfg.MaxWalk)
			continue
		}
		for _, i := range idx {
			if !present[ids[i][0]] && (ids[i][1] == "" || !present[ids[i][1]]) {
				out = append(out, cands[i])
			}
		}
	}
	return out, nil
}

// pendingEvents returns the executions that an event still in the event
// stream (published, not yet written by the recorder) is about.
func (r *StuckRescuer) pendingEvents(ctx context.Context) (map[string]bool, error) {
	stream, err := r.cfg.JS.Stream(ctx, wire.EventStream)
	if err != nil {
		return nil, fmt.Errorf("event stream: %w", err)
	}
	pending := map[string]bool{}
	var bad error
	complete, err := r.walk(ctx, stream, wire.EventSubjectPrefix+">", func(m *jetstream.RawStreamMsg) bool {
		var (
			evs []eventExecution
			err error
		)
		if m.Subject == wire.EventBatchSubject {
			err = json.Unmarshal(m.Data, &evs)
		} else {
			evs = make([]eventExecution, 1)
			err = json.Unmarshal(m.Data, &evs[0])
		}
		if err != nil && bad == nil {
			bad = err
		}
		for _, e := range evs {
			pending[e.ExecutionID] = true
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if bad != nil {
		r.log.Debug("rescue: an event in the stream does not decode", "err", bad)
	}
	if !complete {
		return nil, fmt.Errorf("more than %d events wait for the recorder: rescue left for a later pass", r.cfg.MaxWalk)
	}
	return pending, nil
}

// eventExecution is what pendingEvents reads of an event.
type eventExecution struct {
	ExecutionID string `json:"execution_id"`
}

// walk reads stream's messages on subject (a filter) in order, calling f
// with each until f returns true. It reports whether it read all it had to
// (false: more than MaxWalk).
func (r *StuckRescuer) walk(ctx context.Context, stream jetstream.Stream, subject string, f func(*jetstream.RawStreamMsg) bool) (bool, error) {
	seq := uint64(1)
	for n := 0; ; n++ {
		if n >= r.cfg.MaxWalk {
			return false, nil
		}
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s from stream %s at %d: %w", subject, stream.CachedInfo().Config.Name, seq, err)
		}
		if f(m) {
			return true, nil
		}
		seq = m.Sequence + 1
	}
}

// rescueNote is the note of a waiting execution published again after
// waiting for wait ("{dispatch}" becomes the new dispatch's number).
func rescueNote(wait time.Duration) string {
	return "published again as dispatch {dispatch}: it was published " + wait.Round(time.Second).String() +
		" before and no executor had started it, and its message was no longer in JetStream " +
		"(a lost message, or a start or end Postgres lost in a failover)"
}
