package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"
)

// Concurrency scopes: which jobs share a key's slots.
const (
	// ScopeNamespace: the jobs of the namespace naming the key.
	ScopeNamespace = "namespace"
	// ScopeCluster: every job naming the key, whatever its namespace.
	ScopeCluster = "cluster"
)

// What an execution does when its key's slots are all held.
const (
	// OnLimitWait waits (state waiting) until a slot is freed, oldest
	// first.
	OnLimitWait = "wait"
	// OnLimitSkip does not run: a fired run is skipped (reason
	// SkipConcurrency), a run re-queued otherwise is cancelled.
	OnLimitSkip = "skip"
	// OnLimitCancelOldest cancels the key's oldest unended execution (as
	// POST /cancel does) and waits for the slot it frees.
	OnLimitCancelOldest = "cancel_oldest"
)

// SkipConcurrency: the run's concurrency key was at its limit and its
// job's on_limit is skip.
const SkipConcurrency = "concurrency"

// MaxSlotKey caps a rendered concurrency key, in bytes; MaxSlotLimit a
// key's limit.
const (
	MaxSlotKey   = 256
	MaxSlotLimit = 10_000
)

// Concurrency limits how many executions sharing a key run at once. The
// key is a Go text/template over the job's labels and payload (".labels.
// customer", ".payload.account_id"), rendered when the job is written:
// both are the job's, so every execution of the job has the same key. An
// execution holds one of the key's slots from when it is queued until it
// ends, whatever the end; one that finds Limit slots held does what
// OnLimit says.
type Concurrency struct {
	Key     string `json:"key"`
	Limit   int    `json:"limit"`
	Scope   string `json:"scope,omitempty"`
	OnLimit string `json:"on_limit,omitempty"`
	// Slot is the key as the job's executions carry it (SlotKey's),
	// set when the job is written.
	Slot string `json:"slot_key,omitempty"`
}

// WithDefaults fills the fields c leaves empty: scope namespace, on_limit
// wait.
func (c Concurrency) WithDefaults() Concurrency {
	if c.Scope == "" {
		c.Scope = ScopeNamespace
	}
	if c.OnLimit == "" {
		c.OnLimit = OnLimitWait
	}
	return c
}

// Validate lists what is wrong with c itself (fields as the API names
// them, under "concurrency"); the key's rendering is SlotKey's.
func (c Concurrency) Validate() []FieldError {
	errs := keyFaults(c.Key, c.Limit)
	switch c.Scope {
	case "", ScopeNamespace, ScopeCluster:
	default:
		errs = append(errs, FieldError{"scope", "must be one of namespace, cluster"})
	}
	switch c.OnLimit {
	case "", OnLimitWait, OnLimitSkip, OnLimitCancelOldest:
	default:
		errs = append(errs, FieldError{"on_limit", "must be one of wait, skip, cancel_oldest"})
	}
	return errs
}

// keyFaults lists what is wrong with a key template and its limit.
func keyFaults(key string, limit int) []FieldError {
	var errs []FieldError
	if strings.TrimSpace(key) == "" {
		errs = append(errs, FieldError{"key", "is required"})
	} else if _, err := parseKey(key); err != nil {
		errs = append(errs, FieldError{"key", "is not a template: " + err.Error()})
	}
	if limit < 1 || limit > MaxSlotLimit {
		errs = append(errs, FieldError{"limit", fmt.Sprintf("must be between 1 and %d", MaxSlotLimit)})
	}
	return errs
}

func parseKey(key string) (*template.Template, error) {
	return template.New("key").Option("missingkey=error").Parse(key)
}

