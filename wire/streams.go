package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
)

// Stream and consumer settings. Every side that creates the streams or a
// queue's consumer uses these, so whoever starts first creates the same
// thing.
const (
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id: a
	// re-published execution or event within it is dropped.
	DuplicateWindow = 2 * time.Minute
	// EventMaxAge is how long events stay in EventStream if the recorder
	// does not consume them.
	EventMaxAge = 24 * time.Hour
	// ChangeMaxAge and ChangeMaxBytes bound the change feed: a reader
	// that comes back after more than this is told to resync.
	ChangeMaxAge   = time.Hour
	ChangeMaxBytes = 256 << 20
	// DefaultAckWait is how long an executor may stay silent (no ack, no
	// in-progress heartbeat) before its attempt is handed to another one.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxAckPending bounds the executions of one queue and priority
	// class that are out with executors at any moment. Retries wait out
	// their backoff in Postgres, not here, so they hold none of it.
	DefaultMaxAckPending = 1000
)

// TimeFormat is the layout of the Tock-Scheduled-For header: RFC 3339 in
// UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t for a header such as Tock-Scheduled-For.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// EnsureStreams creates ExecStream and EventStream, or updates them to
// tock's settings if they exist. It is safe to call from every process at
// start-up. Streams and buckets it creates have one replica; existing
// ones keep theirs (see EnsureStreamsReplicas).
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	return EnsureStreamsReplicas(ctx, js, 0)
}

// MaxReplicas is the most replicas JetStream keeps of a stream.
const MaxReplicas = 5

