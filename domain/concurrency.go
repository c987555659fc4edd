package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
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
	var errs []FieldError
	if strings.TrimSpace(c.Key) == "" {
		errs = append(errs, FieldError{"key", "is required"})
	} else if _, err := parseKey(c.Key); err != nil {
		errs = append(errs, FieldError{"key", "is not a template: " + err.Error()})
	}
	if c.Limit < 1 || c.Limit > MaxSlotLimit {
		errs = append(errs, FieldError{"limit", fmt.Sprintf("must be between 1 and %d", MaxSlotLimit)})
	}
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
