package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/wire"
)

// Backlog watch defaults.
const (
	// DefaultBacklogInterval is how often the exec stream's consumers are
	// read.
	DefaultBacklogInterval = 250 * time.Millisecond
	// DefaultRateWindow is how far back a queue's delivery rate is
	// measured.
	DefaultRateWindow = 2 * time.Second
)

// Backlog is one reading of the executions fired and not yet taken by an
// executor: what waits in each queue of the exec stream, how fast each
// queue's executors take it, and what the dispatcher holds due but not
// yet published.
type Backlog struct {
	// At is when it began to be read, by the local clock: executions
	// handed to the dispatcher after it may be missing from it.
	At time.Time
	// Queues are the exec stream's consumers, one per queue and priority
	// class (wire.ConsumerName).
	Queues []QueueBacklog
	// Unpublished are the executions the dispatcher holds that are due
	// and not yet acknowledged by JetStream (Dispatcher.Unpublished).
	Unpublished int
}

// QueueBacklog is one consumer of the exec stream.
type QueueBacklog struct {
	Consumer string
	// Waiting is what the consumer has not delivered yet plus what is out
	// with executors unacknowledged (NumPending + NumAckPending).
	Waiting int
	// Rate is how many messages per second the consumer delivered to
	// executors over the last RateWindow (redeliveries included): 0 when
	// none did, or before two readings. A queue whose executors are down
	// has rate 0 within RateWindow.
	Rate float64
}

// Unpublisheder is the dispatcher as a BacklogWatch sees it; *Dispatcher
// is one.
type Unpublisheder interface {
	Unpublished() int
}

// PerMessager says how many executions a message on an execution subject
// carries, on average: several in batch messages. *Dispatcher is one.
type PerMessager interface {
	ExecutionsPerMessage(subject string) float64
}

// PerMessageFunc is a function as a PerMessager.
type PerMessageFunc func(subject string) float64

// ExecutionsPerMessage calls f.
func (f PerMessageFunc) ExecutionsPerMessage(subject string) float64 { return f(subject) }

// UnpublishedFunc is a function as an Unpublisheder: for a BacklogWatch
// made before the dispatcher that reads its forms (see Config.Forms).
type UnpublishedFunc func() int

// Unpublished calls f.
func (f UnpublishedFunc) Unpublished() int { return f() }

// BacklogConfig configures a BacklogWatch. JS is required.
type BacklogConfig struct {
	JS jetstream.JetStream
	// Dispatcher, if set, adds what it holds due and unpublished to every
	// reading.
	Dispatcher Unpublisheder
	// PerMessage, if set, turns each consumer's messages into executions:
	// a consumer counts messages, and a batch message carries several
	// executions (wire.HeaderBatch), while the scanner counts what it
	// fires in executions. Without it a message is one execution.
	PerMessage PerMessager
	// Interval is how often the consumers are read; default
	// DefaultBacklogInterval. A reading older than four intervals is not
	// given out (Backlog reports none).
	Interval time.Duration
	// RateWindow is how far back delivery rates are measured; default
	// DefaultRateWindow.
	RateWindow time.Duration
	Logger     *slog.Logger
}

// BacklogWatch reads the exec stream's consumers (one request for all of
// them) every Interval and keeps the last reading for the scanner, which
// fires no further ahead of execution than a bounded backlog (see
// scanner.Config.Backlog). It never blocks a reader: while NATS cannot be
// read, Backlog reports none, and the scanner fires as if there were no
// backlog.
type BacklogWatch struct {
	cfg BacklogConfig
	log *slog.Logger

	mu   sync.Mutex
	last Backlog
	ok   bool
	// batch is, by execution subject, whether the subject's consumer takes
	// batch messages (wire.MetaBatch), from the last reading; nil before
	// the first.
	batch map[string]bool

	// Owned by Run's goroutine.
	stream  jetstream.Stream
	samples map[string][]delivered // by consumer, oldest first
	failing bool                   // the last read failed (logged once)
}

// delivered is a consumer's delivered sequence at a time.
type delivered struct {
	at  time.Time
	seq uint64
}

