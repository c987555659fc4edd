package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/secret"
	"github.com/tock-sched/tock/telemetry/tracing"
	"github.com/tock-sched/tock/wire"
)

// Role is one part of what a node does; a node runs any set of them.
type Role string

// The roles, in the order they are listed.
const (
	// RoleAPI serves the REST API.
	RoleAPI Role = "api"
	// RoleScheduler owns buckets and fires their jobs' runs.
	RoleScheduler Role = "scheduler"
	// RoleExecutor runs the attempts of the built-in handlers (http, nats).
	RoleExecutor Role = "executor"
	// RoleRecorder writes what executors report to PostgreSQL.
	RoleRecorder Role = "recorder"
)

// allRoles is every role, in order.
var allRoles = []Role{RoleAPI, RoleScheduler, RoleExecutor, RoleRecorder}

// Roles is a set of roles. The zero value is empty; Config.WithDefaults
// turns an empty set into AllRoles.
type Roles uint8

// AllRoles is every role: what tockd runs by default.
var AllRoles = RolesOf(allRoles...)

// RolesOf is the set of rs.
func RolesOf(rs ...Role) Roles {
	var s Roles
	for _, r := range rs {
		for i, known := range allRoles {
			if r == known {
				s |= 1 << i
			}
		}
	}
	return s
}

// ParseRoles reads role names (api, scheduler, executor, recorder) as
// --roles gives them.
func ParseRoles(names []string) (Roles, error) {
	var s Roles
	for _, n := range names {
		r := RolesOf(Role(n))
		if r == 0 {
			return 0, fmt.Errorf("--roles: unknown role %q (want api, scheduler, executor, recorder)", n)
		}
		s |= r
	}
	return s, nil
}

// Has reports whether r is in the set.
func (s Roles) Has(r Role) bool { return s&RolesOf(r) != 0 }

// needsStore reports whether any role of the set uses PostgreSQL.
func (s Roles) needsStore() bool {
	return s.Has(RoleAPI) || s.Has(RoleScheduler) || s.Has(RoleRecorder)
}

// needsEtcd reports whether any role of the set uses etcd: the scheduler
// keeps its membership and buckets there, the API reads them.
func (s Roles) needsEtcd() bool { return s.Has(RoleAPI) || s.Has(RoleScheduler) }

// String lists the roles, comma separated, as --roles takes them.
func (s Roles) String() string {
	var names []string
	for _, r := range allRoles {
		if s.Has(r) {
			names = append(names, string(r))
		}
	}
	return strings.Join(names, ",")
}

