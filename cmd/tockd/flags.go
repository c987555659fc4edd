package main

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/telemetry/tracing"
)

// ExecutionFlags tune how executions are retried and run; serve and dev
// share them.
type ExecutionFlags struct {
	RetryMaxAttempts    int           `name:"retry-max-attempts" env:"TOCK_RETRY_MAX_ATTEMPTS" default:"3" help:"Default attempts per execution, for jobs whose retry policy leaves it out (api role)."`
	RetryInitialBackoff time.Duration `name:"retry-initial-backoff" env:"TOCK_RETRY_INITIAL_BACKOFF" default:"1s" help:"Default delay before the second attempt (api role)."`
	RetryMaxBackoff     time.Duration `name:"retry-max-backoff" env:"TOCK_RETRY_MAX_BACKOFF" default:"5m" help:"Default longest delay between attempts (api role)."`
	RetryMultiplier     float64       `name:"retry-multiplier" env:"TOCK_RETRY_MULTIPLIER" default:"2" help:"Default growth of the delay per attempt (api role)."`
	RetryJitter         string        `name:"retry-jitter" env:"TOCK_RETRY_JITTER" default:"full" enum:"full,equal,none" help:"Default jitter: full, equal or none (api role)."`

	MissedPolicy string        `name:"missed-policy" env:"TOCK_MISSED_POLICY" default:"latest" enum:"skip,latest,all" help:"Default missed-run policy for jobs that leave it out: skip, latest or all (api and scheduler roles)."`
	MissedGrace  time.Duration `name:"missed-grace" env:"TOCK_MISSED_GRACE" default:"60s" help:"Default grace: a run fired this late still counts as on time (api and scheduler roles)."`
	MissedMax    int           `name:"missed-max" env:"TOCK_MISSED_MAX" default:"100" help:"Default most missed runs the all policy fires at once, 1 to 1000 (api and scheduler roles)."`
	Overlap      string        `name:"overlap" env:"TOCK_OVERLAP" default:"allow" enum:"allow,skip,buffer_one,cancel_running" help:"Default overlap policy for jobs that leave it out (api role)."`

	FireBacklogFor time.Duration `name:"fire-backlog-for" env:"TOCK_FIRE_BACKLOG_FOR" default:"3s" help:"Backpressure: firing waits while more executions wait for executors than they take in this long (at their measured rate; at least --fire-backlog-min), and the runs held back fire late; a negative value turns it off (scheduler role)."`
	FireBacklogMin int           `name:"fire-backlog-min" env:"TOCK_FIRE_BACKLOG_MIN" default:"5000" help:"The least backlog firing waits for, whatever the executors' rate (scheduler role)."`

	BackfillRate float64 `name:"backfill-rate" env:"TOCK_BACKFILL_RATE" default:"200" help:"Most backfill runs a scheduler node creates per second, across all its backfills (low priority, paced so that on-time runs are never delayed)."`

	NotifyMaxBackoff  time.Duration `name:"notify-max-backoff" env:"TOCK_NOTIFY_MAX_BACKOFF" default:"5m" help:"Longest wait between two attempts to deliver a notification whose receiver fails (it is retried for 24h) (scheduler role)."`
	RescueWaitAfter   time.Duration `name:"rescue-wait-after" env:"TOCK_RESCUE_WAIT_AFTER" default:"1m" help:"A published execution no executor has started for this long is published again if JetStream no longer holds its message (a lost message, or a recording Postgres lost in a failover) (scheduler role)."`
	LogMaxCap         int64         `name:"log-max-cap" env:"TOCK_LOG_MAX_CAP" default:"67108864" help:"The largest log cap, in bytes, a job may ask for (handler.log.cap_bytes; the default cap is 1 MiB) (api role)."`
	RescueSilentAfter time.Duration `name:"rescue-silent-after" env:"TOCK_RESCUE_SILENT_AFTER" default:"1m" help:"A running execution whose attempt gave no sign of life for this long is taken for lost if JetStream no longer holds its message (scheduler role); keep it above the executors' heartbeat interval (10s)."`
	NotifyLease       time.Duration `name:"notify-lease" env:"TOCK_NOTIFY_LEASE" default:"30s" help:"How long a node holds a notification it is delivering: if it dies, another node delivers it (under the same id) this long after it began; keep it above the receivers' answer time (deliveries time out after 10s) (scheduler role)."`

	Retention             retention `name:"retention" env:"TOCK_RETENTION" default:"90d" help:"How long execution history is kept, for namespaces without their own (PUT /v1/namespaces/{ns}): days (90d) or a duration."`
	CompletedJobRetention retention `name:"completed-job-retention" env:"TOCK_COMPLETED_JOB_RETENTION" default:"7d" help:"How long a completed one-shot job is kept before it is deleted."`
	AuditRetention        retention `name:"audit-retention" env:"TOCK_AUDIT_RETENTION" default:"400d" help:"How long the audit trail (GET /v1/audit) is kept: days (400d) or a duration."`
	HistoryRetention      retention `name:"history-retention" env:"TOCK_HISTORY_RETENTION" default:"400d" help:"How long the hourly rollups of execution history (GET /v1/stats/series, the dashboard's charts) are kept: days (400d) or a duration; per-minute rollups are kept 35 days (scheduler role)."`
	ArchiveDir            string    `name:"archive-dir" env:"TOCK_ARCHIVE_DIR" help:"Write each day of execution history to Parquet files in this directory before retention drops it (set it on every node, to the same shared directory)."`

	ExecutorConcurrency int           `name:"executor-concurrency" env:"TOCK_EXECUTOR_CONCURRENCY" default:"16" help:"Attempts in flight per queue (http, nats) in this executor process."`
	ExecutorMaxPerKey   int           `name:"executor-max-per-handler" env:"TOCK_EXECUTOR_MAX_PER_HANDLER" default:"0" help:"Attempts in flight per handler (HTTP host, NATS subject) in this process; 0: no limit beyond --executor-concurrency."`
	ExecutorAckWait     time.Duration `name:"executor-ack-wait" env:"TOCK_EXECUTOR_ACK_WAIT" default:"30s" help:"How long a silent executor keeps an attempt before it is given to another (heartbeats go every third of it)."`
	ShutdownGrace       time.Duration `name:"shutdown-grace" env:"TOCK_SHUTDOWN_GRACE" default:"30s" help:"At SIGTERM, how long running attempts may finish before they are interrupted and handed back to other executors (executor role); keep Kubernetes' terminationGracePeriodSeconds above it."`

	BreakerDisabled    bool          `name:"breaker-disabled" env:"TOCK_BREAKER_DISABLED" help:"Turn the executors' per-handler circuit breakers off."`
	BreakerFailureRate float64       `name:"breaker-failure-rate" env:"TOCK_BREAKER_FAILURE_RATE" default:"0.5" help:"Failure rate that opens a handler's breaker."`
	BreakerMinRequests uint32        `name:"breaker-min-requests" env:"TOCK_BREAKER_MIN_REQUESTS" default:"10" help:"Attempts in a window before the breaker may open."`
	BreakerWindow      time.Duration `name:"breaker-window" env:"TOCK_BREAKER_WINDOW" default:"1m" help:"Window over which the breaker counts attempts."`
	BreakerOpenFor     time.Duration `name:"breaker-open-for" env:"TOCK_BREAKER_OPEN_FOR" default:"30s" help:"How long an open breaker waits before it lets a probe through (half-open)."`

	HTTPAllow []string `name:"http-allow" env:"TOCK_HTTP_ALLOW" sep:"," help:"CIDRs, IP addresses and host names (*.example.internal for subdomains) the http handler may call although they are loopback, private, link-local, unique-local or metadata addresses, comma separated (api and executor roles). tock's own etcd, NATS, PostgreSQL and API addresses stay refused."`
	HTTPDeny  []string `name:"http-deny" env:"TOCK_HTTP_DENY" sep:"," help:"CIDRs, IP addresses and host names the http handler never calls, comma separated; they win over --http-allow (api and executor roles)."`
}

