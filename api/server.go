package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/applyset"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/depends"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/waits"
)

// Store is what the API needs of tock's database, itself and through
// jobs.Service (which it is handed to); *store.Store is the real one.
type Store interface {
	// jobs.Store is what the use cases write through.
	jobs.Store
	CountJobsMatching(ctx context.Context, f store.JobFilter) (n int, exact bool, err error)
	GetExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error)
	ListHandlersSeen(ctx context.Context) ([]model.HandlerSeen, error)
	ListBreakerHistory(ctx context.Context, handlers []string, limit int) ([]model.BreakerChange, error)
	ListExecutions(ctx context.Context, f store.ExecFilter) ([]*model.Execution, string, error)
	CountExecutions(ctx context.Context, f store.ExecFilter) (int64, error)
	ListExecutionStats(ctx context.Context, f store.StatsFilter) ([]model.ExecStats, error)
	ListExecutionSeries(ctx context.Context, f store.SeriesFilter) (store.Series, error)
	ListNamespaces(ctx context.Context) ([]model.Namespace, error)
	UpdateNamespaceRetention(ctx context.Context, ns string, d time.Duration) (*model.Namespace, error)
	ListBucketStats(ctx context.Context) ([]model.BucketStat, error)
	ListSkippedRuns(ctx context.Context, id uuid.UUID, limit int, cursor string) ([]model.SkippedRange, string, error)
	ListBackfills(ctx context.Context, jobID uuid.UUID, limit int, cursor string) ([]*model.Backfill, string, error)
	// ListAlertedJobSuccesses feeds tock_job_last_success_timestamp_seconds.
	ListAlertedJobSuccesses(ctx context.Context) ([]model.JobLastSuccess, error)
	// The Idempotency-Key of writes (idempotent).
	ClaimIdempotencyKey(ctx context.Context, namespace, key string, hash []byte) (model.Idempotent, error)
	SaveIdempotencyResponse(ctx context.Context, namespace, key string, status int, contentType string, body []byte) error
	ReleaseIdempotencyKey(ctx context.Context, namespace, key string) error
	// API keys, and the namespaces requests are authorised in (auth.go).
	CreateAPIKey(ctx context.Context, k model.APIKey) (*model.APIKey, error)
	UseAPIKey(ctx context.Context, id string) (*model.APIKey, error)
	GetAPIKey(ctx context.Context, id string) (*model.APIKey, error)
	ListAPIKeys(ctx context.Context, namespaces []string) ([]*model.APIKey, error)
	DeleteAPIKey(ctx context.Context, id string) error
	GetJobNamespace(ctx context.Context, id uuid.UUID) (string, error)
	CountJobs(ctx context.Context, namespace string, limit int) (int, error)
	// The audit trail (audit.go).
	CreateAuditEntries(ctx context.Context, entries []model.AuditEntry) error
	ListAuditEntries(ctx context.Context, f store.AuditFilter) ([]model.AuditEntry, string, error)
	// Apply sets (applyset.Store).
	ApplySet(ctx context.Context, namespace, name string, write bool, fn func(ctx context.Context, a *store.ApplySetTx) error) error
	ListApplySets(ctx context.Context, namespaces []string) ([]model.ApplySet, error)
	// Calendars.
	CreateCalendar(ctx context.Context, c *model.Calendar) error
	GetCalendar(ctx context.Context, namespace, name string) (model.Calendar, error)
	ListCalendars(ctx context.Context, namespace string) ([]model.Calendar, error)
	ListConcurrencyKeys(ctx context.Context, namespace string) ([]model.SlotKey, error)
	ListSlotHolders(ctx context.Context, slot string, held bool, limit int) ([]model.SlotHolder, error)
	UpdateCalendar(ctx context.Context, c *model.Calendar, revision int64) error
	DeleteCalendar(ctx context.Context, namespace, name string) error
	ListDeadEvents(ctx context.Context, f store.DeadEventFilter) ([]model.DeadEvent, string, error)
	GetExecutionNamespace(ctx context.Context, id uuid.UUID) (string, error)
	// Execution logs (logs.go).
	ListLogChunks(ctx context.Context, f store.LogFilter) ([]model.LogChunk, error)
	// Notification channels and rules, and the notifications sent
	// (notify.go).
	CreateChannel(ctx context.Context, c model.Channel) (*model.Channel, error)
	GetChannel(ctx context.Context, id uuid.UUID) (*model.Channel, error)
	ListChannels(ctx context.Context, namespaces []string) ([]*model.Channel, error)
	UpdateChannel(ctx context.Context, c model.Channel) (*model.Channel, error)
	DeleteChannel(ctx context.Context, id uuid.UUID) error
	CreateRule(ctx context.Context, r model.Rule) (*model.Rule, error)
	GetRule(ctx context.Context, id uuid.UUID) (*model.Rule, error)
	ListRules(ctx context.Context, namespaces []string) ([]*model.Rule, error)
	UpdateRule(ctx context.Context, r model.Rule) (*model.Rule, error)
	DeleteRule(ctx context.Context, id uuid.UUID) error
	ListNotifications(ctx context.Context, f store.NotificationFilter) ([]*model.Notification, string, error)
	GetNotification(ctx context.Context, id uuid.UUID) (*model.Notification, error)
	// Dependencies (depends.go).
	depends.Store
	ListJobEdges(ctx context.Context, id uuid.UUID, limit int) ([]model.Edge, error)
	ListExecutionUpstreams(ctx context.Context, id uuid.UUID) ([]model.ExecutionLink, error)
	ListReleasedExecutions(ctx context.Context, id uuid.UUID) ([]model.ExecutionLink, error)
}