// Config is a tockd node's configuration. The zero values of most fields
// work (see WithDefaults); the addresses of PostgreSQL, etcd and NATS are
// required by the roles that use them.
type Config struct {
	// NodeID names the node in etcd, in logs and in executions' fired_by
	// (default partition.DefaultNodeID: hostname-pid).
	NodeID string
	// HTTPAddr is where the REST API, /metrics and health checks listen
	// (default 127.0.0.1:8080), unless Listener is set.
	HTTPAddr      string
	PostgresURL   string
	EtcdEndpoints []string
	// NATSURL is one NATS server's URL, or several comma separated (the
	// servers of a cluster): the node connects to any that answers and
	// moves to another when it goes.
	NATSURL string
	// StreamReplicas is how many copies JetStream keeps of each of tock's
	// streams, their consumers and key-value buckets, 1 to 5 (default 1;
	// 3 on a NATS cluster). A change is applied to the existing streams in
	// place when a node with the scheduler, executor or recorder role
	// starts.
	StreamReplicas int
	// NoChangeFeed turns the change feed off: nothing is published to it
	// and GET /v1/changes answers 503 (package changes).
	NoChangeFeed bool
	// NoUI turns the web dashboard off: an api node then answers /ui/
	// with 404 (package ui).
	NoUI bool
	// Cluster names the cluster: etcd keys live under /tock/<Cluster>/
	// (default "default").
	Cluster string
	// Roles are the roles this node runs (default AllRoles).
	Roles Roles
	// Buckets is the cluster's bucket count, used only when the cluster
	// is created (then stored; default 256).
	Buckets int
	// LeaseTTL is the etcd lease TTL of a scheduler node (default 5s).
	LeaseTTL time.Duration
	// Migrate runs the database migrations at start.
	Migrate bool
	// Logger is where the node logs (default slog.Default()).
	Logger *slog.Logger
	// Tracing, if set, traces the node's work (tockd starts it from the
	// OTEL_* environment, see package telemetry/tracing); nil: off.
	Tracing *tracing.Tracing
	// TraceDB also traces the SQL statements run inside a traced request
	// or operation (otelpgx), with Tracing.
	TraceDB bool
	// Pprof serves Go's profiler under /debug/pprof/ on the HTTP address
	// (only with the API open or not served) and on MetricsAddr.
	Pprof bool
	// Retry is the cluster's default retry policy (api role).
	Retry domain.RetryPolicy
	// Retention is how long execution history is kept for namespaces
	// without their own, CompletedJobRetention how long a completed
	// one-shot job is kept (see store.ApplyRetention); zero Retention
	// keeps history for ever.
	Retention, CompletedJobRetention time.Duration
	// ArchiveDir, if set, is where each day of execution history is
	// written (archive.Day) before retention drops it; a day that cannot
	// be written is not dropped.
	ArchiveDir string
	// AuditRetention is how long the audit trail is kept.
	AuditRetention time.Duration
	// HistoryRetention is how long the hourly history rollups are kept
	// (package history; zero: its default, 400 days).
	HistoryRetention time.Duration
	// Missed and Overlap are the cluster's default missed-run and overlap
	// policies (api role: stored with new jobs; scheduler role: for jobs
	// stored without one).
	Missed  domain.MissedPolicy
	Overlap string
	// Executor role: attempts in flight per queue and per handler, the
	// ack wait of the queues' consumers, and the per-handler breakers.
	ExecutorConcurrency int
	ExecutorMaxPerKey   int
	ExecutorAckWait     time.Duration
	Breaker             executor.BreakerConfig
	// ShutdownGrace is how long, once Run's context ends, the executor
	// lets its running attempts finish before it interrupts them and
	// hands them back (executor.Config.ShutdownTimeout); 0 means
	// DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// FireBacklogFor and FireBacklogMin bound how far firing runs ahead
	// of execution (scanner.Config.BacklogFor and MinBacklog; 0: their
	// defaults); a negative FireBacklogFor turns backpressure off, and
	// firing then goes on at the due rate however much waits.
	FireBacklogFor time.Duration
	FireBacklogMin int
	// BackfillRate is the most backfill runs a scheduler node creates per
	// second (backfill.Config.Rate); 0 means backfill.DefaultRate.
	BackfillRate float64
	// NotifyMaxBackoff caps the wait between attempts to deliver a
	// notification (notify.Config.MaxBackoff); 0 means its default.
	NotifyMaxBackoff time.Duration
	// NotifyLease is how long a node holds a notification it delivers
	// (notify.Config.Lease); 0 means its default.
	NotifyLease time.Duration
	// RescueWaitAfter and RescueSilentAfter are when the rescue of stuck
	// executions asks JetStream about a published execution that no
	// executor started, and about a running one that gave no sign of
	// life (maintenance.StuckRescuerConfig's WaitAfter and SilentAfter);
	// 0 means their defaults.
	RescueWaitAfter   time.Duration
	RescueSilentAfter time.Duration
	// LogMaxCap is the largest log cap a job may ask for
	// (handler.log.cap_bytes); 0 means domain.DefaultMaxLogCap.
	LogMaxCap int64
	// HTTPAllowPrivate, HTTPAllow and HTTPDeny are the rules of what the
	// http handler may call (egress.Rules), for the api role (a job's URL
	// is checked when it is created) and the executor role (every
	// connection is checked as it is made). The zero values refuse
	// loopback, private, link-local, unique-local and metadata addresses.
	// Whatever they say, tock's own addresses are refused: the API's,
	// etcd's, NATS's and PostgreSQL's as this Config names them, and
	// HTTPOwn.
	HTTPAllowPrivate    bool
	HTTPAllow, HTTPDeny []string
	HTTPOwn             []egress.Own
	// AllowedHosts and CORSOrigins guard the API against browsers (see
	// api.Config).
	AllowedHosts, CORSOrigins []string
	// AuthNone serves the API without authentication (tockd serve --auth
	// none, tockd dev); otherwise every call needs an API key, and an api
	// node refuses to start while no key exists (ErrNoKeys).
	AuthNone bool
	// MetricsAddr, if set, is a second listener serving /metrics without
	// authentication (and the profiler, with Pprof), for Prometheus on a
	// network the API's clients cannot reach.
	MetricsAddr string
	// Limits are the API's rate limits and quotas for keys, and its
	// requests' budget.
	Limits api.Limits
	// APIPoolConns is the size of the API's own connection pool (the api
	// role; store.ForRequests), apart from the scheduler's and the
	// recorder's (DefaultAPIPoolConns when 0; negative: the API shares
	// the node's pool). APIStatementTimeout cuts each of the API's
	// statements (0: none).
	APIPoolConns        int
	APIStatementTimeout time.Duration
	// JWT, when its URL is set, accepts JWT bearer tokens verified with
	// the JWK Set at that URL (the api role).
	JWT JWTSettings
	// Secrets are the keys of --secret-key-file (LoadKeyring): the api
	// role seals secret headers with them, the executor role opens them.
	// Nil: no key, and jobs with secret headers are refused.
	Secrets *secret.Keyring
	// TLS, once its certificate and key are set, serves the HTTP address
	// over TLS (see APITLS).
	TLS APITLS
	// NATSAuth and EtcdAuth authenticate the node's connections to NATS
	// and etcd and check those servers' certificates. PostgreSQL's are
	// in PostgresURL (sslmode, sslrootcert, sslcert, sslkey).
	NATSAuth NATSAuth
	EtcdAuth EtcdAuth
	// Listener, if set, is used instead of listening on HTTPAddr.
	Listener net.Listener
	// Ready, if set, is closed once every role has started.
	Ready chan<- struct{}
}

