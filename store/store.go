package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Advisory lock keys (pg_advisory_xact_lock) serialising DDL the store
// runs at run time. goose uses its own key (lock.DefaultLockID) for
// migrations.
const (
	lockInit       int64 = 0x746f636b_0001 // "tock" 1: Init
	lockPartitions int64 = 0x746f636b_0002 // "tock" 2: MaintainHistoryPartitions
	// lockMaintenance is a session lock (Maintenance): one maintenance
	// pass at a time in the cluster.
	lockMaintenance int64 = 0x746f636b_0003 // "tock" 3: Maintenance
	// lockSilence is a session lock (SilenceSweep): one sweep for silent
	// jobs at a time in the cluster.
	lockSilence int64 = 0x746f636b_0004 // "tock" 4: SilenceSweep
)

// initDaysAhead is how many days of execution partitions Init creates.
const initDaysAhead = 7

// Store is tock's PostgreSQL database. It is safe for concurrent use.
// Open it, Migrate the schema, then Init it before using anything else.
type Store struct {
	pool *pgxpool.Pool
	// firePool and duePool are the scanner's own few connections, for firing
	// and for the due-jobs read (see firePoolSize).
	firePool, duePool *pgxpool.Pool
	buckets           int
	creates           createCombiner
	due               dueCodec
	specs             specCache
	days              sync.Map // time.Time (a UTC day) → true: its partitions exist (EnsureHistoryPartitions)
	rules             ruleCache
	recordStats       recordStats
	dayParts          dayPartitions // the fast path's (executions_fast.go)

	// namedProbe, when positive, replaces the constant of that name
	// (tests).
	namedProbe int
}

// recordStats count what RecordAttemptEvents did, for tests and
// benchmarks; slowOnly (set by tests only) turns the fast path
// (executions_fast.go) off.
type recordStats struct {
	slowOnly bool
	// fast counts the executions the fast path recorded; redone, the
	// batches recorded again without it (errFastRedo).
	fast, redone atomic.Int64
}

// defaultMaxConns is the pool size when the database URL does not set
// pool_max_conns: 16, or 4 per CPU on larger machines. pgxpool's own
// default, max(4, CPUs), suits CPU-bound work, but a connection here
// spends much of its time waiting for its commit's WAL flush, and
// concurrent commits share a flush: 16 API clients creating jobs on a
// 2-core machine made 400–460 a second through 4 connections, 820–1,160
// through 8 and mostly 1,260–1,690 through 16 (docs/bench.md).
// Connections are opened only as concurrent work needs them.
var defaultMaxConns = int32(max(16, 4*runtime.NumCPU()))

// firePoolSize is how many of a pool's maxConns connections Open sets
// apart for firing transactions: up to 3 (the default FireConcurrency),
// a fifth of the pool on small ones; one more is the due-jobs read's.
// Postgres plans each connection's statements on its own, and these two
// name every jobs partition: the firing statement's generic plan takes
// ~120 ms to plan over 256 partitions, a custom plan of the due read
// ~70 ms, and every ANALYZE of executions or jobs (autovacuum's, or a
// partition made for a new day) makes every connection plan them again.
// Spread over the whole pool they were planned 30 and more times a
// minute at 3,000 firings a second, about a quarter of Postgres's CPU
// per execution (docs/bench.md, issue 20); on a few connections of their
// own, a few times.
func firePoolSize(maxConns int32) int32 {
	return min(3, max(1, maxConns/5))
}

// minSplitConns is the smallest pool Open divides: a smaller one (a
// deliberately tight pool_max_conns) stays whole, the scanner sharing it,
// rather than leave the API and the recorder one or two connections.
const minSplitConns = 8

// Option changes how Open connects.
type Option func(*openConfig)

// openConfig is what Open's options change: the pool's configuration,
// after the URL's and tock's defaults, and whether the pool stays whole.
type openConfig struct {
	pool *pgxpool.Config
	// whole: no connections are split off for the scanner.
	whole bool
}

