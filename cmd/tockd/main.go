// Command tockd is the tock server. One binary, several roles: api,
// scheduler, executor and recorder (all by default). `tockd dev` runs all
// of them with etcd and NATS JetStream embedded, for one machine.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
	// Every node must agree on time zones, whatever the host has installed.
	_ "time/tzdata"

	"github.com/alecthomas/kong"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/telemetry"
)

// Common holds the flags every subcommand shares.
type Common struct {
	PostgresURL string `name:"postgres-url" env:"TOCK_POSTGRES_URL" default:"postgres://postgres@127.0.0.1:5432/tock?sslmode=disable" help:"PostgreSQL connection URL."`
	LogLevel    string `name:"log-level" env:"TOCK_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn, error."`
	LogFormat   string `name:"log-format" env:"TOCK_LOG_FORMAT" default:"text" enum:"text,json" help:"Log format: text (key=value lines, for a terminal) or json (one JSON object a line, for a log pipeline)."`
}

// logger is the logger the flags ask for, writing to standard error.
func (c Common) logger() *slog.Logger { return newLogger(os.Stderr, c.LogLevel, c.LogFormat) }

// ServeCmd runs the chosen roles against external etcd, NATS and Postgres.
type ServeCmd struct {
	Common
	ExecutionFlags
	HTTPFlags
	LimitFlags
	JWTFlags
	SecretFlags
	APITLSFlags
	ConnFlags
	TraceFlags
	NodeID         string        `name:"node-id" env:"TOCK_NODE_ID" help:"This node's id (default hostname-pid)."`
	HTTPAddr       string        `name:"http-addr" env:"TOCK_HTTP_ADDR" default:"127.0.0.1:8080" help:"Listen address of the REST API, /metrics and health checks."`
	EtcdEndpoints  []string      `name:"etcd-endpoints" env:"TOCK_ETCD_ENDPOINTS" default:"http://127.0.0.1:2379" sep:"," help:"etcd client endpoints, comma separated."`
	NATSURL        string        `name:"nats-url" env:"TOCK_NATS_URL" default:"nats://127.0.0.1:4222" help:"NATS server URL (JetStream enabled), or the URLs of a cluster's servers, comma separated."`
	StreamReplicas int           `name:"stream-replicas" env:"TOCK_STREAM_REPLICAS" default:"1" help:"Copies JetStream keeps of tock's streams, consumers and key-value buckets, 1 to 5; 3 on a NATS cluster. A change updates the existing streams in place."`
	NoChangeFeed   bool          `name:"no-change-feed" env:"TOCK_NO_CHANGE_FEED" help:"Publish no change feed (GET /v1/changes then answers 503): saves a few microseconds of CPU per execution (docs/bench.md) and the stream about 250 bytes per change."`
	NoUI           bool          `name:"no-ui" env:"TOCK_NO_UI" help:"Serve no web dashboard at /ui/ (api role); the API stays."`
	Cluster        string        `name:"cluster" env:"TOCK_CLUSTER" default:"default" help:"Cluster name: etcd keys live under /tock/<cluster>/."`
	Roles          []string      `name:"roles" env:"TOCK_ROLES" default:"api,scheduler,executor,recorder" sep:"," help:"Roles to run: api, scheduler, executor, recorder."`
	Buckets        int           `name:"buckets" env:"TOCK_BUCKETS" default:"256" help:"Number of buckets, used only when the cluster is created (then stored)."`
	LeaseTTL       time.Duration `name:"lease-ttl" env:"TOCK_LEASE_TTL" default:"5s" help:"etcd lease TTL of a scheduler node."`
	NoMigrate      bool          `name:"no-migrate" env:"TOCK_NO_MIGRATE" help:"Do not run database migrations at start."`
	Pprof          bool          `name:"pprof" env:"TOCK_PPROF" help:"Serve Go's profiler under /debug/pprof/ on the HTTP address."`
	MetricsAddr    string        `name:"metrics-addr" env:"TOCK_METRICS_ADDR" help:"Also serve /metrics (and the profiler, with --pprof) on this address, without authentication, for Prometheus on a network API clients cannot reach."`
	Auth           string        `name:"auth" env:"TOCK_AUTH" default:"keys" enum:"keys,none" help:"keys: every API call needs an API key (the node refuses to start while none exists); none: the API is open to anyone who reaches it (a warning is logged at every start)."`
}