// NewBacklogWatch checks cfg and returns a BacklogWatch that reads
// nothing until Run.
func NewBacklogWatch(cfg BacklogConfig) (*BacklogWatch, error) {
	if cfg.JS == nil {
		return nil, errors.New("dispatcher: BacklogConfig.JS is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultBacklogInterval
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.RateWindow < 2*cfg.Interval {
		return nil, errors.New("dispatcher: BacklogConfig.RateWindow must be at least two Intervals")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &BacklogWatch{cfg: cfg, log: cfg.Logger, samples: map[string][]delivered{}}, nil
}

// Backlog is the last reading, and false if there is none younger than
// four Intervals (not read yet, or NATS cannot be read).
func (w *BacklogWatch) Backlog() (Backlog, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ok || time.Since(w.last.At) > 4*w.cfg.Interval {
		return Backlog{}, false
	}
	return w.last, true
}

// Run reads the backlog every Interval until ctx ends.
func (w *BacklogWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		w.read(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// read takes one reading. A failed one leaves the last in place, to age
// out.
func (w *BacklogWatch) read(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, max(w.cfg.Interval, time.Second))
	defer cancel()
	// The dispatcher first: an execution published meanwhile is counted
	// twice rather than not at all. The reading is dated when it began:
	// whatever the scanner fired after that may be missing from it.
	start := time.Now()
	unpublished := 0
	if w.cfg.Dispatcher != nil {
		unpublished = w.cfg.Dispatcher.Unpublished()
	}
	infos, err := w.consumers(rctx)
	if err != nil {
		if ctx.Err() == nil && !w.failing {
			w.log.Warn("read the exec queues' backlog; firing is not held back meanwhile", "err", err)
		}
		w.failing = true
		return
	}
	if w.failing {
		w.log.Info("exec queues' backlog read again")
		w.failing = false
	}
	b := w.fold(start, infos)
	b.Unpublished = unpublished
	batch := make(map[string]bool, len(infos))
	for _, info := range infos {
		batch[info.Config.FilterSubject] = wire.BatchForm(info.Config.Metadata)
	}
	w.mu.Lock()
	w.last, w.ok, w.batch = b, true, batch
	w.mu.Unlock()
}

// BatchForm reports whether the consumer of an execution subject takes
// batch messages, as its metadata said at the last reading (any age: a
// queue's form changes only when executors of the other form create its
// consumers), and false for a subject without a consumer. known is false
// until the watch has read the consumers once.
func (w *BacklogWatch) BatchForm(subject string) (batch, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch == nil {
		return false, false
	}
	return w.batch[subject], true
}

// consumers lists the exec stream's consumers.
func (w *BacklogWatch) consumers(ctx context.Context) ([]*jetstream.ConsumerInfo, error) {
	if w.stream == nil {
		s, err := w.cfg.JS.Stream(ctx, wire.ExecStream)
		if err != nil {
			return nil, err
		}
		w.stream = s
	}
	l := w.stream.ListConsumers(ctx)
	var infos []*jetstream.ConsumerInfo
	for info := range l.Info() { // read to the end: the lister's goroutine ends then
		infos = append(infos, info)
	}
	if err := l.Err(); err != nil {
		w.stream = nil // deleted and created again, maybe: look it up anew
		return nil, err
	}
	return infos, nil
}

// fold turns the consumers read at now into a reading, measuring each
// one's delivery rate over RateWindow from its delivered sequence.
func (w *BacklogWatch) fold(now time.Time, infos []*jetstream.ConsumerInfo) Backlog {
	b := Backlog{At: now, Queues: make([]QueueBacklog, 0, len(infos))}
	seen := make(map[string]bool, len(infos))
	for _, info := range infos {
		name := info.Name
		seen[name] = true
		s := w.samples[name]
		if n := len(s); n > 0 && info.Delivered.Consumer < s[n-1].seq {
			s = s[:0] // the consumer was created again
		}
		s = append(s, delivered{now, info.Delivered.Consumer})
		// Keep one sample at or before the window's start, so that the
		// rate spans the whole window once it can.
		from := now.Add(-w.cfg.RateWindow)
		for len(s) > 1 && !s[1].at.After(from) {
			s = s[1:]
		}
		w.samples[name] = s
		k := 1.0
		if w.cfg.PerMessage != nil {
			k = max(1, w.cfg.PerMessage.ExecutionsPerMessage(info.Config.FilterSubject))
		}
		q := QueueBacklog{Consumer: name, Waiting: int(k * float64(int(info.NumPending)+info.NumAckPending))}
		if first, last := s[0], s[len(s)-1]; last.at.After(first.at) {
			q.Rate = k * float64(last.seq-first.seq) / last.at.Sub(first.at).Seconds()
		}
		b.Queues = append(b.Queues, q)
	}
	for name := range w.samples {
		if !seen[name] {
			delete(w.samples, name)
		}
	}
	return b
}