// WithQueryTracer has every connection's statements traced by t (pgx's
// hook: otelpgx's tracer makes OpenTelemetry spans of them).
func WithQueryTracer(t pgx.QueryTracer) Option {
	return func(c *openConfig) { c.pool.ConnConfig.Tracer = t }
}

// ForRequests makes the store the API's own (issue 44: reads never
// starve firing): a pool of conns connections (the URL's pool_max_conns
// does not apply), none split off for the scanner, each statement cut by
// Postgres after timeout (statement_timeout; 0 leaves the server's),
// and named "tockd-api" in pg_stat_activity. The scheduler's and the
// recorder's statements then never wait for a connection behind the
// API's, and a read that runs too long is cancelled (Overloaded).
func ForRequests(conns int, timeout time.Duration) Option {
	return func(c *openConfig) {
		c.whole = true
		c.pool.MaxConns = int32(max(conns, 1))
		c.pool.MinConns = 0
		if timeout > 0 {
			c.pool.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
		}
		c.pool.ConnConfig.RuntimeParams["application_name"] = "tockd-api"
	}
}

// Overloaded reports whether err is a statement Postgres cut short for
// taking too long (statement_timeout, SQLSTATE 57014).
func Overloaded(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// Open connects a pool to the database at url (a postgres:// URL or a
// key=value DSN; pool settings such as pool_max_conns are honoured; up to
// defaultMaxConns connections otherwise) and pings it. It does not
// migrate the schema. Of the pool's connections, firePoolSize and one
// more are kept for the scanner's statements (in pools of minSplitConns
// or more).
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	oc := openConfig{pool: cfg}
	for _, o := range opts {
		o(&oc)
	}
	// tock's statements are short and keyed; JIT compilation only pays
	// off for long analytical queries. Statements that name many
	// partitions cross jit_above_cost on their estimates alone: the
	// scanner's due-jobs read over 256 partitions spent 45 ms compiling
	// per call, and a firing statement over every jobs partition 24 s
	// (against 100 ms to run). A URL that sets jit itself (?jit=on) wins.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// uuid.UUID is a driver.Valuer, so pgx would encode every id as text
	// and parse it back; registered, ids go as 16 bytes both ways (array
	// encoding was 9% of tockd's CPU at 10,000 firings/s).
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		pgxuuid.Register(c.TypeMap())
		return nil
	}
	split := cfg.MaxConns >= minSplitConns && !oc.whole
	fireCfg, dueCfg := cfg.Copy(), cfg.Copy()
	if split {
		fireCfg.MaxConns, dueCfg.MaxConns = firePoolSize(cfg.MaxConns), 1
		fireCfg.MinConns, dueCfg.MinConns = 0, 0
		cfg.MaxConns -= fireCfg.MaxConns + 1
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: ping %s: %w", cfg.ConnConfig.Host, err)
	}
	if !split {
		return &Store{pool: pool, firePool: pool, duePool: pool}, nil
	}
	// pgxpool.NewWithConfig connects lazily: these fail only on a bad
	// configuration, which the main pool's ping has ruled out.
	fire, err := pgxpool.NewWithConfig(ctx, fireCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	due, err := pgxpool.NewWithConfig(ctx, dueCfg)
	if err != nil {
		pool.Close()
		fire.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	return &Store{pool: pool, firePool: fire, duePool: due}, nil
}

// Pool is the store's connection pool, for callers that need a query the
// store does not offer (health checks, tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes every connection. Listen calls return on their own (their
// connections are not the pool's) when their contexts end.
func (s *Store) Close() {
	s.pool.Close()
	if s.firePool != s.pool {
		s.firePool.Close()
		s.duePool.Close()
	}
}

// Buckets is the cluster's bucket count N, known after Init.
func (s *Store) Buckets() int { return s.buckets }

// Migrations are the migration files Migrate applies (00001_init.sql
// and on). Tests name their template databases after a hash of them
// (store/storetest), so that a changed migration is never served from a
// stale template.
func Migrations() fs.FS {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // fs.Sub fails only on an invalid path, and this one is constant
	}
	return fsys
}