// Run starts the server and blocks until SIGINT or SIGTERM.
func (c *ServeCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := c.config()
	if err != nil {
		return err
	}
	stopTracing, err := c.TraceFlags.start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer stopTracing()
	return node.Run(ctx, cfg)
}

// config turns the flags into the node's configuration, refusing flags
// that cannot work before any connection is made.
func (c *ServeCmd) config() (node.Config, error) {
	roles, err := node.ParseRoles(c.Roles)
	if err != nil {
		return node.Config{}, err
	}
	cfg := node.Config{
		NodeID:         c.NodeID,
		HTTPAddr:       c.HTTPAddr,
		PostgresURL:    c.PostgresURL,
		EtcdEndpoints:  c.EtcdEndpoints,
		NATSURL:        c.NATSURL,
		StreamReplicas: c.StreamReplicas,
		NoChangeFeed:   c.NoChangeFeed,
		NoUI:           c.NoUI,
		Cluster:        c.Cluster,
		Roles:          roles,
		Buckets:        c.Buckets,
		LeaseTTL:       c.LeaseTTL,
		Migrate:        !c.NoMigrate,
		Pprof:          c.Pprof,
		Logger:         c.logger(),
		AuthNone:       c.Auth == "none",
		MetricsAddr:    c.MetricsAddr,
	}
	c.ExecutionFlags.apply(&cfg)
	c.HTTPFlags.apply(&cfg)
	if cfg.Secrets, err = c.SecretFlags.load(); err != nil {
		return node.Config{}, err
	}
	c.LimitFlags.apply(&cfg)
	if err := c.JWTFlags.apply(&cfg); err != nil {
		return node.Config{}, err
	}
	c.APITLSFlags.apply(&cfg)
	c.ConnFlags.apply(&cfg)
	// Flags that cannot work fail here, before any connection is made.
	if err := cfg.CheckFiles(); err != nil {
		return node.Config{}, err
	}
	return cfg, nil
}

// MigrateCmd applies the database migrations and exits.
type MigrateCmd struct {
	Common
	Buckets int `name:"buckets" env:"TOCK_BUCKETS" default:"256" help:"Number of buckets if the cluster is new."`
}

// Run migrates the database. The migrations take as long as they take
// (one rebuilds job_names: minutes at 10,000,000 jobs); an interrupt
// stops them (each runs in its own transaction, so none is left half
// applied).
func (c *MigrateCmd) Run() error {
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, 2*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, c.PostgresURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(sig); err != nil {
		return err
	}
	ctx, cancel = context.WithTimeout(sig, 2*time.Minute)
	defer cancel()
	n, err := st.Init(ctx, c.Buckets)
	if err != nil {
		return err
	}
	fmt.Printf("migrated; cluster has %d buckets\n", n)
	return nil
}

// MaintainCmd runs maintenance passes: the daily partitions ahead, and
// retention.
type MaintainCmd struct {
	Common
	Retention             retention `name:"retention" env:"TOCK_RETENTION" default:"90d" help:"How long execution history is kept, for namespaces without their own."`
	CompletedJobRetention retention `name:"completed-job-retention" env:"TOCK_COMPLETED_JOB_RETENTION" default:"7d" help:"How long a completed one-shot job is kept."`
	ArchiveDir            string    `name:"archive-dir" env:"TOCK_ARCHIVE_DIR" help:"Write each day of execution history to Parquet files in this directory before retention drops it."`
	AuditRetention        retention `name:"audit-retention" env:"TOCK_AUDIT_RETENTION" default:"400d" help:"How long the audit trail is kept."`
	Once                  bool      `name:"once" help:"Run one pass and exit (default: a pass every 5 minutes until stopped)."`
}