// Notifier sends a sample message through a notification channel, now,
// once, and tells how the attempt went (its Error is "" when the
// receiver took it): the test endpoints of channels and rules. r is the
// rule whose message to sample; nil for a channel's own test.
type Notifier interface {
	Test(ctx context.Context, c *model.Channel, r *model.Rule) model.DeliveryAttempt
}

// Cluster is the live view of the scheduler nodes and bucket owners in
// etcd; *partition.Observer is the real one.
type Cluster interface {
	Members(ctx context.Context) ([]partition.MemberInfo, error)
	Owners(ctx context.Context) (map[int]partition.Owner, error)
}

// Registry is where the server registers its metrics and what GET /metrics
// serves; *prometheus.Registry is one.
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Config configures a Server.
type Config struct {
	// Store is the database. Required.
	Store Store
	// Logger receives request failures; slog.Default() when nil.
	Logger *slog.Logger
	// Tracer, if set, makes a server span of every request, named by its
	// method and route ("POST /v1/jobs"), a child of the client's
	// traceparent; logs written with the request's context carry its ids.
	Tracer trace.Tracer
	// Registry holds the server's metrics and is what /metrics serves;
	// prometheus.DefaultRegisterer and DefaultGatherer when nil.
	Registry Registry
	// ReadyTimeout bounds GET /readyz's database check; 2s when zero.
	ReadyTimeout time.Duration
	// Cluster serves GET /v1/nodes and GET /v1/buckets. Optional: when
	// nil (a server without an etcd connection) they answer 503.
	Cluster Cluster
	// ClusterTimeout bounds each etcd read of those two endpoints (and the
	// NATS read of GET /v1/handlers), so that an unreachable etcd is a
	// prompt 503; 5s when zero.
	ClusterTimeout time.Duration
	// Executors serves POST /v1/executions/{id}/cancel and GET
	// /v1/handlers. Optional: when nil (a server without a NATS
	// connection) they answer 503.
	Executors Executors
	// Changes is the change feed: GET /v1/changes reads it, and the
	// changes made through the API (jobs created, changed, paused,
	// resumed, deleted; executions run, cancelled, re-driven) are
	// published to it. Optional: when nil, GET /v1/changes answers 503.
	Changes *changes.Feed
	// ChangeBuffer is how many batches of changes a GET /v1/changes
	// client may fall behind before it is told to resync; 256 when zero.
	ChangeBuffer int
	// DefaultRetry is the cluster's retry policy: fields a job leaves out
	// are filled from it when the job is created or its retry replaced.
	// The zero value means one attempt; New refuses an invalid policy.
	DefaultRetry domain.RetryPolicy
	// MaxLogCap is the largest log cap a job may ask for
	// (handler.log.cap_bytes); 0 means domain.DefaultMaxLogCap.
	MaxLogCap int64
	// DefaultMissed and DefaultOverlap are the cluster's missed-run and
	// overlap policies, for jobs that leave them out (see jobs.Config).
	DefaultMissed  domain.MissedPolicy
	DefaultOverlap string
	// Retention is the cluster's retention of execution history (tockd
	// --retention), shown for namespaces without their own; default 90
	// days.
	Retention time.Duration
	// HTTPPolicy refuses, with a 400 naming handler.url, a job whose http
	// handler URL it refuses by its text (see jobs.Config). Nil is
	// egress's default policy. The executors check again at connect time.
	HTTPPolicy *egress.Policy
	// AllowedHosts are the hosts requests may name in their Host header
	// (tockd --allowed-hosts): a name or address matches it on any port,
	// host:port on that port only, "*" anything. Others are refused with
	// 421, which keeps pages that reach the server through a DNS name
	// they control (DNS rebinding) out. Empty: any Host.
	AllowedHosts []string
	// CORSOrigins are the browser origins allowed to call the API from
	// pages of other sites (tockd --cors-origins), such as
	// https://console.example.com; "*" is any. Empty: no response carries
	// a CORS header, so browsers let no other site read the API's answers
	// or send it JSON.
	CORSOrigins []string
	// Open serves the API without authentication: every request may do
	// everything (tockd dev, and tockd serve --auth none). Otherwise every
	// operation but the public ones (x-tock-permission scope public: the
	// health checks and the OpenAPI document) needs an API key whose role
	// allows it (auth.go).
	Open bool
	// Limits are the rate limits and quotas of keys and namespaces
	// (limits.go); the zero value limits nothing.
	Limits Limits
	// JWT, if set, accepts JWT bearer tokens besides API keys (jwt.go).
	JWT *JWTConfig
	// Secrets seals the values of secret headers before jobs are stored
	// (tockd --secret-key-file; see jobs.Config.Secrets). Nil: a job with
	// secret headers is refused with a 400 naming handler.secret_headers.
	// It seals notification channels' secrets too: without it, a channel
	// that needs one is refused with a 400 naming secret (url for Slack).
	Secrets jobs.Sealer
	// Notifier sends the test messages of POST
	// /v1/notification-channels/{id}/test and
	// /v1/notification-rules/{id}/test. Optional: when nil they answer
	// 503.
	Notifier Notifier
}

