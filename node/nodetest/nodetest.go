// Package nodetest starts tock nodes for end-to-end tests: in this
// process (node.Run in a goroutine) or as tockd processes a test may kill,
// on embedded etcd and NATS and a fresh PostgreSQL database, and hands out
// the generated API client pointed at them, with the helpers the tests
// share (waiting for a state, counting executions, reading metrics).
package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/client"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/store/storetest"
)

// Cluster is the cluster name of every node the harness starts: etcd keys
// live under /tock/e2e/.
const Cluster = "e2e"

// Buckets is the bucket count of the harness's clusters.
const Buckets = 16

// LeaseTTL is the etcd lease TTL of the harness's scheduler nodes.
const LeaseTTL = 2 * time.Second

// Targets is where the tests' HTTP targets listen (httptest servers on
// loopback), allowed on every node the harness starts; tock's own
// addresses, on loopback too, stay refused.
const Targets = "127.0.0.1"

// PoolConns is the pool size of every node the harness starts (and of
// stores opened on Env.PG). go test runs two packages at once and two
// tests of each in parallel, each with up to three nodes and their
// restarts: at tockd's default of 16 connections a node they came near
// Postgres's default max_connections (100). 8 keeps the production path
// (the scanner's own connections split off, see store.Open); the
// suite's peak is about 50 connections.
const PoolConns = 8

// Env is one test's dependencies: a fresh database, and embedded etcd and
// NATS servers the test may stop and restart. Everything ends with the
// test.
type Env struct {
	// PG is the database's URL, with pool_max_conns=PoolConns.
	PG   string
	Etcd *embedded.Etcd
	NATS *embedded.NATS
	// EtcdCluster and NATSCluster are set by NewClusters: then Etcd and
	// NATS are their first member, and nodes and executors are given
	// every member's address.
	EtcdCluster *embedded.EtcdCluster
	NATSCluster *embedded.NATSCluster
}

// NewClusters starts a test's dependencies with a 3-member etcd and a
// 3-server NATS cluster in place of single servers.
func NewClusters(t testing.TB) *Env {
	t.Helper()
	e := &Env{PG: withPoolConns(t, storetest.Postgres(t)), EtcdCluster: testenv.EtcdCluster(t), NATSCluster: testenv.NATSCluster(t)}
	e.Etcd, e.NATS = e.EtcdCluster.Members[0], e.NATSCluster.Servers[0]
	return e
}

// NATSURL is the NATS URL nodes and executors are given: every server's,
// comma separated, with NewClusters.
func (e *Env) NATSURL() string {
	if e.NATSCluster != nil {
		return e.NATSCluster.URL()
	}
	return e.NATS.URL()
}

// EtcdEndpoints are the etcd endpoints nodes and clients are given.
func (e *Env) EtcdEndpoints() []string {
	if e.EtcdCluster != nil {
		return e.EtcdCluster.Endpoints()
	}
	return []string{e.Etcd.Endpoint()}
}

// New starts a test's dependencies.
func New(t testing.TB) *Env {
	t.Helper()
	return &Env{PG: withPoolConns(t, storetest.Postgres(t)), Etcd: testenv.Etcd(t), NATS: testenv.NATS(t)}
}

// withPoolConns is the database URL pg with pool_max_conns=PoolConns.
func withPoolConns(t testing.TB, pg string) string {
	t.Helper()
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatalf("test database URL %q: %v", pg, err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(PoolConns))
	u.RawQuery = q.Encode()
	return u.String()
}

// Config is the configuration of an in-process node named id, listening
// on ln: every role, the API open (authentication has its own tests),
// the profiler on, logs discarded, and the tests' HTTP targets allowed.
func (e *Env) Config(id string, ln net.Listener) node.Config {
	return node.Config{
		NodeID:        id,
		HTTPAddr:      ln.Addr().String(),
		Listener:      ln,
		PostgresURL:   e.PG,
		EtcdEndpoints: e.EtcdEndpoints(),
		NATSURL:       e.NATSURL(),
		Cluster:       Cluster,
		Roles:         node.AllRoles,
		Buckets:       Buckets,
		LeaseTTL:      LeaseTTL,
		Migrate:       true,
		Pprof:         true,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		AuthNone:      true,
		HTTPAllow:     []string{Targets},
	}
}

// Node is a node the harness started.
type Node struct {
	// ID is the node's id.
	ID string
	// URL is the base URL of its API (http://127.0.0.1:port).
	URL string
	// Client is the generated API client pointed at URL.
	Client *client.ClientWithResponses
	// Cmd is the tockd process of a node started by StartProcess; nil for
	// one in this process.
	Cmd  *exec.Cmd
	stop func()
}

// Stop stops an in-process node and waits for its end; a node that
// returned an error fails the test. It is called at cleanup too, if the
// test did not.
func (n *Node) Stop() { n.stop() }

// Kill kills a process node with SIGKILL and waits for it.
func (n *Node) Kill(t testing.TB) {
	t.Helper()
	if err := n.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = n.Cmd.Wait()
}

// newNode is a Node at url, with its client.
func newNode(t testing.TB, id, url string) *Node {
	t.Helper()
	c, err := client.NewClientWithResponses(url)
	if err != nil {
		t.Fatal(err)
	}
	return &Node{ID: id, URL: url, Client: c}
}

// Start runs a node named id in this process, with Config.
func (e *Env) Start(t testing.TB, id string) *Node {
	t.Helper()
	return e.StartWith(t, id, nil)
}

