// Package notify delivers notifications: the messages of notification
// rules to their channels (signed JSON webhooks, Slack-compatible
// webhooks), and the decisions recording cannot take — a job silent for
// longer than its schedule allows, a handler's circuit breaker opening
// and closing.
//
// What happened is decided once in the cluster (store: execution and job
// events in the transaction that records an executor's event; silence
// under a cluster lock; breakers by a conditional write), as rows unique
// by what they are about. Every node with the scheduler role runs a
// Service: it groups a rule's pending events into one message per
// channel at most every group interval, and delivers messages at least
// once, each under its stable id, retried with backoff; a node that dies
// while delivering lets the message's lease run out and another node
// delivers it again, under the same id. Deliveries go through the egress
// guard of the http handler.
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Defaults of Config.
const (
	DefaultPoll       = time.Second
	DefaultLease      = 30 * time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultMaxBackoff = 5 * time.Minute
	DefaultMaxAge     = 24 * time.Hour
	DefaultSilence    = 5 * time.Second
	// maxResponse is how much of a receiver's answer is read (and kept,
	// on a failure, in the attempt's error).
	maxResponse = 512
)

// Opener opens sealed secrets; *secret.Keyring is one.
type Opener interface {
	Open(keyID string, sealed, ad []byte) ([]byte, error)
}

// Store is what a Service needs of the database; *store.Store is one.
type Store interface {
	Listen(ctx context.Context, fn func(channel, payload string), channels ...string) error
	GroupNotifications(ctx context.Context, limit int, build store.BuildMessage) (int, error)
	ClaimNotifications(ctx context.Context, limit int, lease time.Duration) ([]store.Delivery, error)
	RecordDelivery(ctx context.Context, id uuid.UUID, a model.DeliveryAttempt, sent bool, next *time.Time) error
	ListActiveRules(ctx context.Context, ns string) ([]*model.Rule, error)
	SilenceSweep(ctx context.Context, fn func(context.Context) error) (bool, error)
	ListSilenceCandidates(ctx context.Context, r *model.Rule) ([]store.SilentCandidate, error)
	CreateNotifyEvents(ctx context.Context, evs []model.NotifyEvent) (int, error)
	SaveHandlerBreaker(ctx context.Context, handler string, open bool, since time.Time) (changed, known bool, err error)
	SaveHandlerStates(ctx context.Context, changes []model.BreakerChange, seen []model.HandlerSeen) error
	DeleteOldBreakerHistory(ctx context.Context, now time.Time) error
	ListHandlerRules(ctx context.Context, kind, handler string) ([]*model.Rule, error)
}

// Config configures a Service. Store and Egress are required.
type Config struct {
	Store Store
	// Egress guards every delivery, as it guards the http handler.
	Egress *egress.Policy
	// Keys open channels' secrets; nil: channels with a secret fail.
	Keys Opener
	// JetStream, when set, is watched for handlers' circuit breakers
	// (wire.BreakerBucket): handler.open and handler.close.
	JetStream jetstream.JetStream
	// Node names this node in delivery attempts.
	Node string
	// Poll is how often pending work is looked for between wake-ups;
	// Lease how long a claimed message is this node's; Timeout bounds
	// one delivery; MaxBackoff caps the wait between attempts; MaxAge is
	// how long a message is retried before it fails for good; Silence is
	// how often silent jobs are looked for.
	Poll, Lease, Timeout, MaxBackoff, MaxAge, Silence time.Duration
	Logger                                            *slog.Logger
	Registerer                                        prometheus.Registerer
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Poll, DefaultPoll}, {&c.Lease, DefaultLease}, {&c.Timeout, DefaultTimeout},
		{&c.MaxBackoff, DefaultMaxBackoff}, {&c.MaxAge, DefaultMaxAge}, {&c.Silence, DefaultSilence}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service groups and delivers notifications, and decides silence and
// breaker events; see the package comment.
type Service struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	m      metrics
	wake   chan struct{}
	// schedules are the compiled schedules of the jobs silence is looked
	// for in.
	schedules schedule.Cache

	mu sync.Mutex
	// openHandlers are the handlers this node last saw open;
	// savedBreakers what it last recorded of each handler's breaker (a
	// handler's record is written only when this node sees it change).
	openHandlers, savedBreakers map[string]bool
	// prunedBreakers: when old breaker transitions were last deleted;
	// recordedBreakers the transitions this node wrote (recordStates'
	// keys) and seenWritten when it last wrote that a handler is served.
	prunedBreakers   time.Time
	recordedBreakers map[string]bool
	seenWritten      map[string]time.Time
}

type metrics struct {
	sent, failed *prometheus.CounterVec
}

// New returns a Service; Run runs it.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Egress == nil {
		return nil, errors.New("notify: Store and Egress are required")
	}
	cfg = cfg.withDefaults()
	client := cfg.Egress.Client()
	client.Timeout = cfg.Timeout
	m := metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tock_notifications_sent_total",
			Help: "Notification messages delivered (the receiver answered 2xx), by channel."}, []string{"namespace", "channel"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tock_notifications_failed_total",
			Help: "Notification delivery attempts that failed (retried later, or given up), by channel."}, []string{"namespace", "channel"}),
	}
	var err error
	m.sent = promreg.Register(cfg.Registerer, m.sent, &err)
	m.failed = promreg.Register(cfg.Registerer, m.failed, &err)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, client: client, log: cfg.Logger, m: m, wake: make(chan struct{}, 1), openHandlers: map[string]bool{}, savedBreakers: map[string]bool{},
		recordedBreakers: map[string]bool{}, seenWritten: map[string]time.Time{}}, nil
}