// WithDefaults is c with the fields it leaves zero filled in: the
// default logger, Prometheus's process-wide registry, a 2 s readiness
// timeout and a 5 s cluster timeout.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = defaultRegistry{prometheus.DefaultRegisterer, prometheus.DefaultGatherer}
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Second
	}
	if c.ClusterTimeout == 0 {
		c.ClusterTimeout = 5 * time.Second
	}
	return c
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("api: Config.Store is nil")
	}
	if c.ReadyTimeout < 0 {
		return fmt.Errorf("api: Config.ReadyTimeout %v is negative", c.ReadyTimeout)
	}
	if c.ClusterTimeout < 0 {
		return fmt.Errorf("api: Config.ClusterTimeout %v is negative", c.ClusterTimeout)
	}
	for _, h := range c.AllowedHosts {
		if strings.TrimSpace(h) == "" {
			return errors.New("api: Config.AllowedHosts holds an empty host")
		}
	}
	return checkOrigins(c.CORSOrigins)
}

// defaultRegistry joins Prometheus's process-wide registerer and gatherer.
type defaultRegistry struct {
	prometheus.Registerer
	prometheus.Gatherer
}

// maxBodyBytes bounds a request body; a job is far smaller.
const maxBodyBytes = 1 << 20

// Server is the REST API. Serve its Handler with an http.Server.
type Server struct {
	store        Store
	log          *slog.Logger
	registry     Registry
	tracer       trace.Tracer
	readyTimeout time.Duration
	cluster      Cluster
	clusterWait  time.Duration
	executors    Executors
	// waits keeps what the executors and queues say, to tell why
	// executions wait (nil without Executors).
	waits           *waits.Cache
	changes         *changes.Feed
	changeBuffer    int
	jobs            *jobs.Service
	echo            *echo.Echo
	duration        *prometheus.HistogramVec
	metrics         http.Handler
	routes          map[string]bool // route templates, for the metrics' route label
	verbRoutes      []string        // operations routed by verbRouter, as the document names them
	applySets       *applyset.Service
	createSchema    *openapi3.Schema
	patchSchema     *openapi3.Schema
	selectionSchema *openapi3.Schema
	previewSchema   *openapi3.Schema
	// resumeSelectionSchema and resumeSchema check the bodies of POST
	// /v1/jobs:resume and /v1/jobs/{id}/resume.
	resumeSelectionSchema, resumeSchema *openapi3.Schema
	// backfillSchema checks the body of POST /v1/jobs/{id}/backfill,
	// namespaceSchema that of PUT /v1/namespaces/{namespace}.
	backfillSchema, namespaceSchema *openapi3.Schema
	// retention is the cluster's retention (Config.Retention).
	retention time.Duration
	// keySchema checks the body of POST /v1/keys.
	keySchema *openapi3.Schema
	// The bodies of the notification channels' and rules' POST and
	// PATCH (notify.go).
	channelCreateSchema, channelPatchSchema, ruleCreateSchema, rulePatchSchema, calendarSchema *openapi3.Schema
	// secrets seals channels' secrets (Config.Secrets); httpPolicy
	// judges their URLs (Config.HTTPPolicy); notifier sends test
	// messages (Config.Notifier).
	secrets    jobs.Sealer
	httpPolicy *egress.Policy
	notifier   Notifier
	// open: no authentication (Config.Open). perms are the operations'
	// permissions by operationId, keys the verified keys (auth.go).
	open   bool
	jwt    *JWTConfig
	perms  map[string]permission
	keys   keyCache
	limits limiters
}

