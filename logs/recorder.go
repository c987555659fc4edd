// Package logs is tock's execution logs (issue 38): what attempts print,
// from the chunks executors publish (wire.LogChunk) to the rows readers
// page through and follow.
//
// Its Recorder is a server-side role like package recorder's: it reads
// wire.LogStream and writes the chunks to Postgres in batches. Bad input
// never stops it and never gets stored wrong: invalid UTF-8 is replaced,
// over-long lines split (wire.LogChunk.Normalize); a chunk that does not
// decode or is invalid, or whose execution is unknown, another
// namespace's or ended long ago, is dropped and counted
// (tock_log_chunks_total{outcome}); a redelivered chunk is stored once.
// Reader (read.go) turns stored chunks into lines with their gaps, for
// the API's GET and follow.
package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/internal/retry"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// Store is where the Recorder writes; *store.Store is one.
type Store interface {
	RecordLogChunks(ctx context.Context, chunks []model.LogChunk, grace time.Duration) ([]string, error)
}

// Tuning.
const (
	// FinishedGrace is how long after its execution ended a chunk is
	// still stored: an executor publishes its last chunks before the
	// attempt's end, but the two streams are recorded independently.
	FinishedGrace = 10 * time.Minute
	// pullBatch bounds the messages held; a batch is written when full or
	// after batchLinger without a message.
	pullBatch   = 500
	maxBatch    = 200
	batchLinger = 5 * time.Millisecond
	writers     = 2
	retryDelay  = 2 * time.Second
	// shutdownWrite bounds the writes of the chunks a stopping recorder
	// holds.
	shutdownWrite = 5 * time.Second
)

// Outcomes counted by tock_log_chunks_total, besides model.LogStored and
// the store's others.
const (
	OutcomeInvalid     = "invalid"
	OutcomeUndecodable = "undecodable"
)

// Config configures a Recorder.
type Config struct {
	JS         jetstream.JetStream
	Store      Store
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Grace is FinishedGrace unless set.
	Grace time.Duration
	// Replicas is the copies of wire.LogStream the recorder makes or
	// keeps it at (tockd's --stream-replicas); 0 leaves an existing
	// stream's as they are and makes one with one replica.
	Replicas int
}

// Recorder consumes wire.LogStream into a Store.
type Recorder struct {
	cfg    Config
	log    *slog.Logger
	chunks *prometheus.CounterVec
	bytes  prometheus.Counter
}

// NewRecorder checks cfg and returns a Recorder.
func NewRecorder(cfg Config) (*Recorder, error) {
	if cfg.JS == nil || cfg.Store == nil {
		return nil, errors.New("logs: Config.JS and Config.Store are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Grace <= 0 {
		cfg.Grace = FinishedGrace
	}
	var err error
	r := &Recorder{cfg: cfg, log: cfg.Logger.With("role", "log-recorder")}
	r.chunks = promreg.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tock_log_chunks_total",
		Help: "Execution log chunks the log recorder read, by outcome: stored, duplicate (stored before: a redelivery), " +
			"unknown_execution, foreign_namespace (the execution is another namespace's), finished_execution (it ended " +
			"longer ago than the grace), invalid, undecodable. Only stored ones are written.",
	}, []string{"outcome"}), &err)
	r.bytes = promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tock_log_bytes_total",
		Help: "Bytes of execution log text stored.",
	}), &err)
	if err != nil {
		return nil, fmt.Errorf("logs: register metrics: %w", err)
	}
	for _, o := range []string{model.LogStored, model.LogDuplicate, model.LogUnknown, model.LogForeign, model.LogFinished, OutcomeInvalid, OutcomeUndecodable} {
		r.chunks.WithLabelValues(o)
	}
	return r, nil
}

// Run records chunks until ctx ends, setting the stream and its consumer
// up again whenever NATS fails or loses them.
func (r *Recorder) Run(ctx context.Context) error {
	backoff := retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		err := r.consume(ctx)
		if ctx.Err() != nil {
			break
		}
		backoff.Wait(ctx, r.log, "consume log chunks", "err", err)
	}
	return nil
}

