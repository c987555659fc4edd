// Package pgha starts a PostgreSQL cluster managed by Patroni for tests:
// a primary and a synchronous standby on loopback, on free ports, in
// temporary directories, with an etcd (tock's embedded one) as Patroni's
// distributed configuration store. It offers the multi-host URL tockd
// connects with, Patroni's failover and switchover, and kill -9 of the
// primary.
//
// It needs Debian's patroni package (scripts/ensure-patroni.sh installs
// it) and PostgreSQL's binaries in BinDir. Postgres refuses to run as
// root: run as root, the members run as the user postgres.
package pgha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tock-sched/tock/internal/embedded"
)

// BinDir is where PostgreSQL's binaries are (Debian's PostgreSQL 15)
// unless TOCK_PG_BINDIR says otherwise.
const BinDir = "/usr/lib/postgresql/15/bin"

// Config is the cluster to start.
type Config struct {
	// Etcd is the etcd endpoint (http://127.0.0.1:port), or several comma
	// separated (a cluster's members), Patroni keeps
	// its leader key in.
	Etcd string
	// Members is the member count (default 2: a primary and a standby).
	Members int
	// Async turns synchronous_mode off: the standby replicates
	// asynchronously, and a failover may lose committed transactions
	// (for the experiment in docs/postgres.md).
	Async bool
	// TTL is the leader key's TTL in seconds (default 10): how long a
	// dead primary keeps its leadership.
	TTL int
	// Log receives Patroni's output (nil: discarded).
	Log io.Writer
}

// Member is one Patroni member: a Postgres and Patroni's REST API.
type Member struct {
	Name    string
	PGPort  int
	APIPort int
	Dir     string
	cmd     *exec.Cmd
	done    chan struct{}
}

// API is the base URL of the member's Patroni REST API.
func (m *Member) API() string { return "http://127.0.0.1:" + strconv.Itoa(m.APIPort) }

// Cluster is a running Patroni cluster.
type Cluster struct {
	Scope   string
	Members []*Member
	cfg     Config
	dir     string
	stopped sync.Once
}

// Available reports why Patroni clusters cannot run here ("" if they can).
func Available() string {
	if _, err := exec.LookPath("patroni"); err != nil {
		return "patroni is not installed (scripts/ensure-patroni.sh installs it)"
	}
	if _, err := os.Stat(filepath.Join(binDir(), "postgres")); err != nil {
		return "no PostgreSQL binaries in " + binDir()
	}
	return ""
}

func binDir() string {
	if d := os.Getenv("TOCK_PG_BINDIR"); d != "" {
		return d
	}
	return BinDir
}

// Start starts the cluster's members and waits until one leads and, in
// synchronous mode, another is its synchronous standby. Stop ends it.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Members == 0 {
		cfg.Members = 2
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "tock-patroni-")
	if err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	c := &Cluster{Scope: filepath.Base(dir), cfg: cfg, dir: dir}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	cred, err := credential()
	if err != nil {
		return err
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return fmt.Errorf("pgha: %w", err)
	}
	for i := range c.cfg.Members {
		m, err := c.newMember(i, cred)
		if err != nil {
			return err
		}
		c.Members = append(c.Members, m)
		if err := c.run(m, cred); err != nil {
			return err
		}
		if i == 0 { // the first bootstraps; the others copy it
			if _, err := c.waitLeader(ctx, ""); err != nil {
				return err
			}
		}
	}
	return c.WaitHealthy(ctx)
}

// credential is the user postgres when running as root, else nil (this
// process's own user).
func credential() (*syscall.Credential, error) {
	if os.Getuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgha: running as root and Postgres refuses root: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) newMember(i int, cred *syscall.Credential) (*Member, error) {
	pg, err := embedded.FreePort()
	if err != nil {
		return nil, err
	}
	api, err := embedded.FreePort()
	if err != nil {
		return nil, err
	}
	m := &Member{Name: fmt.Sprintf("pg%d", i), PGPort: pg, APIPort: api, Dir: filepath.Join(c.dir, fmt.Sprintf("pg%d", i))}
	if err := os.MkdirAll(m.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "patroni.yml"), []byte(c.yaml(m)), 0o600); err != nil {
		return nil, fmt.Errorf("pgha: %w", err)
	}
	if cred != nil {
		for _, p := range []string{m.Dir, filepath.Join(m.Dir, "patroni.yml")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgha: %w", err)
			}
		}
	}
	return m, nil
}