// New builds a Server from cfg, filling in defaults.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		store:        cfg.Store,
		log:          cfg.Logger,
		registry:     cfg.Registry,
		tracer:       cfg.Tracer,
		readyTimeout: cfg.ReadyTimeout,
		cluster:      cfg.Cluster,
		clusterWait:  cfg.ClusterTimeout,
		executors:    cfg.Executors,
		changes:      cfg.Changes,
		changeBuffer: cmp.Or(cfg.ChangeBuffer, watchBuffer),
		retention:    cfg.Retention,
		open:         cfg.Open,
		limits:       limiters{cfg: cfg.Limits},
		jwt:          cfg.JWT,
		secrets:      cfg.Secrets,
		httpPolicy:   cfg.HTTPPolicy,
		notifier:     cfg.Notifier,
	}
	if s.retention <= 0 {
		s.retention = 90 * 24 * time.Hour
	}
	if s.executors != nil {
		s.waits = waits.NewCache(waits.Sources{States: s.executors.BreakerStates, Consumers: s.executors.QueueConsumers,
			Seen: s.store.ListHandlersSeen}, waitsTTL, nil)
	}
	// The use cases compute schedules from the database's clock, as the
	// scanners judge due times by it; jobs measures its offset now and
	// then rather than reading it for every request.
	svc, err := jobs.New(jobs.Config{Store: cfg.Store, Executors: cfg.Executors, DefaultRetry: cfg.DefaultRetry,
		DefaultMissed: cfg.DefaultMissed, DefaultOverlap: cfg.DefaultOverlap, HTTPPolicy: cfg.HTTPPolicy, Secrets: cfg.Secrets,
		MaxLogCap: cfg.MaxLogCap})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.jobs = svc
	s.applySets = applyset.New(svc, cfg.Store)
	if err := s.loadSchemas(); err != nil {
		return nil, err
	}
	hist, err := durationHistogram(s.registry)
	if err != nil {
		return nil, err
	}
	s.duration = hist
	if err := registerLastSuccesses(s.registry, cfg.Store, s.log); err != nil {
		return nil, err
	}
	s.metrics = promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorLog: slogPrinter{s.log}})

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.observe)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.ErrorContext(c.Request().Context(), "handler panicked",
				"method", c.Request().Method, "path", c.Request().URL.Path, "err", err, "stack", string(stack))
			return err
		},
	}))
	// Before any handler: the Host, CORS (a preflight is answered here),
	// the parameters' text, the body's media type.
	for _, m := range []echo.MiddlewareFunc{hostCheck(cfg.AllowedHosts), cors(cfg.CORSOrigins), checkParams, requireJSON,
		budget(cfg.Limits.RequestTimeout), readShare(cfg.Limits.ReadShare)} {
		if m != nil {
			e.Use(m)
		}
	}
	// Then, per operation, who may call it (auth.go) and, on the writes
	// that take an Idempotency-Key, the key.
	ops := s.guards()
	for op, m := range s.idempotentOperations() {
		ops[op] = append(ops[op], m...)
	}
	router := newVerbRouter(e)
	RegisterHandlersWithOptions(router, &endpoints{s}, RegisterHandlersOptions{OperationMiddlewares: ops})
	s.verbRoutes = router.routes
	s.routes = make(map[string]bool)
	for _, r := range e.Routes() {
		s.routes[r.Path] = true
	}
	s.echo = e
	return s, nil
}