// WithDefaults returns c with the fields it leaves zero set to their
// defaults, those of tockd serve's flags.
func (c Config) WithDefaults() Config {
	if c.NodeID == "" {
		c.NodeID = partition.DefaultNodeID()
	}
	if c.HTTPAddr == "" && c.Listener == nil {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.Cluster == "" {
		c.Cluster = "default"
	}
	if c.Roles == 0 {
		c.Roles = AllRoles
	}
	if c.Buckets == 0 {
		c.Buckets = 256
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.StreamReplicas == 0 {
		c.StreamReplicas = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.APIPoolConns == 0 {
		c.APIPoolConns = DefaultAPIPoolConns
	}
	return c
}

// DefaultAPIPoolConns is Config.APIPoolConns's default, that of
// --api-pool-conns.
const DefaultAPIPoolConns = 4

// DefaultShutdownGrace is Config.ShutdownGrace's default, that of
// --shutdown-grace.
const DefaultShutdownGrace = 30 * time.Second

// validate rejects, before any connection is made, a configuration that
// cannot work. It reads no file: the certificates and credentials named
// are loaded by Run (see checkFiles).
func (c *Config) validate() error {
	switch {
	case c.Buckets < 1:
		return fmt.Errorf("buckets %d: want at least 1", c.Buckets)
	case c.LeaseTTL <= 0:
		return fmt.Errorf("lease TTL %s: want a positive duration", c.LeaseTTL)
	case c.NATSURL == "":
		return errors.New("the NATS URL is required: every role uses NATS")
	case c.StreamReplicas < 1 || c.StreamReplicas > wire.MaxReplicas:
		return fmt.Errorf("--stream-replicas %d: want 1 to %d (3 on a NATS cluster of 3)", c.StreamReplicas, wire.MaxReplicas)
	case c.Roles.needsStore() && c.PostgresURL == "":
		return fmt.Errorf("roles %s need a PostgreSQL URL", c.Roles)
	case c.Roles.needsEtcd() && len(c.EtcdEndpoints) == 0:
		return fmt.Errorf("roles %s need etcd endpoints", c.Roles)
	case c.ShutdownGrace < 0:
		return fmt.Errorf("--shutdown-grace %s: want a positive duration", c.ShutdownGrace)
	case c.ExecutorConcurrency < 0 || c.ExecutorMaxPerKey < 0 || c.FireBacklogMin < 0 || c.BackfillRate < 0:
		return errors.New("executor concurrency, max per handler, fire backlog min and backfill rate may not be negative")
	}
	if err := c.TLS.check(); err != nil {
		return err
	}
	if err := c.NATSAuth.check(); err != nil {
		return err
	}
	if err := c.EtcdAuth.check(c.EtcdEndpoints); err != nil {
		return err
	}
	if err := c.JWT.Check(); err != nil {
		return err
	}
	if c.Roles.Has(RoleAPI) && !c.AuthNone && c.Pprof && c.MetricsAddr == "" {
		return errors.New("--pprof: the profiler has no authentication; with API keys required it is served only on --metrics-addr")
	}
	return nil
}

// Check rejects JWT settings that would accept tokens of any issuer or
// audience, or fetch the keys over a network in clear text.
func (s JWTSettings) Check() error {
	if s.URL == "" {
		if s.Issuer != "" || s.Audience != "" {
			return errors.New("--jwt-issuer and --jwt-audience need --jwks-url")
		}
		return nil
	}
	if s.Issuer == "" || s.Audience == "" {
		return errors.New("--jwks-url needs --jwt-issuer and --jwt-audience: without them a token of any issuer or audience signed by that JWK Set would do")
	}
	// Keys fetched in clear text could be swapped on the way, and with
	// them any token forged: https, or http on this machine only.
	u, err := url.Parse(s.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && LoopbackOnly(u.Host) == nil)) {
		return fmt.Errorf("--jwks-url %q: want an https:// URL (http:// only on loopback)", s.URL)
	}
	return nil
}