// Migrate brings the schema up to date with the migrations embedded in
// the binary. Several tockd may call it at once: goose holds a Postgres
// session advisory lock while it migrates, so the others wait and then
// find nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	fsys := Migrations()
	// Wait for another migrator for up to 5 minutes, checking every second.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("store: migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close() // does not close the pool
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker),
		goose.WithSlog(slog.Default()),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Init prepares a migrated database for use and sets the Store's bucket
// count. The first Init of a cluster records buckets as its N; later
// calls keep the recorded N whatever they pass (N is fixed when the
// cluster is created) and return it. Init creates the jobs partition of
// every bucket and the daily executions and attempts partitions around
// today, all idempotently; several nodes may run it at once.
func (s *Store) Init(ctx context.Context, buckets int) (int, error) {
	if buckets <= 0 {
		return 0, fmt.Errorf("store: init: bucket count %d must be positive", buckets)
	}
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockInit); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO cluster (buckets) VALUES ($1) ON CONFLICT DO NOTHING", buckets); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT buckets FROM cluster").Scan(&n); err != nil {
			return err
		}
		existing, err := partitionsOf(ctx, tx, "jobs")
		if err != nil {
			return err
		}
		// Create only the missing partitions: CREATE TABLE ... PARTITION OF
		// locks the parent exclusively, which would stall firing on every
		// node's start if done unconditionally.
		for b := range n {
			name := jobsPartition(b)
			if existing[name] {
				continue
			}
			sql := fmt.Sprintf("CREATE TABLE %s PARTITION OF jobs FOR VALUES IN (%d)", name, b)
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: init: %w", err)
	}
	s.buckets = n
	now, err := s.Now(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: init: %w", err)
	}
	if err := s.MaintainHistoryPartitions(ctx, now, initDaysAhead); err != nil {
		return 0, fmt.Errorf("store: init: %w", err)
	}
	return n, nil
}

// Now is the database's clock (clock_timestamp(), not the transaction
// start) in UTC. Due times are judged by it, not by each node's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("store: database clock: %w", err)
	}
	return t.UTC(), nil
}

// jobsPartition is the name of bucket b's jobs partition.
func jobsPartition(b int) string { return fmt.Sprintf("jobs_b%03d", b) }

// partitionsOf is the set of names of parent's partitions.
func partitionsOf(ctx context.Context, q querier, parent string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass($1)`, parent)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", parent, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", parent, err)
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set, nil
}

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// needBuckets fails when Init has not run, since a job's bucket (and so
// its partition) cannot be computed without N.
func (s *Store) needBuckets() error {
	if s.buckets <= 0 {
		return errors.New("store not initialised: call Init first")
	}
	return nil
}

// isUniqueViolation reports whether err is a unique_violation (23505).
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isRetryable reports whether err aborted a transaction that may simply
// be run again: a deadlock or a serialization failure.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// ms truncates t to the millisecond precision the store keeps, in UTC.
func ms(t time.Time) time.Time { return t.Truncate(time.Millisecond).UTC() }

// msPtr is ms for an optional time.
func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

// utcPtr converts a time read from the database to UTC.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// msDuration is a count of milliseconds as a Duration.
func msDuration(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Unavailable reports whether err says that no PostgreSQL server could be
// used for now (none answered, one is starting or shutting down, or the
// one reached takes no writes: a failover in progress), rather than that
// a server refused the request. A starting node waits out such an error;
// the API answers it with 503, not 500.
func Unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "57": // connection exception; operator intervention (starting, shutting down)
			return true
		case "25": // invalid transaction state: a read-only server
			return pgErr.Code == "25006"
		}
		return false
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, io.ErrUnexpectedEOF)
}