// EnsureStreamsReplicas is EnsureStreams with replicas copies of each
// stream and key-value bucket (1..MaxReplicas): an existing stream or
// bucket with another count is updated in place, its messages kept, and
// its consumers, which inherit the stream's count, follow. 0 creates with
// one replica and leaves existing ones as they are (processes that do
// not own the setting, such as a custom executor).
func EnsureStreamsReplicas(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if replicas < 0 || replicas > MaxReplicas {
		return fmt.Errorf("stream replicas %d: want 1 to %d", replicas, MaxReplicas)
	}
	streams := []jetstream.StreamConfig{
		{
			Name:        ExecStream,
			Description: "tock executions waiting for an executor",
			Subjects:    []string{ExecSubjectPrefix + ">"},
			// Each execution is consumed once, by its queue's consumer.
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    jetstream.FileStorage,
			Duplicates: DuplicateWindow,
		},
		{
			Name:        EventStream,
			Description: "tock execution events on their way to the recorder",
			Subjects:    []string{EventSubjectPrefix + ">"},
			// An event is deleted once the recorder has acknowledged it
			// (and any other consumer, such as a test's observer), so the
			// stream holds only what is not yet in Postgres. The
			// recorder's durable consumer is created here, with the
			// stream, so there is always interest: no event is published
			// into a stream nobody reads.
			Retention:  jetstream.InterestPolicy,
			Storage:    jetstream.FileStorage,
			MaxAge:     EventMaxAge,
			Duplicates: DuplicateWindow,
		},
	}
	for _, cfg := range streams {
		cfg.Replicas = replicas
		if err := ensureStream(ctx, js, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	if err := ensureRecorderConsumer(ctx, js, EventStream, RecorderConsumerConfig()); err != nil {
		return fmt.Errorf("ensure consumer %s on %s: %w", RecorderConsumer, EventStream, err)
	}
	return ensureKV(ctx, js, replicas)
}

// EnsureChangeStream creates ChangeStream (the change feed of package
// changes) with replicas copies, or updates it to tock's settings. Only
// tockd needs it: custom executors neither publish nor read it, so
// EnsureStreams leaves it out (and their NATS permissions need not name
// it).
func EnsureChangeStream(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if replicas < 0 || replicas > MaxReplicas {
		return fmt.Errorf("stream replicas %d: want 1 to %d", replicas, MaxReplicas)
	}
	cfg := jetstream.StreamConfig{
		Name:        ChangeStream,
		Description: "tock's change feed: executions and jobs that changed, for live views",
		Subjects:    []string{ChangeSubjectPrefix + ">"},
		// A notification feed read from any point by any number of
		// readers (each an ordered consumer): kept for a while, the
		// oldest dropped first, whoever has read it.
		Retention: jetstream.LimitsPolicy,
		Storage:   jetstream.FileStorage,
		MaxAge:    ChangeMaxAge,
		MaxBytes:  ChangeMaxBytes,
		Discard:   jetstream.DiscardOld,
		// Changes carry no Nats-Msg-Id; the server's default window,
		// written out so that the stream compares equal at the next
		// start.
		Duplicates: DuplicateWindow,
	}
	cfg.Replicas = replicas
	if err := ensureStream(ctx, js, cfg); err != nil {
		return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}

// EnsureLogStream creates LogStream (execution logs) with replicas
// copies and the log recorder's consumer, or updates them to tockd's
// settings. Only tockd's log recorder does: an executor publishes log
// chunks into the stream it made (if there is none yet, its chunks are a counted
// gap), so EnsureStreams leaves it out and a custom executor's NATS
// permissions need only publish on LogSubject.
func EnsureLogStream(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if replicas < 0 || replicas > MaxReplicas {
		return fmt.Errorf("stream replicas %d: want 1 to %d", replicas, MaxReplicas)
	}
	cfg := jetstream.StreamConfig{
		Name:        LogStream,
		Description: "tock execution log chunks on their way to the recorder",
		Subjects:    []string{LogSubjectPrefix + ">"},
		// As events: deleted once the log recorder has them, its
		// consumer created with the stream. Full, the stream refuses
		// new chunks (executors mark them as a gap) rather than drop
		// stored ones.
		Retention:  jetstream.InterestPolicy,
		Storage:    jetstream.FileStorage,
		MaxAge:     LogMaxAge,
		MaxBytes:   LogMaxBytes,
		Discard:    jetstream.DiscardNew,
		Duplicates: DuplicateWindow,
	}
	cfg.Replicas = replicas
	if err := ensureStream(ctx, js, cfg); err != nil {
		return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	if err := ensureRecorderConsumer(ctx, js, LogStream, LogRecorderConsumerConfig()); err != nil {
		return fmt.Errorf("ensure consumer %s on %s: %w", LogRecorderConsumer, LogStream, err)
	}
	return nil
}

// ensureRecorderConsumer creates the recorder's consumer, or updates it
// if its settings differ from RecorderConsumerConfig's. Like
// ensureStream, it reads before it writes: so a process whose NATS user
// may read tock's streams and consumers but not change them (a custom
// executor's, deploy/nats/custom-executor.conf) passes once tockd has
// set them up.
func ensureRecorderConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) error {
	c, err := js.Consumer(ctx, stream, want.Durable)
	switch {
	case err == nil:
		if have := c.CachedInfo().Config; have.Description == want.Description && have.AckPolicy == want.AckPolicy &&
			have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver && have.FilterSubject == want.FilterSubject &&
			have.DeliverPolicy == want.DeliverPolicy && have.MaxAckPending == want.MaxAckPending {
			return nil
		}
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return err
	}
	_, err = js.CreateOrUpdateConsumer(ctx, stream, want)
	return err
}

// ensureStream creates the stream, or updates it if its settings differ
// from cfg's. It does not update a stream that is already right: every
// tock process calls it at start, and an update racing a consumer's
// creation trips a data race inside nats-server (v2.15, seen under the
// race detector with the server embedded).
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		cfg.Replicas = max(cfg.Replicas, 1)
		_, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil // created by another process meanwhile, with the same settings
		}
		return err
	}
	if err != nil {
		return err
	}
	have := s.CachedInfo().Config
	if cfg.Replicas == 0 {
		cfg.Replicas = have.Replicas // not ours to change
	}
	if have.Description == cfg.Description && slices.Equal(have.Subjects, cfg.Subjects) &&
		have.Retention == cfg.Retention && have.Storage == cfg.Storage && have.MaxAge == cfg.MaxAge &&
		have.Duplicates == cfg.Duplicates && have.Replicas == cfg.Replicas && (cfg.MaxBytes == 0 || have.MaxBytes == cfg.MaxBytes) {
		return nil
	}
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// RecorderAckWait is how long the recorder may take to write an event
// before it is delivered again.
const RecorderAckWait = 30 * time.Second

// RecorderConsumerConfig is the recorder's durable consumer of
// EventStream.
func RecorderConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       RecorderConsumer,
		Description:   "tock recorder: execution events into Postgres",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RecorderAckWait,
		MaxDeliver:    -1,
		FilterSubject: EventSubjectPrefix + ">",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// The recorder pulls up to this many events at once.
		MaxAckPending: 20_000,
	}
}