func (r *Recorder) consume(ctx context.Context) error {
	// The stream is made here, not at the node's start: a node starts
	// without waiting for it, and an executor's chunks published before
	// it exists are a counted gap.
	if err := wire.EnsureLogStream(ctx, r.cfg.JS, r.cfg.Replicas); err != nil {
		return err
	}
	cons, err := r.cfg.JS.CreateOrUpdateConsumer(ctx, wire.LogStream, wire.LogRecorderConsumerConfig())
	if err != nil {
		return fmt.Errorf("ensure consumer %s: %w", wire.LogRecorderConsumer, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch), jetstream.PullHeartbeat(2*time.Second))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	// The chunks held when ctx ends are written for up to shutdownWrite
	// more; what is left is delivered again to the next recorder.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopWrites := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownWrite, cancel) })
	defer stopWrites()
	work := make(chan []jetstream.Msg)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(work)
	for range writers {
		wg.Go(func() {
			for batch := range work {
				r.handle(wctx, batch)
			}
		})
	}
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		batch := []jetstream.Msg{msg}
		for len(batch) < maxBatch {
			m, err := it.Next(jetstream.NextMaxWait(batchLinger))
			if err != nil {
				if errors.Is(err, nats.ErrTimeout) {
					break
				}
				work <- batch
				return err
			}
			batch = append(batch, m)
		}
		work <- batch
	}
}

// handle writes the chunks of msgs and settles the messages.
func (r *Recorder) handle(ctx context.Context, msgs []jetstream.Msg) {
	var chunks []model.LogChunk
	var held []jetstream.Msg
	for _, msg := range msgs {
		got, bad := Decode(msg.Data())
		if bad < 0 {
			r.chunks.WithLabelValues(OutcomeUndecodable).Inc()
			r.log.Warn("log message that does not decode; dropped", "subject", msg.Subject(), "bytes", len(msg.Data()))
			_ = msg.Term()
			continue
		}
		if bad > 0 {
			r.chunks.WithLabelValues(OutcomeInvalid).Add(float64(bad))
		}
		if len(got) == 0 {
			_ = msg.Ack()
			continue
		}
		chunks = append(chunks, got...)
		held = append(held, msg)
	}
	if len(chunks) == 0 {
		return
	}
	verdicts, err := r.cfg.Store.RecordLogChunks(ctx, chunks, r.cfg.Grace)
	if err != nil {
		for _, msg := range held {
			_ = msg.NakWithDelay(retryDelay)
		}
		r.log.Warn("record log chunks; retrying", "chunks", len(chunks), "err", err, "retry_in", retryDelay)
		return
	}
	for i, v := range verdicts {
		r.chunks.WithLabelValues(v).Inc()
		if v == model.LogStored {
			r.bytes.Add(float64(chunks[i].Bytes))
		}
	}
	for _, msg := range held {
		if err := msg.Ack(); err != nil {
			r.log.Warn("ack log chunks", "err", err)
		}
	}
}

// Decode reads a log message's chunks (a JSON array of wire.LogChunk, or
// one chunk), normalized and checked. bad counts the chunks left out as
// invalid, or is -1 when the message does not decode at all.
func Decode(data []byte) (chunks []model.LogChunk, bad int) {
	var wcs []wire.LogChunk
	if err := json.Unmarshal(data, &wcs); err != nil {
		var one wire.LogChunk
		if err := json.Unmarshal(data, &one); err != nil {
			return nil, -1
		}
		wcs = []wire.LogChunk{one}
	}
	for i := range wcs {
		c := &wcs[i]
		c.Normalize()
		if err := c.Validate(); err != nil {
			bad++
			continue
		}
		chunks = append(chunks, toModel(c))
	}
	return chunks, bad
}

func toModel(c *wire.LogChunk) model.LogChunk {
	m := model.LogChunk{
		ExecutionID:  uuid.MustParse(c.ExecutionID),
		ScheduledFor: c.ScheduledFor,
		Namespace:    c.Namespace,
		Attempt:      c.Attempt,
		Seq:          c.Seq,
		Stream:       c.Stream,
		Offset:       c.Offset,
		Bytes:        c.Bytes(),
		TrimFrom:     c.TrimFrom,
		TrimBefore:   c.TrimBefore,
		End:          c.End,
		Lines:        make([]model.LogLine, len(c.Lines)),
	}
	for i, l := range c.Lines {
		m.Lines[i] = model.LogLine{At: l.At, Text: l.Text, Split: l.Split}
	}
	if len(c.Lines) > 0 {
		m.At = c.Lines[0].At
	} else {
		m.At = c.ScheduledFor
	}
	return m
}
