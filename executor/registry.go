package executor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// registry is a Worker's handlers by queue name. Handle adds to it until
// Run starts, which turns it into queues once.
type registry struct {
	mu       sync.Mutex
	handlers map[string]registration
	started  bool
}

type registration struct {
	fn   Func
	opts QueueOptions
}

func newRegistry() *registry { return &registry{handlers: make(map[string]registration)} }

// add registers fn for queue; it panics on what HandleWith documents.
func (r *registry) add(queue string, fn Func, opts QueueOptions) {
	if !queueName.MatchString(queue) {
		panic(fmt.Sprintf("executor: invalid queue name %q (letters, digits, '-' and '_')", queue))
	}
	if fn == nil {
		panic("executor: nil Func for queue " + queue)
	}
	if opts.Concurrency < 0 {
		panic(fmt.Sprintf("executor: negative concurrency %d for queue %s", opts.Concurrency, queue))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		panic("executor: Handle(" + queue + ") after Run")
	}
	if _, dup := r.handlers[queue]; dup {
		panic("executor: queue " + queue + " registered twice")
	}
	r.handlers[queue] = registration{fn: fn, opts: opts}
}

// start closes the registry and returns its queues, each with the slots
// of its concurrency (concurrency unless its options say otherwise). It
// fails on a second call and when nothing is registered.
func (r *registry) start(concurrency int) ([]*queue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return nil, errors.New("executor: Run called twice")
	}
	r.started = true
	if len(r.handlers) == 0 {
		return nil, errors.New("executor: no handlers registered")
	}
	queues := make([]*queue, 0, len(r.handlers))
	for name, reg := range r.handlers {
		n := reg.opts.Concurrency
		if n == 0 {
			n = concurrency
		}
		queues = append(queues, &queue{name: name, fn: reg.fn, slots: newSlots(n), work: make(chan work, n)})
	}
	return queues, nil
}

// queue is one registered handler as Run serves it.
type queue struct {
	name  string
	fn    Func
	slots *slots
	// work carries pulled messages to the queue's pool of attempt
	// goroutines, one per slot (see Worker.runPool). A message is sent
	// only with a slot taken, so a send never blocks and a message never
	// waits for a goroutine.
	work chan work
}

// work is one pulled message for a queue's pool.
type work struct {
	msg     jetstream.Msg
	ackWait time.Duration // of the consumer it came from
}

// slots bound the attempts of a queue in flight in this process. Only the
// queue's puller takes slots; attempts give them back.
type slots struct {
	taken chan struct{} // one per attempt in flight
	freed chan struct{} // rung when a slot is given back
}

func newSlots(n int) *slots {
	return &slots{taken: make(chan struct{}, n), freed: make(chan struct{}, 1)}
}

func (s *slots) size() int { return cap(s.taken) }
func (s *slots) free() int { return cap(s.taken) - len(s.taken) }
func (s *slots) take()     { s.taken <- struct{}{} }

func (s *slots) release() {
	<-s.taken
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// slotLinger is how long a saturated queue waits for more slots to free
// before it pulls again: under saturation attempts end one by one, and a
// pull per freed slot would cost a round trip (or three, one per priority
// consumer) per execution.
const slotLinger = 2 * time.Millisecond

// gather waits until a quarter of the slots are free, or slotLinger has
// passed.
func (s *slots) gather(ctx context.Context) {
	want := max(1, s.size()/4)
	if s.free() >= want {
		return
	}
	t := time.NewTimer(slotLinger)
	defer t.Stop()
	for s.free() < want {
		select {
		case <-s.freed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