// yaml is member m's Patroni configuration. Every connection on loopback
// is trusted: the cluster is for tests and local experiments only.
func (c *Cluster) yaml(m *Member) string {
	sync := "true"
	if c.cfg.Async {
		sync = "false"
	}
	etcd := strings.ReplaceAll(c.cfg.Etcd, "http://", "") // one endpoint, or several comma separated
	return fmt.Sprintf(`scope: %[1]s
namespace: /patroni/
name: %[2]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[3]d
  connect_address: 127.0.0.1:%[3]d
etcd3:
  hosts: %[4]s
  protocol: http
bootstrap:
  dcs:
    ttl: %[5]d
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: %[6]s
    synchronous_mode_strict: false
    # While etcd has no quorum, the primary stays primary as long as it
    # reaches every other member (tock's etcd is Patroni's DCS too: an
    # etcd outage must not take Postgres down with it).
    failsafe_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 60
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 5
        max_replication_slots: 5
        shared_buffers: 32MB
        fsync: "on"
  initdb:
    - encoding: UTF8
    - auth-local: trust
    - auth-host: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[7]d
  connect_address: 127.0.0.1:%[7]d
  data_dir: %[8]s/data
  bin_dir: %[9]s
  pgpass: %[8]s/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %[8]s
`, c.Scope, m.Name, m.APIPort, etcd, c.cfg.TTL, sync, m.PGPort, m.Dir, binDir())
}