// commandStore is a command's context, which ends at SIGINT or SIGTERM,
// and the store at url opened on it (and migrated, if migrate); done
// closes both.
func commandStore(url string, migrate bool) (context.Context, *store.Store, func(), error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	st, err := store.Open(ctx, url)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	done := func() { st.Close(); stop() }
	if migrate {
		if err := st.Migrate(ctx); err != nil {
			done()
			return nil, nil, nil, err
		}
	}
	return ctx, st, done, nil
}

// Run runs one maintenance pass, or passes until SIGINT or SIGTERM.
func (c *MaintainCmd) Run() error {
	ctx, st, done, err := commandStore(c.PostgresURL, true)
	if err != nil {
		return err
	}
	defer done()
	if c.ArchiveDir != "" {
		if err := archive.CheckDir(c.ArchiveDir); err != nil {
			return err
		}
	}
	cfg := node.Config{Retention: time.Duration(c.Retention), CompletedJobRetention: time.Duration(c.CompletedJobRetention),
		ArchiveDir: c.ArchiveDir, AuditRetention: time.Duration(c.AuditRetention)}
	log := c.logger()
	if c.Once {
		return node.MaintainOnce(ctx, st, log, cfg, true)
	}
	return node.Maintain(ctx, st, log, cfg)
}

// DevCmd runs every role in one process with etcd and NATS JetStream
// embedded (node.RunDev). Their data lives under --data-dir, so a restart
// keeps state.
type DevCmd struct {
	Common
	ExecutionFlags
	HTTPFlags
	SecretFlags
	APITLSFlags
	TraceFlags
	// The API's limits as serve's, so that a dev server's reads are
	// bounded as a node's are (its open API has no keys to rate-limit).
	LimitFlags
	DataDir      string `name:"data-dir" env:"TOCK_DEV_DIR" default:".dev" help:"Where embedded etcd and NATS keep their data."`
	HTTPAddr     string `name:"http-addr" env:"TOCK_HTTP_ADDR" default:"127.0.0.1:8080" help:"Listen address of the REST API."`
	EtcdPort     int    `name:"etcd-port" default:"2379" help:"Preferred etcd client port (a free one is used if it is taken)."`
	NATSPort     int    `name:"nats-port" default:"4222" help:"Preferred NATS port (a free one is used if it is taken)."`
	Buckets      int    `name:"buckets" env:"TOCK_BUCKETS" default:"256" help:"Number of buckets of a new cluster."`
	Pprof        bool   `name:"pprof" env:"TOCK_PPROF" help:"Serve Go's profiler under /debug/pprof/ on the HTTP address."`
	NoChangeFeed bool   `name:"no-change-feed" env:"TOCK_NO_CHANGE_FEED" help:"Publish no change feed (GET /v1/changes then answers 503)."`
	NoUI         bool   `name:"no-ui" env:"TOCK_NO_UI" help:"Serve no web dashboard at /ui/."`
}

// Run starts embedded etcd and NATS, makes sure the database exists, and
// serves every role until SIGINT or SIGTERM.
func (c *DevCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := c.config()
	stopTracing, err := c.TraceFlags.start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer stopTracing()
	return node.RunDev(ctx, node.Dev{Node: cfg, DataDir: c.DataDir, EtcdPort: c.EtcdPort, NATSPort: c.NATSPort,
		SecretKeyFile: c.SecretKeyFile})
}

// config is the node's configuration from dev's flags (tracing aside,
// which Run starts).
func (c *DevCmd) config() node.Config {
	cfg := node.Config{
		HTTPAddr:     c.HTTPAddr,
		PostgresURL:  c.PostgresURL,
		Buckets:      c.Buckets,
		Pprof:        c.Pprof,
		NoChangeFeed: c.NoChangeFeed,
		NoUI:         c.NoUI,
		Logger:       c.logger(),
	}
	c.ExecutionFlags.apply(&cfg)
	c.HTTPFlags.apply(&cfg)
	c.LimitFlags.apply(&cfg)
	c.APITLSFlags.apply(&cfg)
	return cfg
}

