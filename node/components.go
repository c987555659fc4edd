package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/backfill"
	"github.com/tock-sched/tock/clock"
	"github.com/tock-sched/tock/depends"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/history"
	"github.com/tock-sched/tock/logs"
	"github.com/tock-sched/tock/maintenance"
	"github.com/tock-sched/tock/notify"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/recorder"
	"github.com/tock-sched/tock/scanner"
	"github.com/tock-sched/tock/wire"
)

// runFunc runs a component until its context ends.
type runFunc func(ctx context.Context) error

// component is one long-running part of a node: a role, or one of the
// scheduler role's parts.
type component struct {
	name string
	// on says whether this node runs it (from Config.Roles).
	on bool
	// stage is its place in the stop order.
	stage stopStage
	// start builds it and returns what runs it.
	start func() (runFunc, error)
	// drain, if set, is called before the component is stopped, with a
	// context that ends after drainTimeout.
	drain func(ctx context.Context) error
	// early: its context ends as soon as the node stops, before the
	// first stage, though Run waits for it only at its own stage. The
	// executor stops pulling at once, and its grace for running attempts
	// starts with the shutdown.
	early bool
	// wait is how long its stage waits for it to return; 0 means
	// stopWait.
	wait time.Duration
}

// stopWait is how long a stage waits for a component to return before
// Run gives up on it with a warning.
const stopWait = 15 * time.Second

// handBackWait is how long, past its shutdown grace, a stopping
// executor's stage waits for it: the interrupted attempts' handlers
// return, their events are published, or they are abandoned (and handed
// back unreported) after executor's abandon wait of 5s.
const handBackWait = 10 * time.Second

// stopStage is a place in the stop order. Stages stop one after another
// in the order declared here; the components of one stage stop together,
// each given 15s before Run gives up on it with a warning.
type stopStage int

const (
	// The partition node hands its buckets back: for each, the scanner
	// stops firing in it, then the owner key is deleted; then the node
	// deletes its member key and revokes its lease. So the node has left
	// etcd before the scanner stops. Partition maintenance, wipe
	// recovery and lost-work rescue stop alongside it.
	stopBuckets stopStage = iota
	// The scanner, which now fires in no bucket.
	stopScanner
	// The dispatcher, once it has published what the scanner fired last
	// (see drainTimeout).
	stopDispatcher
	// Executors, once their attempts in flight have finished or, at the
	// end of the shutdown grace, been interrupted and handed back. Their
	// context ended at the start of the shutdown (component.early), so
	// they pulled nothing new meanwhile.
	stopExecutor
	// The recorder, last: once it has been delivered what the executors
	// reported (Recorder.WaitDelivered), it records what it holds and stops.
	stopRecorder

	stopStages // how many stages there are
)

// drainTimeout bounds the dispatcher's drain at shutdown. What the
// scanner fired last is usually due at most its FireLead (500ms) ahead,
// so this covers it and the publish acks. What is still waiting after it
// (runs of a burst fired up to MaxFireLead ahead, retries
// read ahead of their backoff's end, publishes NATS does not acknowledge)
// stays in the outbox, and the bucket's next owner publishes it.
const drainTimeout = time.Second