// apply copies the flags into cfg.
func (f ExecutionFlags) apply(cfg *node.Config) {
	cfg.Retry = domain.RetryPolicy{
		MaxAttempts:    f.RetryMaxAttempts,
		InitialBackoff: f.RetryInitialBackoff.String(),
		MaxBackoff:     f.RetryMaxBackoff.String(),
		Multiplier:     f.RetryMultiplier,
		Jitter:         f.RetryJitter,
	}
	cfg.Retention, cfg.CompletedJobRetention = time.Duration(f.Retention), time.Duration(f.CompletedJobRetention)
	cfg.ArchiveDir = f.ArchiveDir
	cfg.AuditRetention = time.Duration(f.AuditRetention)
	cfg.HistoryRetention = time.Duration(f.HistoryRetention)
	cfg.Missed = domain.MissedPolicy{Policy: f.MissedPolicy, Grace: f.MissedGrace.String(), Max: f.MissedMax}
	cfg.Overlap = f.Overlap
	cfg.BackfillRate = f.BackfillRate
	cfg.NotifyMaxBackoff, cfg.NotifyLease = f.NotifyMaxBackoff, f.NotifyLease
	cfg.FireBacklogFor, cfg.FireBacklogMin = f.FireBacklogFor, f.FireBacklogMin
	cfg.RescueWaitAfter, cfg.RescueSilentAfter = f.RescueWaitAfter, f.RescueSilentAfter
	cfg.LogMaxCap = f.LogMaxCap
	cfg.ExecutorConcurrency = f.ExecutorConcurrency
	cfg.ExecutorMaxPerKey = f.ExecutorMaxPerKey
	cfg.ExecutorAckWait = f.ExecutorAckWait
	cfg.ShutdownGrace = f.ShutdownGrace
	cfg.HTTPAllow, cfg.HTTPDeny = f.HTTPAllow, f.HTTPDeny
	cfg.Breaker = executor.BreakerConfig{
		Disabled:    f.BreakerDisabled,
		FailureRate: f.BreakerFailureRate,
		MinRequests: f.BreakerMinRequests,
		Window:      f.BreakerWindow,
		OpenFor:     f.BreakerOpenFor,
	}
}