// StartWith is Start with a change to the node's Config.
func (e *Env) StartWith(t testing.TB, id string, change func(*node.Config)) *Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config(id, ln)
	if change != nil {
		change(&cfg)
	}
	return StartConfig(t, cfg)
}

// StartConfig runs a node with cfg in this process and waits until it is
// ready; cfg.Listener must be set. The node stops at cleanup.
func StartConfig(t testing.TB, cfg node.Config) *Node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	cfg.Ready = ready
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("node %s: %v", cfg.NodeID, err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("node %s not ready after 60s", cfg.NodeID)
	}
	scheme := "http://"
	if cfg.TLS.Cert != "" {
		scheme = "https://"
	}
	n := newNode(t, cfg.NodeID, scheme+cfg.Listener.Addr().String())
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("node %s: %v", cfg.NodeID, err)
			}
		})
	}
	t.Cleanup(n.stop)
	return n
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Tockd is the path of a tockd binary built from this module, once per
// test binary (with the race detector when the test binary has it). It is
// built beside the test binary, in the work directory go test removes
// when it is done, or in a directory of its own under the OS's temporary
// directory if that one cannot be written.
func Tockd(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = buildTockd() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// BuildTockdAhead starts building Tockd's binary in the background, for
// a test binary whose tests will need it: the first of them then waits
// only for what is left of the build, not all of it. A TestMain calls it
// before m.Run.
func BuildTockdAhead() {
	go buildOnce.Do(func() { built, buildErr = buildTockd() })
}

// buildTockd builds tockd for Tockd and returns its path.
func buildTockd() (string, error) {
	dir := filepath.Dir(os.Args[0])
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
	} else if dir, err = os.MkdirTemp("", "tockd-e2e-"); err != nil {
		return "", fmt.Errorf("build tockd: %w", err)
	}
	path := filepath.Join(dir, "tockd")
	args := []string{"build", "-o", path}
	if raceEnabled {
		args = append(args, "-race")
	}
	// go test puts its own GOROOT/bin first on PATH, so "go" is the
	// toolchain running the test.
	if out, err := exec.Command("go", append(args, "github.com/tock-sched/tock/cmd/tockd")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build tockd: %w\n%s", err, out)
	}
	return path, nil
}

// Command is tockd run with args (tockd keys create ..., tockd maintain
// ...), as exec.Command makes it.
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(Tockd(t), args...)
}

// StartProcess runs a node named id as a tockd serve process (ServeArgs
// plus extra) and waits until it is ready. The process is killed at
// cleanup; its stderr is logged if the test failed.
func (e *Env) StartProcess(t testing.TB, id string, extra ...string) *Node {
	t.Helper()
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return e.StartProcessAt(t, id, fmt.Sprintf("127.0.0.1:%d", port), extra...)
}

// StartProcessAt is StartProcess with its API on addr (host:port): a node
// restarted where a load balancer in front of it still looks.
func (e *Env) StartProcessAt(t testing.TB, id, addr string, extra ...string) *Node {
	t.Helper()
	return e.startProcess(t, id, addr, nil, nil, extra...)
}

// StartProcessEnv is StartProcess with env added to the process's
// environment and its standard error also written to stderr, if not nil.
func (e *Env) StartProcessEnv(t testing.TB, id string, env []string, stderr io.Writer, extra ...string) *Node {
	t.Helper()
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return e.startProcess(t, id, fmt.Sprintf("127.0.0.1:%d", port), env, stderr, extra...)
}

func (e *Env) startProcess(t testing.TB, id, addr string, env []string, also io.Writer, extra ...string) *Node {
	t.Helper()
	cmd := Command(t, e.ServeArgs(id, addr, extra...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr SyncBuffer
	cmd.Stderr = &stderr
	if also != nil {
		cmd.Stderr = io.MultiWriter(&stderr, also)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("tockd %s stderr:\n%s", id, stderr.String())
		}
	})
	n := newNode(t, id, "http://"+addr)
	n.Cmd = cmd
	n.stop = func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	testenv.WaitFor(t, 60*time.Second, "tockd "+id+" ready", func() bool {
		resp, err := http.Get(n.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return n
}

// ServeArgs are the arguments of a tockd serve process named id on addr,
// configured as Config configures an in-process node, with the API open
// (--auth none) unless extra says otherwise.
func (e *Env) ServeArgs(id, addr string, extra ...string) []string {
	args := []string{"serve",
		"--node-id", id, "--http-addr", addr, "--postgres-url", e.PG,
		"--etcd-endpoints", strings.Join(e.EtcdEndpoints(), ","), "--nats-url", e.NATSURL(),
		"--cluster", Cluster, "--buckets", fmt.Sprint(Buckets), "--lease-ttl", LeaseTTL.String(), "--log-level", "warn",
		"--http-allow", Targets}
	if !slices.Contains(extra, "--auth") {
		args = append(args, "--auth", "none")
	}
	return append(args, extra...)
}

// EtcdClient is a client of the test's etcd, closed at cleanup.
func (e *Env) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.EtcdEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Owners counts the bucket owner keys per node, as etcdctl would show
// them; nil while etcd does not answer.
func Owners(t testing.TB, cli *clientv3.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/tock/"+Cluster+"/owners/", clientv3.WithPrefix())
	if err != nil {
		return nil // etcd down: nobody is known to own anything
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		out[string(kv.Value)]++
	}
	return out
}

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, d, what, cond)
}

// SyncBuffer is a bytes.Buffer a process writes while a test reads it
// (a command's Stdout or Stderr).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