// SlotKey renders c's key over a job's labels and payload (its JSON; nil
// for none) and scopes it: "ns:<namespace>:<key>" or "cluster:<key>", the
// form executions carry. A key that cannot be rendered (a label or a
// payload field it names is missing), renders empty, or is over
// MaxSlotKey bytes is an error: a job never runs without its limit.
func (c Concurrency) SlotKey(namespace string, labels Labels, payload json.RawMessage) (string, error) {
	t, err := parseKey(c.Key)
	if err != nil {
		return "", err
	}
	data := map[string]any{"labels": map[string]string(labels), "payload": nil}
	if labels == nil {
		data["labels"] = map[string]string{}
	}
	if len(payload) > 0 {
		var p any
		if err := json.Unmarshal(payload, &p); err != nil {
			return "", fmt.Errorf("payload: %w", err)
		}
		data["payload"] = p
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("cannot be rendered over the job's labels and payload: %w", err)
	}
	key := b.String()
	switch {
	case strings.TrimSpace(key) == "":
		return "", fmt.Errorf("renders empty over the job's labels and payload")
	case len(key) > MaxSlotKey:
		return "", fmt.Errorf("renders %d bytes, over %d", len(key), MaxSlotKey)
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return "", fmt.Errorf("renders a key that is not text")
	}
	if c.WithDefaults().Scope == ScopeCluster {
		return "cluster:" + key, nil
	}
	return "ns:" + namespace + ":" + key, nil
}

// SlotKeyParts splits a scoped key SlotKey made into its scope, namespace
// ("" for cluster) and key as the job's template rendered it.
func SlotKeyParts(slot string) (scope, namespace, key string) {
	if rest, ok := strings.CutPrefix(slot, "cluster:"); ok {
		return ScopeCluster, "", rest
	}
	rest := strings.TrimPrefix(slot, "ns:")
	namespace, key, _ = strings.Cut(rest, ":")
	return ScopeNamespace, namespace, key
}

// What an execution over its rate limit does.
const (
	// RateWait starts it later, when the key's window has room, in the
	// order the executions came.
	RateWait = "wait"
	// RateSkip skips it (reason SkipRateLimit).
	RateSkip = "skip"
)

// SkipRateLimit: the run's rate-limit key had no room and its job's
// on_limit is skip.
const SkipRateLimit = "rate_limit"

// RateLimit bounds how many executions sharing a key tock releases to
// the executors per window: at most Limit in any Per, at most Burst of
// them back to back (the rest spaced Per/Limit apart; Burst 0 is Limit).
// The key is a template as Concurrency's, scoped to the namespace; every
// job of the namespace naming the same key shares its window (each
// execution is held to its own job's figures). Executions over it are
// released later, in the order they came, or skipped (OnLimit skip).
type RateLimit struct {
	Key     string `json:"key"`
	Limit   int    `json:"limit"`
	Per     string `json:"per"`
	Burst   int    `json:"burst,omitempty"`
	OnLimit string `json:"on_limit,omitempty"`
	// Slot and PerMS are the key as executions carry it and Per in
	// milliseconds, set when the job is written.
	Slot  string `json:"slot_key,omitempty"`
	PerMS int64  `json:"per_ms,omitempty"`
}

// MaxRatePer is the longest rate-limit window.
const MaxRatePer = 24 * time.Hour

// Validate lists what is wrong with r itself (fields under "rate_limit").
func (r RateLimit) Validate() []FieldError {
	errs := keyFaults(r.Key, r.Limit)
	if d, err := time.ParseDuration(r.Per); err != nil || d < 100*time.Millisecond || d > MaxRatePer {
		errs = append(errs, FieldError{"per", "must be a duration from 100ms to 24h, like 10s or 1m"})
	}
	if r.Burst < 0 || r.Burst > r.Limit {
		errs = append(errs, FieldError{"burst", "must be between 1 and limit"})
	}
	switch r.OnLimit {
	case "", RateWait, RateSkip:
	default:
		errs = append(errs, FieldError{"on_limit", "must be one of wait, skip"})
	}
	return errs
}

// Prepared is r with its defaults, its key rendered over a job's labels
// and payload (as Concurrency.SlotKey renders, with "rate:" before the
// namespace) and Per in milliseconds.
func (r RateLimit) Prepared(namespace string, labels Labels, payload json.RawMessage) (RateLimit, error) {
	slot, err := Concurrency{Key: r.Key}.SlotKey(namespace, labels, payload)
	if err != nil {
		return r, err
	}
	d, _ := time.ParseDuration(r.Per)
	r.Slot, r.PerMS = "rate:"+slot, d.Milliseconds()
	if r.Burst == 0 {
		r.Burst = r.Limit
	}
	if r.OnLimit == "" {
		r.OnLimit = RateWait
	}
	return r, nil
}