// retention is a flag of days ("90d") or a Go duration, as
// domain.ParseRetention reads it.
type retention time.Duration

// UnmarshalText parses the flag's value.
func (r *retention) UnmarshalText(b []byte) error {
	d, err := domain.ParseRetention(string(b))
	if err != nil {
		return err
	}
	*r = retention(d)
	return nil
}

// HTTPFlags guard the REST API against browsers (other sites' pages, DNS
// rebinding); serve and dev share them.
type HTTPFlags struct {
	AllowedHosts []string `name:"allowed-hosts" env:"TOCK_ALLOWED_HOSTS" sep:"," help:"Host names or addresses (any port; host:port for one port) that requests may name in their Host header, comma separated; others get 421. Default: any host for serve; localhost, 127.0.0.1 and [::1] for dev. * allows any."`
	CORSOrigins  []string `name:"cors-origins" env:"TOCK_CORS_ORIGINS" sep:"," help:"Browser origins (https://console.example.com) allowed to call the API from their pages, comma separated; * allows any. Default: none, and no CORS headers are sent."`
}

// apply copies the flags into cfg; dev's API answers only for loopback
// names unless told otherwise (node.RunDev).
func (f HTTPFlags) apply(cfg *node.Config) {
	cfg.AllowedHosts, cfg.CORSOrigins = f.AllowedHosts, f.CORSOrigins
}

// LimitFlags are the API's rate limits and quotas (api.Limits), for the
// requests of API keys; 0 turns one off.
type LimitFlags struct {
	RateLimitKey        float64       `name:"rate-limit-key" env:"TOCK_RATE_LIMIT_KEY" default:"100" help:"Requests per second each API key may send to this node (bursts of twice that); 0: no limit."`
	RateLimitNamespace  float64       `name:"rate-limit-namespace" env:"TOCK_RATE_LIMIT_NAMESPACE" default:"1000" help:"Requests per second the keys of one namespace may send together to this node (bursts of twice that); 0: no limit."`
	MaxJobsPerNamespace int           `name:"max-jobs-per-namespace" env:"TOCK_MAX_JOBS_PER_NAMESPACE" default:"1000000" help:"Most jobs a namespace may hold; creating more is refused (403); 0: no limit."`
	MaxRunsPerMinute    int           `name:"max-runs-per-minute" env:"TOCK_MAX_RUNS_PER_MINUTE" default:"600" help:"Most manual runs (POST /v1/jobs/{id}/run) per minute per namespace, on this node; 0: no limit."`
	APIPoolConns        int           `name:"api-pool-conns" env:"TOCK_API_POOL_CONNS" default:"4" help:"Connections of the API's own Postgres pool (api role), apart from the scheduler's and the recorder's, so that reads never starve firing; -1: share the node's pool."`
	APIStatementTimeout time.Duration `name:"api-statement-timeout" env:"TOCK_API_STATEMENT_TIMEOUT" default:"30s" help:"Longest an API statement may run; one cut is answered 503 with Retry-After. 0: no limit."`
	APIRequestTimeout   time.Duration `name:"api-request-timeout" env:"TOCK_API_REQUEST_TIMEOUT" default:"60s" help:"A request's budget, waiting for a connection included (not the change feed or a followed log); past it: 503 with Retry-After. 0: no limit."`
	APIReadShare        float64       `name:"api-read-share" env:"TOCK_API_READ_SHARE" default:"1" help:"Seconds of request time per second this node's reads (GETs, not the change feed or a followed log) may take together; past it: 429 with Retry-After. 1: one read at a time without pause. 0: no limit."`
}