// loadSchemas reads the request schemas that bodies are checked against
// from the embedded OpenAPI document.
func (s *Server) loadSchemas() error {
	doc, err := GetSpec()
	if err != nil {
		return fmt.Errorf("api: load embedded OpenAPI document: %w", err)
	}
	for name, dst := range map[string]**openapi3.Schema{
		"JobCreate": &s.createSchema, "JobPatch": &s.patchSchema, "JobSelection": &s.selectionSchema,
		"PreviewRequest": &s.previewSchema, "JobResumeSelection": &s.resumeSelectionSchema,
		"ResumeOptions": &s.resumeSchema, "NamespaceSettings": &s.namespaceSchema, "BackfillRequest": &s.backfillSchema,
		"KeyCreate": &s.keySchema, "ChannelCreate": &s.channelCreateSchema, "ChannelPatch": &s.channelPatchSchema,
		"RuleCreate": &s.ruleCreateSchema, "RulePatch": &s.rulePatchSchema, "CalendarSpec": &s.calendarSchema,
	} {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			return fmt.Errorf("api: OpenAPI document has no schema %s", name)
		}
		*dst = ref.Value
	}
	perms, err := permissions(doc)
	if err != nil {
		return err
	}
	s.perms = perms
	return nil
}

// durationHistogram registers the request duration histogram on reg, or
// returns the one a Server before registered there (tests, a restart in
// process).
func durationHistogram(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tock_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request of the API, by method, route template and status code.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route", "status"})
	err := reg.Register(hist)
	if err == nil {
		return hist, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("api: register metrics: %w", err)
}

// Handler is the API's HTTP handler (the Echo instance).
func (s *Server) Handler() http.Handler { return s.echo }

// observe records every request in the duration histogram. It hands errors
// to the error handler itself so that the status it records is the one
// sent.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		route := c.Path() // routed before any middleware runs
		if !s.routes[route] {
			route = "unmatched" // keep unknown paths out of the label set
		}
		// A literal colon is escaped in an Echo route (/v1/jobs\:batch);
		// the label shows the path as clients send it.
		route = strings.ReplaceAll(route, `\:`, ":")
		method := methodLabel(c.Request().Method)
		var span trace.Span
		if s.tracer != nil {
			span = s.startSpan(c, method, route)
		}
		if err := next(c); err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		if span != nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}
		s.duration.WithLabelValues(method, route, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		return nil
	}
}

// startSpan starts a request's server span, a child of the client's
// (its traceparent header), named by its method and route template, and
// puts it in the request's context.
func (s *Server) startSpan(c echo.Context, method, route string) trace.Span {
	req := c.Request()
	ctx := telemetry.Propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	ctx, span := s.tracer.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(route),
			semconv.URLPath(req.URL.Path), semconv.URLScheme(c.Scheme())))
	c.SetRequest(req.WithContext(ctx))
	return span
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// slogPrinter adapts slog to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("serve metrics", "err", fmt.Sprint(v...)) }