// components is the table of what a node runs, in start order.
func components(cfg Config, d deps) []component {
	sched := cfg.Roles.Has(RoleScheduler)
	// The scheduler's parts are wired to one another: they are built
	// together, when the first of them starts.
	parts := sync.OnceValues(func() (*scheduler, error) { return newScheduler(cfg, d) })
	part := func(run func(s *scheduler) runFunc) func() (runFunc, error) {
		return func() (runFunc, error) {
			s, err := parts()
			if err != nil {
				return nil, err
			}
			return run(s), nil
		}
	}
	var rec *recorder.Recorder
	return []component{
		{name: "dispatcher", on: sched, stage: stopDispatcher,
			start: part(func(s *scheduler) runFunc { return s.disp.Run }),
			drain: func(ctx context.Context) error {
				s, err := parts()
				if err != nil {
					return err
				}
				return s.disp.Drain(ctx)
			}},
		{name: "wipe-recovery", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc { return s.wipe.Run })},
		{name: "lost-work", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc { return s.lost.Run })},
		{name: "stuck-rescue", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc { return s.stuck.Run })},
		{name: "scanner", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.scan.Run })},
		{name: "backlog", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.backlog.Run })},
		{name: "backfill", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.back.Run })},
		{name: "depends", on: sched, stage: stopScanner,
			start: part(func(s *scheduler) runFunc { return s.deps.Run })},
		{name: "partition", on: sched, stage: stopBuckets,
			start: part(func(s *scheduler) runFunc {
				return func(ctx context.Context) error { return s.node.Run(ctx, s.scan) }
			})},
		{name: "maintenance", on: sched, stage: stopBuckets,
			start: func() (runFunc, error) {
				p, err := maintenancePass(d.st, d.log, cfg, d.reg, false)
				if err != nil {
					return nil, err
				}
				return p.Run, nil
			}},
		{name: "history", on: sched, stage: stopBuckets,
			start: func() (runFunc, error) {
				// Rollups start from as far back as executions are kept.
				r, err := history.New(history.Config{Store: d.st, Backfill: cfg.Retention,
					HourRetention: cfg.HistoryRetention, Logger: d.log})
				if err != nil {
					return nil, err
				}
				return r.Run, nil
			}},
		{name: "notify", on: sched, stage: stopBuckets,
			start: func() (runFunc, error) {
				n, err := newNotifier(cfg, d)
				if err != nil {
					return nil, err
				}
				return n.Run, nil
			}},
		{name: "recorder", on: cfg.Roles.Has(RoleRecorder), stage: stopRecorder,
			start: func() (runFunc, error) {
				var err error
				if rec, err = recorder.New(recorder.Config{JS: d.js, Store: d.st, Logger: d.log, Registerer: d.reg, Changes: d.changes.Publisher(),
					Tracer: d.tracer, DeadLetters: d.st}); err != nil {
					return nil, err
				}
				return rec.Run, nil
			},
			drain: func(ctx context.Context) error {
				if rec == nil {
					return nil
				}
				return rec.WaitDelivered(ctx)
			}},
		{name: "log-recorder", on: cfg.Roles.Has(RoleRecorder), stage: stopRecorder,
			start: func() (runFunc, error) {
				lr, err := logs.NewRecorder(logs.Config{JS: d.js, Store: d.st, Logger: d.log, Registerer: d.reg, Replicas: cfg.StreamReplicas})
				if err != nil {
					return nil, err
				}
				return lr.Run, nil
			}},
		{name: "executor", on: cfg.Roles.Has(RoleExecutor), stage: stopExecutor, early: true,
			wait:  cfg.ShutdownGrace + handBackWait,
			start: func() (runFunc, error) { return newExecutor(cfg, d) }},
	}
}

// scheduler is the scheduler role's parts.
type scheduler struct {
	disp *dispatcher.Dispatcher
	node *partition.Node
	scan *scanner.Scanner
	wipe *maintenance.WipeRecovery
	lost *maintenance.LostWorkRescuer
	// stuck rescues executions left waiting (maintenance.StuckRescuer).
	stuck *maintenance.StuckRescuer
	back  *backfill.Runner
	// deps decides the waits of dependent jobs' executions.
	deps *depends.Resolver
	// backlog is read by the scanner (backpressure, when it is on) and
	// the dispatcher (which queues take batch messages).
	backlog *dispatcher.BacklogWatch
}