// Run groups and delivers until ctx ends, and (with its own loops) looks
// for silent jobs and watches handlers' breakers.
func (s *Service) Run(ctx context.Context) error {
	go s.listen(ctx)
	go s.silenceLoop(ctx)
	if s.cfg.JetStream != nil {
		go s.watchBreakers(ctx)
	}
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		s.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
	}
}

// listen wakes the Service when events or messages are written.
func (s *Service) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.cfg.Store.Listen(ctx, func(string, string) {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}, store.NotifyChannel)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listen for notifications; polling meanwhile", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// pass groups what is due and delivers what is claimable, until a claim
// comes back empty.
func (s *Service) pass(ctx context.Context) {
	if _, err := s.cfg.Store.GroupNotifications(ctx, 50, Build); err != nil && ctx.Err() == nil {
		s.log.Warn("group notifications", "err", err)
	}
	for ctx.Err() == nil {
		ds, err := s.cfg.Store.ClaimNotifications(ctx, 20, s.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("claim notifications", "err", err)
			}
			return
		}
		if len(ds) == 0 {
			return
		}
		done := make(chan struct{}, len(ds))
		for _, d := range ds {
			go func() {
				defer func() { done <- struct{}{} }()
				s.deliver(ctx, d)
			}()
		}
		for range ds {
			<-done
		}
	}
}

// retry is the backoff between attempts: the execution retry policy's
// own computation (domain.RetryPolicy.Delay), from a second up to
// MaxBackoff, with equal jitter.
func (s *Service) retry(attempt int) time.Duration {
	p := domain.RetryPolicy{InitialBackoff: "1s", MaxBackoff: s.cfg.MaxBackoff.String(), Jitter: domain.JitterEqual}
	return p.Delay(attempt, rand.Float64())
}

// deliver makes one attempt at d and records it.
func (s *Service) deliver(ctx context.Context, d store.Delivery) {
	n, c := d.Notification, d.Channel
	a := s.send(ctx, c, n.ID, n.Body)
	sent := a.Error == ""
	var next *time.Time
	if !sent {
		s.m.failed.WithLabelValues(c.Namespace, c.Name).Inc()
		if t := s.cfg.Now().Add(s.retry(n.Attempts + 1)); t.Sub(n.CreatedAt) < s.cfg.MaxAge {
			next = &t
		}
		s.log.Warn("notification not delivered", "notification", n.ID, "channel", c.Namespace+"/"+c.Name,
			"attempt", n.Attempts+1, "status", a.Status, "err", a.Error, "retry_at", next)
	} else {
		s.m.sent.WithLabelValues(c.Namespace, c.Name).Inc()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.cfg.Store.RecordDelivery(fctx, n.ID, a, sent, next); err != nil {
		// The lease runs out and the message is delivered again, under
		// its id.
		s.log.Error("record notification attempt", "notification", n.ID, "err", err)
	}
}

// send posts body, message id's, to channel c once and says how it went.
func (s *Service) send(ctx context.Context, c *model.Channel, id uuid.UUID, body []byte) model.DeliveryAttempt {
	start := s.cfg.Now()
	a := model.DeliveryAttempt{At: start.UTC().Truncate(time.Millisecond), Node: s.cfg.Node}
	status, err := s.post(ctx, c, id, body)
	a.Status, a.TookMS = status, s.cfg.Now().Sub(start).Milliseconds()
	if err != nil {
		a.Error = err.Error()
	}
	return a
}

func (s *Service) post(ctx context.Context, c *model.Channel, id uuid.UUID, body []byte) (int, error) {
	var secret []byte
	if len(c.Secret) > 0 {
		if s.cfg.Keys == nil {
			return 0, errors.New("this node has no --secret-key-file to open the channel's secret")
		}
		var err error
		if secret, err = s.cfg.Keys.Open(c.SecretKeyID, c.Secret, domain.ChannelSecretAD); err != nil {
			return 0, fmt.Errorf("open the channel's secret: %w", err)
		}
	}
	url := c.URL
	switch c.Type {
	case model.ChannelSlack:
		url = string(secret)
		var err error
		if body, err = slackBody(body); err != nil {
			return 0, err
		}
	case model.ChannelWebhook:
	default:
		return 0, fmt.Errorf("unknown channel type %q", c.Type)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tock-notify/1")
	if c.Type == model.ChannelWebhook {
		req.Header.Set(IDHeader, id.String())
		if secret != nil {
			req.Header.Set(SignatureHeader, Sign(secret, body, s.cfg.Now()))
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// Go's error names the whole URL, and a Slack URL is a secret:
		// the attempt's error (stored, listed, logged) names its origin.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s %s: %w", ue.Op, origin(req.URL), ue.Err)
		}
		return 0, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s: %s", resp.Status, oneLine(string(answer), 200))
	}
	return resp.StatusCode, nil
}

// Test sends a sample message of rule r (nil: of no rule) to channel c
// now, once, and says how it went: POST .../test.
func (s *Service) Test(ctx context.Context, c *model.Channel, r *model.Rule) model.DeliveryAttempt {
	id, body, err := testMessage(c, r, s.cfg.Now())
	if err != nil {
		return model.DeliveryAttempt{At: s.cfg.Now().UTC(), Error: err.Error(), Node: s.cfg.Node}
	}
	return s.send(ctx, c, id, body)
}

// origin is u's scheme and host: what an error may say of a URL that is
// a secret.
func origin(u *neturl.URL) string { return u.Scheme + "://" + u.Host }