// run starts member m's Patroni (as cred's user if not nil).
func (c *Cluster) run(m *Member, cred *syscall.Credential) error {
	cmd := exec.Command("patroni", filepath.Join(m.Dir, "patroni.yml"))
	cmd.Dir = m.Dir
	cmd.Stdout, cmd.Stderr = prefixed(c.cfg.Log, m.Name), prefixed(c.cfg.Log, m.Name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Env = append(os.Environ(), "HOME="+m.Dir)
	// The postmaster inherits Patroni's output: Wait must not wait for a
	// postmaster that outlives it.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgha: start patroni %s: %w", m.Name, err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(m.done) }()
	return nil
}

// URL is the multi-host URL of the cluster's database db that connects
// to whichever member is the primary (target_session_attrs=read-write).
func (c *Cluster) URL(db string) string {
	hosts := make([]string, len(c.Members))
	for i, m := range c.Members {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(m.PGPort)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/" + db +
		"?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// MemberURL is the URL of member m's database db alone.
func (c *Cluster) MemberURL(m *Member, db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", m.PGPort, db)
}

// State is Patroni's view of the cluster (GET /cluster).
type State struct {
	Members []struct {
		Name     string `json:"name"`
		Role     string `json:"role"`
		State    string `json:"state"`
		Timeline int    `json:"timeline"`
		Lag      any    `json:"lag"`
	} `json:"members"`
}

// State asks any member that answers for the cluster's state.
func (c *Cluster) State(ctx context.Context) (State, error) {
	var st State
	var last error
	for _, m := range c.Members {
		err := c.call(ctx, http.MethodGet, m.API()+"/cluster", nil, &st)
		if err == nil {
			return st, nil
		}
		last = err
	}
	return st, last
}

// Leader is the member that leads and takes writes, or nil.
func (c *Cluster) Leader(ctx context.Context) *Member {
	st, err := c.State(ctx)
	if err != nil {
		return nil
	}
	for _, sm := range st.Members {
		if sm.Role == "leader" && sm.State == "running" {
			m := c.member(sm.Name)
			// Patroni names the leader before its promotion ends; GET
			// /primary answers 200 once its Postgres takes writes.
			if m != nil && c.call(ctx, http.MethodGet, m.API()+"/primary", nil, nil) == nil {
				return m
			}
		}
	}
	return nil
}

func (c *Cluster) member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// waitLeader waits until a member other than not leads, and returns it.
func (c *Cluster) waitLeader(ctx context.Context, not string) (*Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		if l := c.Leader(ctx); l != nil && l.Name != not {
			return l, nil
		}
		select {
		case <-ctx.Done():
			st, err := c.State(context.Background())
			return nil, fmt.Errorf("pgha: no leader (other than %q): %w (state %+v, %v)", not, ctx.Err(), st, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitHealthy waits until a member leads and every other one streams
// from it (as its synchronous standby in synchronous mode).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	want := "replica"
	if !c.cfg.Async {
		want = "sync_standby"
	}
	for {
		st, err := c.State(ctx)
		if err == nil && c.healthy(st, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgha: cluster not healthy (a leader, %s members): %w (state %+v, %v)", want, ctx.Err(), st, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(st State, want string) bool {
	leaders, others := 0, 0
	for _, m := range st.Members {
		switch {
		case m.Role == "leader" && m.State == "running":
			leaders++
		case m.Role == want && (m.State == "streaming" || m.State == "running"):
			others++
		}
	}
	return leaders == 1 && others == len(c.Members)-1
}

// Switchover hands the primary role from the current leader to another
// member, gracefully, through Patroni's REST API; it returns the new
// leader once it runs.
func (c *Cluster) Switchover(ctx context.Context) (*Member, error) {
	l := c.Leader(ctx)
	if l == nil {
		return nil, errors.New("pgha: switchover: no leader")
	}
	body := map[string]string{"leader": l.Name}
	if err := c.call(ctx, http.MethodPost, l.API()+"/switchover", body, nil); err != nil {
		return nil, fmt.Errorf("pgha: switchover from %s: %w", l.Name, err)
	}
	return c.waitLeader(ctx, l.Name)
}

// Failover makes candidate (any other member if nil) the primary through
// Patroni's REST API, and returns it once it runs.
func (c *Cluster) Failover(ctx context.Context, candidate *Member) (*Member, error) {
	l := c.Leader(ctx)
	if l == nil {
		return nil, errors.New("pgha: failover: no leader")
	}
	if candidate == nil {
		for _, m := range c.Members {
			if m != l {
				candidate = m
				break
			}
		}
	}
	body := map[string]string{"candidate": candidate.Name}
	if err := c.call(ctx, http.MethodPost, candidate.API()+"/failover", body, nil); err != nil {
		return nil, fmt.Errorf("pgha: failover to %s: %w", candidate.Name, err)
	}
	return c.waitLeader(ctx, l.Name)
}

// KillPrimary kills the leader as a machine's crash would: Patroni's
// process and Postgres's postmaster, both with SIGKILL (the postmaster's
// children then end on their own). It returns the killed member; the
// standby takes over once the leader key expires (Config.TTL).
func (c *Cluster) KillPrimary(ctx context.Context) (*Member, error) {
	l := c.Leader(ctx)
	if l == nil {
		return nil, errors.New("pgha: kill primary: no leader")
	}
	c.kill(l)
	return l, nil
}

// KillPostmaster sends SIGKILL to the leader's postmaster only: its
// Patroni, still running and still leader, starts it again.
func (c *Cluster) KillPostmaster(ctx context.Context) (*Member, error) {
	l := c.Leader(ctx)
	if l == nil {
		return nil, errors.New("pgha: kill postmaster: no leader")
	}
	pid, err := postmasterPID(l)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("pgha: kill postmaster %d of %s: %w", pid, l.Name, err)
	}
	return l, nil
}

// WaitLeader waits until a member other than not leads.
func (c *Cluster) WaitLeader(ctx context.Context, not *Member) (*Member, error) {
	name := ""
	if not != nil {
		name = not.Name
	}
	return c.waitLeader(ctx, name)
}

// Restart starts a killed member's Patroni again: it rejoins as a
// standby (pg_rewind if needed).
func (c *Cluster) Restart(m *Member) error {
	cred, err := credential()
	if err != nil {
		return err
	}
	return c.run(m, cred)
}

// kill sends SIGKILL to member m's postmaster and Patroni, and waits for
// Patroni's end (its output pipes close once the postmaster, which
// inherited them, is gone too).
func (c *Cluster) kill(m *Member) {
	if pid, err := postmasterPID(m); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if m.cmd != nil && m.cmd.Process != nil {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
}

// postmasterPID is member m's postmaster's pid, from its postmaster.pid.
func postmasterPID(m *Member) (int, error) {
	b, err := os.ReadFile(filepath.Join(m.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgha: postmaster of %s: %w", m.Name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgha: postmaster of %s: bad pid %q", m.Name, line)
	}
	return pid, nil
}

// Stop stops every member (SIGTERM: Patroni stops its Postgres; SIGKILL
// after 15 s) and removes their directories.
func (c *Cluster) Stop() {
	c.stopped.Do(func() {
		for _, m := range c.Members {
			if m.cmd != nil && m.cmd.Process != nil {
				_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
			}
		}
		for _, m := range c.Members {
			if m.cmd != nil {
				select {
				case <-m.done:
				case <-time.After(15 * time.Second):
				}
			}
			c.kill(m)
		}
		_ = os.RemoveAll(c.dir)
	})
}

// call sends a JSON request to Patroni's REST API and decodes its JSON
// answer into out (if not nil).
func (c *Cluster) call(ctx context.Context, method, url string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// prefixed writes each write to w after "[name] ".
func prefixed(w io.Writer, name string) io.Writer {
	if w == io.Discard {
		return w
	}
	return &prefixWriter{w: w, prefix: "[" + name + "] "}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) > 0 {
			_, _ = io.WriteString(p.w, p.prefix)
			_, _ = p.w.Write(line)
		}
	}
	return len(b), nil
}
