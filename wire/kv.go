package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Key-value buckets (JetStream KV) that carry control state to executors
// and back. Both are created by EnsureStreams.
const (
	// CancelBucket holds one key per cancelled execution (the execution
	// id; the value is the cancel time, RFC 3339). Executors watch it: a
	// cancelled execution they have not started is not started, and a
	// running attempt has its context cancelled. Keys expire after
	// CancelTTL.
	CancelBucket = "TOCK_CANCELLED"
	CancelTTL    = 24 * time.Hour
	// BreakerBucket holds each executor's view of each handler it has
	// served: one BreakerState per (handler, executor), refreshed every
	// BreakerStateEvery and expiring BreakerStateTTL after the executor's
	// last write, so a dead executor's entries vanish.
	BreakerBucket     = "TOCK_HANDLERS"
	BreakerStateEvery = 10 * time.Second
	BreakerStateTTL   = time.Minute
)

// ensureKV creates the buckets with replicas copies (at least one), or
// updates an existing bucket whose count differs (replicas 0: never).
func ensureKV(ctx context.Context, js jetstream.JetStream, replicas int) error {
	buckets := []jetstream.KeyValueConfig{
		{Bucket: CancelBucket, Description: "tock: cancelled executions", TTL: CancelTTL,
			Storage: jetstream.FileStorage},
		{Bucket: BreakerBucket, Description: "tock: circuit breaker and load of each handler, per executor",
			TTL: BreakerStateTTL, Storage: jetstream.MemoryStorage},
	}
	for _, cfg := range buckets {
		cfg.Replicas = max(replicas, 1)
		if err := ensureBucket(ctx, js, cfg, replicas != 0); err != nil {
			return fmt.Errorf("ensure key-value bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// ensureBucket creates the bucket if it is missing; an existing one is
// updated only if scale is set and its replica count differs (see
// ensureStream for why not otherwise).
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, scale bool) error {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			err = nil // created by another process meanwhile
		}
		return err
	}
	if err != nil || !scale {
		return err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo().Config.Replicas == cfg.Replicas {
		return nil
	}
	_, err = js.UpdateKeyValue(ctx, cfg)
	return err
}

// CancelExecution tells executors that the execution is cancelled. It is
// idempotent. The caller records the cancellation in Postgres first; this
// only stops the work.
func CancelExecution(ctx context.Context, js jetstream.JetStream, executionID string) error {
	kv, err := js.KeyValue(ctx, CancelBucket)
	if err != nil {
		return fmt.Errorf("cancel execution %s: %w", executionID, err)
	}
	if _, err := kv.PutString(ctx, executionID, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("cancel execution %s: %w", executionID, err)
	}
	return nil
}

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerHalfOpen = "half-open"
	BreakerOpen     = "open"
)

// BreakerState is one executor's view of one handler key: its breaker and load.
type BreakerState struct {
	// Key is the handler key (domain.Handler.Key); Queue its queue.
	Key        string `json:"handler"`
	Queue      string `json:"queue"`
	ExecutorID string `json:"executor_id"`
	// Breaker is closed, half-open or open; Since is when it became so,
	// and Reason why, in words ("5 of 6 attempts failed within 1m0s").
	Breaker string    `json:"breaker"`
	Since   time.Time `json:"since"`
	Reason  string    `json:"reason,omitempty"`
	// ProbeAt is, while the breaker is open, when it half-opens to let
	// probe attempts through.
	ProbeAt *time.Time `json:"probe_at,omitempty"`
	// Requests and Failures are the attempts counted in the breaker's
	// current window.
	Requests uint32 `json:"requests"`
	Failures uint32 `json:"failures"`
	// InFlight is how many attempts of the handler this executor runs;
	// Limit its concurrency limit for the handler (0: none).
	InFlight int `json:"in_flight"`
	Limit    int `json:"limit,omitempty"`
	// UpdatedAt is when the executor wrote this.
	UpdatedAt time.Time `json:"updated_at"`
	// Version names the executor's software and version ("tock-go
	// v1.2.0", "@tock-sched/executor 0.1.0").
	Version string `json:"version,omitempty"`
}

// EntryKey is the BreakerBucket key of s: handler and executor id, each
// base64url-encoded (keys allow few characters).
func (s BreakerState) EntryKey() string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(s.Key)) + "." + enc.EncodeToString([]byte(s.ExecutorID))
}

// PutBreakerState writes s to kv (the BreakerBucket).
func PutBreakerState(ctx context.Context, kv jetstream.KeyValue, s BreakerState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, s.EntryKey(), data); err != nil {
		return fmt.Errorf("put handler state %s: %w", s.Key, err)
	}
	return nil
}

// BreakerStates reads every live entry of the BreakerBucket.
func BreakerStates(ctx context.Context, js jetstream.JetStream) ([]BreakerState, error) {
	kv, err := js.KeyValue(ctx, BreakerBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("handler states: %w", err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("handler states: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var states []BreakerState
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("handler state %s: %w", key, err)
		}
		var s BreakerState
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			continue // not ours
		}
		states = append(states, s)
	}
	return states, nil
}