// apply copies the flags into cfg.
func (f LimitFlags) apply(cfg *node.Config) {
	cfg.Limits = api.Limits{KeyRate: f.RateLimitKey, NamespaceRate: f.RateLimitNamespace,
		MaxJobs: f.MaxJobsPerNamespace, ManualPerMinute: f.MaxRunsPerMinute, RequestTimeout: f.APIRequestTimeout,
		ReadShare: f.APIReadShare}
	cfg.APIPoolConns, cfg.APIStatementTimeout = f.APIPoolConns, f.APIStatementTimeout
}

// APITLSFlags serve the HTTP address over TLS; serve and dev share them.
type APITLSFlags struct {
	TLSCert     string `name:"tls-cert" env:"TOCK_TLS_CERT" placeholder:"FILE" help:"Serve the REST API, /metrics and health checks over HTTPS with this certificate (PEM, the chain after it; with --tls-key). Default: plain HTTP."`
	TLSKey      string `name:"tls-key" env:"TOCK_TLS_KEY" placeholder:"FILE" help:"The private key of --tls-cert (PEM)."`
	TLSClientCA string `name:"tls-client-ca" env:"TOCK_TLS_CLIENT_CA" placeholder:"FILE" help:"Require a client certificate signed by one of these CAs (PEM) on every connection to the HTTP address."`
}

// apply copies the flags into cfg.
func (f APITLSFlags) apply(cfg *node.Config) {
	cfg.TLS = node.APITLS{Cert: f.TLSCert, Key: f.TLSKey, ClientCA: f.TLSClientCA}
}

// ConnFlags authenticate tockd serve to NATS and etcd and check their
// certificates. PostgreSQL's TLS and credentials are in --postgres-url.
type ConnFlags struct {
	NATSUser         string `name:"nats-user" env:"TOCK_NATS_USER" help:"NATS user name (or nats://user:password@host in --nats-url)."`
	NATSPassword     string `name:"nats-password" env:"TOCK_NATS_PASSWORD" help:"NATS password of --nats-user."`
	NATSNkeySeedFile string `name:"nats-nkey-seed-file" env:"TOCK_NATS_NKEY_SEED_FILE" placeholder:"FILE" help:"Authenticate to NATS with the nkey whose seed (SU...) is in this file."`
	NATSCredsFile    string `name:"nats-creds-file" env:"TOCK_NATS_CREDS_FILE" placeholder:"FILE" help:"Authenticate to NATS with this JWT credentials file (.creds: user JWT and nkey seed)."`
	NATSTLSCA        string `name:"nats-tls-ca" env:"TOCK_NATS_TLS_CA" placeholder:"FILE" help:"Connect to NATS over TLS, trusting these CA certificates (PEM). Default: the system's, when the server requires TLS or the URL is tls://."`
	NATSTLSCert      string `name:"nats-tls-cert" env:"TOCK_NATS_TLS_CERT" placeholder:"FILE" help:"Client certificate (PEM) for a NATS server that asks for one (with --nats-tls-key)."`
	NATSTLSKey       string `name:"nats-tls-key" env:"TOCK_NATS_TLS_KEY" placeholder:"FILE" help:"The private key of --nats-tls-cert (PEM)."`

	EtcdUser     string `name:"etcd-user" env:"TOCK_ETCD_USER" help:"etcd user name (with --etcd-password), for an etcd with authentication on."`
	EtcdPassword string `name:"etcd-password" env:"TOCK_ETCD_PASSWORD" help:"etcd password of --etcd-user."`
	EtcdTLSCA    string `name:"etcd-tls-ca" env:"TOCK_ETCD_TLS_CA" placeholder:"FILE" help:"CA certificates (PEM) to trust for etcd's https:// endpoints. Default: the system's."`
	EtcdTLSCert  string `name:"etcd-tls-cert" env:"TOCK_ETCD_TLS_CERT" placeholder:"FILE" help:"Client certificate (PEM) for an etcd that asks for one (with --etcd-tls-key)."`
	EtcdTLSKey   string `name:"etcd-tls-key" env:"TOCK_ETCD_TLS_KEY" placeholder:"FILE" help:"The private key of --etcd-tls-cert (PEM)."`
}