// LogRecorderConsumerConfig is the log recorder's durable consumer of
// LogStream.
func LogRecorderConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       LogRecorderConsumer,
		Description:   "tock recorder: execution log chunks into Postgres",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RecorderAckWait,
		MaxDeliver:    -1,
		FilterSubject: LogSubjectPrefix + ">",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 5_000,
	}
}

// ConsumerOptions tunes a queue's consumer. The zero value is tock's
// default.
type ConsumerOptions struct {
	// AckWait defaults to DefaultAckWait. Executors send in-progress acks
	// at a third of it while an attempt runs.
	AckWait time.Duration
	// MaxAckPending defaults to DefaultMaxAckPending.
	MaxAckPending int
	// Batch says in the consumer's metadata (MetaBatch) that the queue's
	// executors take batch messages; without it the queue gets one
	// execution per message. Every executor of a queue must say the same:
	// the last to create the consumer decides.
	Batch bool
}

// EnsureConsumer creates or updates the durable pull consumer
// ConsumerName(queue, priority) on ExecStream, filtered on
// ExecSubject(queue, priority), and returns it. MaxDeliver is unlimited:
// tock counts attempts itself (see Execution) and ends a message by acking
// or terminating it. ExecStream must exist (see EnsureStreams).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, queue string, priority domain.Priority, opts ConsumerOptions) (jetstream.Consumer, error) {
	if opts.AckWait <= 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.MaxAckPending <= 0 {
		opts.MaxAckPending = DefaultMaxAckPending
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       ConsumerName(queue, priority),
		Description:   "tock " + string(priority) + " priority executions for queue " + queue,
		FilterSubject: ExecSubject(queue, priority),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: opts.MaxAckPending,
	}
	if opts.Batch {
		cfg.Metadata = map[string]string{MetaBatch: BatchFormV1}
	}
	c, err := js.CreateOrUpdateConsumer(ctx, ExecStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", cfg.Durable, ExecStream, err)
	}
	return c, nil
}

// QueueConsumer is what JetStream says of one queue's consumer for one
// priority class.
type QueueConsumer struct {
	Queue    string
	Priority domain.Priority
	// Pending: messages not yet delivered; AckPending: delivered, not yet
	// acknowledged; Waiting: pull requests waiting for messages (an
	// executor asking for work).
	Pending    uint64
	AckPending int
	Waiting    int
}

// ListQueueConsumers lists the executors' consumers of ExecStream.
func ListQueueConsumers(ctx context.Context, js jetstream.JetStream) ([]QueueConsumer, error) {
	s, err := js.Stream(ctx, ExecStream)
	if err != nil {
		return nil, fmt.Errorf("list queue consumers: %w", err)
	}
	var out []QueueConsumer
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		rest, ok := strings.CutPrefix(ci.Config.FilterSubject, ExecSubjectPrefix)
		i := strings.LastIndexByte(rest, '.')
		if !ok || i <= 0 {
			continue
		}
		out = append(out, QueueConsumer{Queue: rest[:i], Priority: domain.Priority(rest[i+1:]), Pending: ci.NumPending,
			AckPending: ci.NumAckPending, Waiting: ci.NumWaiting})
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("list queue consumers: %w", err)
	}
	return out, nil
}