func newScheduler(cfg Config, d deps) (*scheduler, error) {
	// One clock, the database's, for the scanner (which keeps it synced),
	// the dispatcher, wipe recovery and lost-work rescue.
	clk := clock.New(d.st.Now, clock.Options{})
	// The backlog watch reads the exec stream's consumers: their backlog
	// for the scanner's backpressure (when it is on), and which queues take
	// batch messages for the dispatcher (always).
	var disp *dispatcher.Dispatcher
	backlog, err := dispatcher.NewBacklogWatch(dispatcher.BacklogConfig{JS: d.js, Logger: d.log,
		Dispatcher: dispatcher.UnpublishedFunc(func() int { return disp.Unpublished() }),
		PerMessage: dispatcher.PerMessageFunc(func(subject string) float64 { return disp.ExecutionsPerMessage(subject) })})
	if err != nil {
		return nil, err
	}
	disp, err = dispatcher.New(dispatcher.Config{JS: d.js, Store: d.st, Failer: d.st, Clock: clk, Logger: d.log, Registerer: d.reg,
		Changes: d.changes.Publisher(), Tracer: d.tracer, Forms: backlog})
	if err != nil {
		return nil, err
	}
	node, err := partition.New(partition.Config{
		Client: d.etcd, Cluster: cfg.Cluster, NodeID: cfg.NodeID, Addr: cfg.HTTPAddr,
		Buckets: cfg.Buckets, TTL: cfg.LeaseTTL, Logger: d.log, Fencing: d.st, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	scfg := scanner.Config{
		Store: d.st, Dispatcher: disp, Clock: clk, NodeID: cfg.NodeID, Logger: d.log, LeaseValid: node.Valid,
		Missed: cfg.Missed, Registerer: d.reg, Tracer: d.tracer,
		Cancel: func(ctx context.Context, id uuid.UUID) error { return wire.CancelExecution(ctx, d.js, id.String()) },
	}
	if cfg.FireBacklogFor >= 0 {
		scfg.Backlog, scfg.BacklogFor, scfg.MinBacklog = backlog, cfg.FireBacklogFor, cfg.FireBacklogMin
	}
	scan, err := scanner.New(scfg)
	if err != nil {
		return nil, err
	}
	wipe, err := maintenance.NewWipeRecovery(maintenance.WipeRecoveryConfig{
		JS: d.js, Store: d.st, Buckets: func() []int { return slices.Sorted(maps.Keys(node.Owned())) },
		Now: clk.Now, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	lost, err := maintenance.NewLostWorkRescuer(maintenance.LostWorkRescuerConfig{
		Store: d.st, Buckets: scan.Owned, Now: clk.Now, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	stuck, err := maintenance.NewStuckRescuer(maintenance.StuckRescuerConfig{
		JS: d.js, Store: d.st, Buckets: scan.Owned, Now: clk.Now, Logger: d.log, Registerer: d.reg,
		WaitAfter: cfg.RescueWaitAfter, SilentAfter: cfg.RescueSilentAfter,
	})
	if err != nil {
		return nil, err
	}
	back, err := backfill.New(backfill.Config{
		Store: d.st, Dispatcher: disp, NodeID: cfg.NodeID, Owned: node.Owned, LeaseValid: node.Valid,
		Rate: cfg.BackfillRate, Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	deps, err := depends.New(depends.Config{Store: d.st, Owned: scan.Owned, Now: clk.Now, Logger: d.log, Registerer: d.reg})
	if err != nil {
		return nil, err
	}
	s := &scheduler{disp: disp, node: node, scan: scan, wipe: wipe, lost: lost, stuck: stuck, back: back, deps: deps, backlog: backlog}
	if err := registerSchedulerMetrics(d, s); err != nil {
		return nil, err
	}
	return s, nil
}

// newNotifier is the node's notification service: the scheduler role
// runs it (grouping, delivery, silence, breakers); the api role uses it
// to send tests.
func newNotifier(cfg Config, d deps) (*notify.Service, error) {
	c := notify.Config{Store: d.st, Egress: d.http, JetStream: d.js, Node: cfg.NodeID, Logger: d.log,
		Registerer: d.reg, MaxBackoff: cfg.NotifyMaxBackoff, Lease: cfg.NotifyLease}
	if k := keys(cfg.Secrets); k != nil {
		c.Keys = k
	}
	return notify.New(c)
}

func newExecutor(cfg Config, d deps) (runFunc, error) {
	w, err := executor.New(executor.Config{
		NATS: d.nc, ExecutorID: cfg.NodeID, Logger: d.log,
		Concurrency: cfg.ExecutorConcurrency, MaxPerKey: cfg.ExecutorMaxPerKey,
		AckWait: cfg.ExecutorAckWait, Breaker: cfg.Breaker, ShutdownTimeout: cfg.ShutdownGrace,
		Registerer:     d.reg, // served on /metrics
		TracerProvider: d.tracerProvider,
	})
	if err != nil {
		return nil, err
	}
	w.Handle(domain.HandlerHTTP, executor.HTTPHandlerWith(executor.HTTPOptions{Client: d.http.Client(), Secrets: keys(cfg.Secrets)}))
	w.Handle(domain.HandlerNATS, executor.NATSHandler(d.nc))
	return w.Run, nil
}

// runner runs components, each under its own context, so that they stop
// in order, whether or not the parent context has ended.
type runner struct {
	parent  context.Context
	log     *slog.Logger
	running []*running
	// failed receives the first errors of components that stopped by
	// themselves; more are dropped.
	failed chan error
}

// running is a started component.
type running struct {
	component
	cancel   context.CancelFunc
	finished chan struct{}
}

// start builds c and runs it in a goroutine of its own.
func (r *runner) start(c component) error {
	run, err := c.start()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.parent))
	rc := &running{component: c, cancel: cancel, finished: make(chan struct{})}
	r.running = append(r.running, rc)
	go func() {
		defer close(rc.finished)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			select {
			case r.failed <- fmt.Errorf("%s: %w", c.name, err):
			default:
			}
		}
	}()
	return nil
}

// stopEarly ends the contexts of the early components (see
// component.early); stop does it too.
func (r *runner) stopEarly() {
	for _, rc := range r.running {
		if rc.early {
			rc.cancel()
		}
	}
}

// stop stops the started components, stage by stage, after ending the
// contexts of the early ones.
func (r *runner) stop() {
	r.stopEarly()
	for stage := range stopStages {
		var wg sync.WaitGroup
		for _, rc := range r.running {
			if rc.stage == stage {
				wg.Go(func() { r.stopOne(rc) })
			}
		}
		wg.Wait()
	}
}

// stopOne drains rc if it drains, cancels it and waits for it to finish.
func (r *runner) stopOne(rc *running) {
	if rc.drain != nil {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		_ = rc.drain(ctx) // what is left stays in the outbox
		cancel()
	}
	rc.cancel()
	wait := rc.wait
	if wait <= 0 {
		wait = stopWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-rc.finished:
	case <-t.C:
		r.log.Warn("role did not stop in time", "role", rc.name, "waited", wait)
	}
}