// apply copies the flags into cfg.
func (f ConnFlags) apply(cfg *node.Config) {
	cfg.NATSAuth = node.NATSAuth{User: f.NATSUser, Password: f.NATSPassword, NkeySeedFile: f.NATSNkeySeedFile,
		CredsFile: f.NATSCredsFile, TLS: node.TLSFiles{CA: f.NATSTLSCA, Cert: f.NATSTLSCert, Key: f.NATSTLSKey}}
	cfg.EtcdAuth = node.EtcdAuth{User: f.EtcdUser, Password: f.EtcdPassword,
		TLS: node.TLSFiles{CA: f.EtcdTLSCA, Cert: f.EtcdTLSCert, Key: f.EtcdTLSKey}}
}

// JWTFlags accept JWT bearer tokens from an identity provider besides
// API keys (api.JWTConfig).
type JWTFlags struct {
	JWKSURL       string `name:"jwks-url" env:"TOCK_JWKS_URL" help:"Accept JWT bearer tokens signed by a key of this JWK Set (https://idp.example.com/.well-known/jwks.json), with --jwt-issuer and --jwt-audience; refreshed hourly and when a token names an unknown key."`
	JWTIssuer     string `name:"jwt-issuer" env:"TOCK_JWT_ISSUER" help:"The iss a JWT must have."`
	JWTAudience   string `name:"jwt-audience" env:"TOCK_JWT_AUDIENCE" help:"The aud a JWT must include."`
	JWTRolesClaim string `name:"jwt-roles-claim" env:"TOCK_JWT_ROLES_CLAIM" default:"tock_roles" help:"The claim mapping namespaces to roles: {\"team-a\": \"editor\"} or [\"team-a:editor\"]."`
}

// apply copies the flags into cfg; a JWK Set URL needs an issuer and an
// audience, and https (node.JWTSettings.Check).
func (f JWTFlags) apply(cfg *node.Config) error {
	s := node.JWTSettings{URL: f.JWKSURL, Issuer: f.JWTIssuer, Audience: f.JWTAudience, RolesClaim: f.JWTRolesClaim}
	if err := s.Check(); err != nil {
		return err
	}
	if s.URL != "" {
		cfg.JWT = s
	}
	return nil
}

// TraceFlags tune OpenTelemetry tracing, which the standard OTEL_*
// environment variables turn on and point at a collector (see package
// telemetry/tracing and docs/operations.md).
type TraceFlags struct {
	TraceSampleRatio float64 `name:"trace-sample-ratio" env:"TOCK_TRACE_SAMPLE_RATIO" default:"1" help:"Share of executions (and API requests without a sampled traceparent) traced, 0 to 1, when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns tracing on; a span with a parent follows its parent's decision. At thousands of executions a second, 0.01 keeps the cost small (docs/bench.md)."`
	TraceDB          bool    `name:"trace-db" env:"TOCK_TRACE_DB" help:"With tracing on, also trace the SQL statements run inside a traced API request or operation (one span each)."`
}

// start starts tracing as the environment and the flags say, into cfg,
// and returns what flushes and stops it.
func (f TraceFlags) start(ctx context.Context, cfg *node.Config) (stop func(), err error) {
	t, err := tracing.FromEnv(ctx, tracing.Config{Ratio: f.TraceSampleRatio, InstanceID: cfg.NodeID, Version: moduleVersion()})
	if err != nil {
		return nil, err
	}
	cfg.Tracing, cfg.TraceDB = t, f.TraceDB
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			cfg.Logger.Warn("flush traces", "err", err)
		}
	}, nil
}

// moduleVersion is tockd's module version as the build recorded it
// ("(devel)" for a build from a checkout).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
