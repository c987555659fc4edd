package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/client"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/wire"
)

// Config is a run of the kit.
type Config struct {
	// PostgresURL names a PostgreSQL server (its database part is not
	// used): the kit makes a database of its own there and drops it at
	// the end.
	PostgresURL string
	// Command starts the executor under test; it gets the environment
	// variables EnvNATSURL and EnvHandler beside the kit's own.
	Command []string
	// Handler is the custom handler the executor serves; default
	// "conformance".
	Handler string
	// Checks names the checks to run (Checks' names); all when empty.
	Checks []string
	// Out gets a line per check as it ends; Stderr the executor's output
	// and standard error (io.Discard when nil).
	Out, Stderr io.Writer
}

// Result is one check's outcome.
type Result struct {
	Name string
	// Pass: the executor passed, or the check is NotApplicable.
	Pass bool
	// NotApplicable: the check is of a form of the protocol the
	// executor does not speak (batch messages), and was not run.
	NotApplicable bool
	Reason        string
	Took          time.Duration
}

// env is a running kit: tock and the executor under test.
type env struct {
	api     *client.ClientWithResponses
	handler string
	nc      *nats.Conn
	js      jetstream.JetStream
	exec    *executorProc
	// batch: the executor's consumers ask for batch messages.
	batch bool
}

// executorProc is the executor under test, as a child process the kit
// can stop and start again.
type executorProc struct {
	command []string
	env     []string
	out     io.Writer
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func (p *executorProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.command[0], p.command[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, p.out, p.out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("conformance: start the executor: %w", err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited reports whether the process ended, and how.
func (p *executorProc) exited() (error, bool) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err, true
	default:
		return nil, false
	}
}

// signal sends sig and waits up to wait for the process to end (killing
// it then); it reports whether it ended by itself.
func (p *executorProc) signal(sig os.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

func (p *executorProc) stop(wait time.Duration) { p.signal(syscall.SIGTERM, wait) }

// Run starts tock and the executor, runs the checks, and returns their
// results (an error only when the kit itself could not run).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("conformance: no executor command")
	}
	if cfg.Handler == "" {
		cfg.Handler = "conformance"
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	checks, err := selected(cfg.Checks)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tock-conformance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	pg, drop, err := database(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, err
	}
	defer drop()

	etcd := &embedded.Etcd{Dir: dir}
	if err := etcd.Start(); err != nil {
		return nil, err
	}
	defer etcd.Stop()
	ns := &embedded.NATS{Dir: dir}
	if err := ns.Start(); err != nil {
		return nil, err
	}
	defer ns.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	nctx, stopNode := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- node.Run(nctx, node.Config{NodeID: "conformance", HTTPAddr: ln.Addr().String(), Listener: ln,
			PostgresURL: pg, EtcdEndpoints: []string{etcd.Endpoint()}, NATSURL: ns.URL(), Cluster: "conformance",
			// One bucket, so that executions due at one instant are fired
			// together and travel in one batch message to an executor
			// taking them (a batch is one bucket's runs of one instant).
			Roles: node.AllRoles, Buckets: 1, LeaseTTL: 5 * time.Second,
			Migrate: true, AuthNone: true, Ready: ready, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	defer func() { stopNode(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		return nil, fmt.Errorf("conformance: tock: %w", err)
	case <-time.After(60 * time.Second):
		return nil, errors.New("conformance: tock not ready after 60 s")
	}
	api, err := client.NewClientWithResponses("http://" + ln.Addr().String())
	if err != nil {
		return nil, err
	}

	nc, err := nats.Connect(ns.URL(), nats.Name("tock conformance kit"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	x := &executorProc{command: cfg.Command, env: append(os.Environ(), EnvNATSURL+"="+ns.URL(), EnvHandler+"="+cfg.Handler),
		out: cfg.Stderr}
	if err := x.start(); err != nil {
		return nil, err
	}
	defer x.stop(10 * time.Second)

	e := &env{api: api, handler: cfg.Handler, js: js, nc: nc, exec: x}
	if e.batch, err = e.form(ctx); err != nil {
		return nil, err
	}
	if e.batch {
		fmt.Fprintf(cfg.Out, "the executor takes batch messages (its consumers' metadata %s: %q): first dispatches come packed, the rest one a message; both forms are checked\n",
			wire.MetaBatch, wire.BatchFormV1)
	} else {
		fmt.Fprintf(cfg.Out, "the executor takes one execution per message (its consumers do not ask for batch messages); the batch checks do not apply\n")
	}
	var results []Result
	for _, c := range checks {
		if c.batch && !e.batch {
			r := Result{Name: c.name, Pass: true, NotApplicable: true, Reason: "the executor takes one execution per message"}
			results = append(results, r)
			fmt.Fprintf(cfg.Out, "N/A   %-32s         %s\n", r.Name, r.Reason)
			continue
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, c.limit)
		reason := c.run(cctx, e)
		cancel()
		if err, gone := x.exited(); gone {
			if reason == "" {
				reason = fmt.Sprintf("the executor exited (%v)", err)
			}
			if err := x.start(); err != nil { // for the next checks
				return results, err
			}
		}
		r := Result{Name: c.name, Pass: reason == "", Reason: reason, Took: time.Since(start)}
		results = append(results, r)
		verdict := "PASS"
		if !r.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(cfg.Out, "%-4s  %-32s %6.1fs  %s\n", verdict, r.Name, r.Took.Seconds(), or(r.Reason, c.doc))
	}
	return results, nil
}

// form waits (up to 30 s) for the executor to make its consumer of the
// handler's normal priority, and reads from its metadata whether it takes
// batch messages.
func (e *env) form(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := e.js.Consumer(ctx, wire.ExecStream, wire.ConsumerName(e.handler, domain.PriorityNormal))
		if err == nil {
			return wire.BatchForm(c.CachedInfo().Config.Metadata), nil
		}
		if err, gone := e.exec.exited(); gone {
			return false, fmt.Errorf("conformance: the executor exited before it made its consumers (%v)", err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("conformance: the executor made no consumer %s on %s within 30 s: does it serve the handler %q?",
				wire.ConsumerName(e.handler, domain.PriorityNormal), wire.ExecStream, e.handler)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// database makes a database of its own on pgURL's server and returns its
// URL and how to drop it.
func database(ctx context.Context, pgURL string) (string, func(), error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", nil, fmt.Errorf("conformance: postgres URL: %w", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "tock_conformance_" + hex.EncodeToString(b[:])
	// The server's maintenance database, which exists wherever the URL's
	// database may not yet.
	admin := *u
	admin.Path = "/postgres"
	pgURL = admin.String()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", nil, fmt.Errorf("conformance: postgres: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, fmt.Errorf("conformance: create database: %w", err)
	}
	conn.Close(ctx)
	u.Path = path.Join("/", name)
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(dctx, pgURL); err == nil {
			_, _ = conn.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(dctx)
		}
	}
	return u.String(), drop, nil
}
