package domain

import "net/url"

// Handler types. A custom handler's executions go to the executors
// subscribed to its name.
const (
	HandlerHTTP   = "http"
	HandlerNATS   = "nats"
	HandlerCustom = "custom"
)

// Handler says who runs a job's executions.
type Handler struct {
	// Type is http, nats or custom.
	Type string `json:"type"`
	// Name is the custom handler's name (a NATS subject token:
	// letters, digits, '-' and '_'), for Type custom.
	Name string `json:"name,omitempty"`
	// URL, Method and Headers describe the request, for Type http.
	// Method defaults to POST. The body sent is the job's payload.
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// SecretHeaders are headers whose values are secret, for Type http:
	// sealed (SealedSecret), opened only by the executor that sends the
	// request. Their names do not repeat Headers' (in any case).
	SecretHeaders map[string]SealedSecret `json:"secret_headers,omitempty"`
	// Subject is where the payload is published, for Type nats; with
	// WaitReply the handler waits for a reply and records it as output.
	Subject   string `json:"subject,omitempty"`
	WaitReply bool   `json:"wait_reply,omitempty"`
	// Log is what is kept of each attempt's log (issue 38); nil means the
	// defaults (LogPolicy.WithDefaults).
	Log *LogPolicy `json:"log,omitempty"`
}

// Queue is the handler's queue name: the custom handler's name, or the
// built-in type. Executors serve queues; the wire protocol puts it in the
// execution subjects and the consumers' names.
func (h Handler) Queue() string {
	if h.Type == HandlerCustom {
		return h.Name
	}
	return h.Type
}

// Key names the handler for its circuit breaker and its concurrency
// limit: the custom handler's name, the HTTP target's host (host:port as
// written in the URL), or the NATS subject, prefixed with its type for the
// built-ins ("http:api.example.com", "nats:orders.sync").
func (h Handler) Key() string {
	switch h.Type {
	case HandlerCustom:
		return h.Name
	case HandlerHTTP:
		if u, err := url.Parse(h.URL); err == nil && u.Host != "" {
			return HandlerHTTP + ":" + u.Host
		}
		return HandlerHTTP + ":" + h.URL
	case HandlerNATS:
		return HandlerNATS + ":" + h.Subject
	}
	return h.Type
}