// ArchiveCmd writes one day of execution history to Parquet files, as
// retention does before it drops the day (see package archive). It only
// reads the database.
type ArchiveCmd struct {
	Common
	Day string `name:"day" required:"" help:"The day (UTC) to write, as 2026-01-31."`
	Dir string `name:"dir" env:"TOCK_ARCHIVE_DIR" help:"Directory to write the files in (the variable --archive-dir reads)."`
}

// Run writes the day's files and prints them.
func (c *ArchiveCmd) Run() error {
	day, err := time.Parse(time.DateOnly, c.Day)
	if err != nil {
		return fmt.Errorf("--day: %q is not a day such as 2026-01-31", c.Day)
	}
	if c.Dir == "" {
		return errors.New("--dir (or TOCK_ARCHIVE_DIR) is required: where to write the files")
	}
	ctx, st, done, err := commandStore(c.PostgresURL, false)
	if err != nil {
		return err
	}
	defer done()
	res, err := archive.Day(ctx, st.Pool(), c.Dir, day)
	if err != nil {
		return err
	}
	fmt.Printf("archived %s\n", c.Day)
	for _, f := range []struct {
		what string
		archive.File
	}{{"executions", res.Executions}, {"attempts", res.Attempts}, {"logs", res.Logs}} {
		fmt.Printf("  %-10s %9d rows %12d bytes  %s\n", f.what, f.Rows, f.Bytes, f.Path)
	}
	return nil
}

var cli struct {
	Serve       ServeCmd       `cmd:"" default:"withargs" help:"Run tockd (all roles by default)."`
	Migrate     MigrateCmd     `cmd:"" help:"Apply database migrations and exit."`
	Maintain    MaintainCmd    `cmd:"" help:"Run maintenance: daily partitions ahead, and retention (--once: one pass, then exit)."`
	Archive     ArchiveCmd     `cmd:"" help:"Write one day of execution history to Parquet files (--day 2026-01-31 --dir DIR)."`
	Dev         DevCmd         `cmd:"" help:"Run everything on one machine: embedded etcd and NATS, local Postgres."`
	Keys        KeysCmd        `cmd:"" help:"Manage API keys in the database (keys create: the first admin key)."`
	Secrets     SecretsCmd     `cmd:"" help:"Secret keys: generate-key prints a new one; reencrypt re-encrypts stored secrets under the first key of --secret-key-file."`
	Conformance ConformanceCmd `cmd:"" help:"Run the conformance kit against a custom executor: tockd conformance -- ./my-executor (docs/wire-protocol.md, \"A correct executor\")."`
}

// defaultGOGC is the Go garbage collector's target tockd runs with when
// the GOGC environment variable does not set one: the heap may grow to
// four times what is live between collections, instead of Go's default
// of twice. Garbage collection was a quarter of tockd's CPU in
// `tockd dev`, whose live heap is mostly the embedded JetStream's
// bookkeeping (the duplicate window's message ids) and the scanner's
// look-ahead, full of pointers; collecting half as often cut tockd's CPU
// per execution by a fifth (54.8 to 44.6 µs at 3,000 executions a second,
// docs/bench.md) for a peak heap about twice as large. GOGC=100 restores
// Go's default; GOMEMLIMIT, if set, still bounds the heap.
const defaultGOGC = 300

// applyDefaultGOGC sets defaultGOGC unless getenv("GOGC") names a target.
func applyDefaultGOGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
}

func main() {
	applyDefaultGOGC(os.Getenv)
	k := kong.Parse(&cli,
		kong.Name("tockd"),
		kong.Description("tock: a distributed job scheduler on etcd, PostgreSQL and NATS JetStream."),
		kong.UsageOnError(),
	)
	if err := k.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "tockd:", err)
		os.Exit(1)
	}
}

// newLogger is a logger writing to w at level (debug, info, warn, error)
// in format: text, or json (slog's JSON handler: time, level, msg, then
// the attributes — node, job_id, execution_id, bucket — as keys).
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	// Lines logged with a traced context carry its trace_id and span_id.
	if format == "json" {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
}
