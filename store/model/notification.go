package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Channel types.
const (
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
)

// Channel is where a rule's messages go: a JSON webhook signed with
// HMAC-SHA256, or a Slack-compatible incoming webhook.
type Channel struct {
	ID        uuid.UUID
	Namespace string
	Name      string
	Type      string
	// URL is where a webhook posts; for Slack, whose URL is its secret,
	// only its scheme and host (the whole URL is sealed in Secret).
	URL string
	// SecretKeyID and Secret are the sealed secret (secret.Keyring): a
	// webhook's signing secret, a Slack channel's URL.
	SecretKeyID string
	Secret      []byte
	Paused      bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Version     int64
}

// Rule chooses a namespace's jobs by label selector and says which of
// their events are sent to which channels.
type Rule struct {
	ID        uuid.UUID
	Namespace string
	Name      string
	// Selector is a label selector (domain.ParseSelector); "" chooses
	// every job of the namespace.
	Selector string
	// Events are event kinds (domain.NotifyKinds).
	Events   []string
	Channels []uuid.UUID
	// FailingAfter is the N of job.failing: that many dead executions in
	// a row.
	FailingAfter int
	// SilentGrace is added to a job's expected interval before job.silent.
	SilentGrace time.Duration
	// LateAfter and SlowAfter are execution.late's and execution.slow's
	// thresholds.
	LateAfter, SlowAfter time.Duration
	// GroupInterval is the least time between two messages of the rule
	// (to a channel): what happens in between goes out together.
	GroupInterval time.Duration
	Paused        bool
	LastSentAt    *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Version       int64
}

// NotifyEvent is one thing that happened that a rule asked to hear of,
// decided once (DedupKey).
type NotifyEvent struct {
	ID          uuid.UUID
	RuleID      uuid.UUID
	Namespace   string
	Kind        string
	JobID       *uuid.UUID
	JobName     string
	ExecutionID *uuid.UUID
	Handler     string
	At          time.Time
	// Detail holds what the kind tells: the error, the count, the delay.
	Detail json.RawMessage
	// DedupKey is the decision's identity: the same decision taken again
	// (another node, an event recorded again) is the same row.
	DedupKey string
}

// Notification states.
const (
	NotificationPending = "pending"
	NotificationSent    = "sent"
	NotificationFailed  = "failed"
)

// Notification is one message of a rule to one of its channels, with the
// body every attempt delivers and the attempts so far.
type Notification struct {
	ID            uuid.UUID
	Namespace     string
	RuleID        uuid.UUID
	ChannelID     uuid.UUID
	State         string
	Kinds         []string
	JobIDs        []uuid.UUID
	Body          json.RawMessage
	CreatedAt     time.Time
	NextAttemptAt *time.Time
	Attempts      int
	AttemptLog    []DeliveryAttempt
	SentAt        *time.Time
	LastError     string
}

// DeliveryAttempt is one try at delivering a notification.
type DeliveryAttempt struct {
	At time.Time `json:"at"`
	// Status is the receiver's HTTP status; 0 when none came.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	TookMS int64  `json:"took_ms"`
	// Node is the tockd node that tried.
	Node string `json:"node,omitempty"`
}
