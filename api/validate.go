package api

import (
	"github.com/tock-sched/tock/domain"

	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/tock-sched/tock/schedule"
)

// Limits on what a job may say.
const (
	maxNameLen    = 200
	maxTimeout    = 24 * time.Hour
	maxHeaderSize = 8 << 10
)

var (
	nameChars  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	customName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// httpMethods are the methods the http handler may send.
var httpMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// checkName checks a job or namespace name.
func checkName(field, v string, errs *fieldErrors) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case len(v) > maxNameLen:
		errs.add(field, "must be at most %d characters", maxNameLen)
	case !nameChars.MatchString(v):
		errs.add(field, "may contain only letters, digits, '.', '_' and '-'")
	}
}

// specOf turns the API's schedule into the schedule package's.
func specOf(s *Schedule) schedule.Spec {
	var sp schedule.Spec
	if s == nil {
		return sp
	}
	sp.Cron = deref(s.Cron)
	sp.Timezone = deref(s.Timezone)
	sp.In = deref(s.In)
	if s.At != nil {
		at := s.At.UTC()
		sp.At = &at
	}
	return sp
}

// compileSchedule compiles sp, reporting its faults under the fields the
// schedule package names.
func compileSchedule(sp schedule.Spec, errs *fieldErrors) *schedule.Schedule {
	c, err := schedule.Compile(sp)
	if err != nil {
		addScheduleError(err, errs)
		return nil
	}
	return c
}

func addScheduleError(err error, errs *fieldErrors) {
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		errs.add(fe.Field, "%s", fe.Message)
		return
	}
	errs.add("schedule", "%s", err.Error())
}

// handlerOf checks h and turns it into the wire form, with defaults
// filled in (method POST).
func handlerOf(h Handler, errs *fieldErrors) domain.Handler {
	out := domain.Handler{Type: string(h.Type)}
	notFor := func(field string, set bool) {
		if set {
			errs.add("handler."+field, "is not allowed for handler type %s", h.Type)
		}
	}
	switch h.Type {
	case HandlerTypeHttp:
		out.URL = deref(h.Url)
		checkURL(out.URL, errs)
		out.Method = strings.ToUpper(deref(h.Method))
		if out.Method == "" {
			out.Method = "POST"
		}
		if !httpMethods[out.Method] {
			errs.add("handler.method", "must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		}
		if h.Headers != nil && len(*h.Headers) > 0 {
			out.Headers = *h.Headers
			checkHeaders(out.Headers, errs)
		}
		notFor("subject", deref(h.Subject) != "")
		notFor("wait_reply", deref(h.WaitReply))
		notFor("name", deref(h.Name) != "")
	case HandlerTypeNats:
		out.Subject = deref(h.Subject)
		if msg := subjectProblem(out.Subject); msg != "" {
			errs.add("handler.subject", "%s", msg)
		}
		out.WaitReply = deref(h.WaitReply)
		notFor("url", deref(h.Url) != "")
		notFor("method", deref(h.Method) != "")
		notFor("headers", h.Headers != nil && len(*h.Headers) > 0)
		notFor("name", deref(h.Name) != "")
	case HandlerTypeCustom:
		out.Name = deref(h.Name)
		switch {
		case out.Name == "":
			errs.add("handler.name", "is required for handler type custom")
		case !customName.MatchString(out.Name):
			errs.add("handler.name", "must be 1 to 64 letters, digits, '_' or '-'")
		case out.Name == domain.HandlerHTTP || out.Name == domain.HandlerNATS:
			errs.add("handler.name", "%q is the name of a built-in handler", out.Name)
		}
		notFor("url", deref(h.Url) != "")
		notFor("method", deref(h.Method) != "")
		notFor("headers", h.Headers != nil && len(*h.Headers) > 0)
		notFor("subject", deref(h.Subject) != "")
		notFor("wait_reply", deref(h.WaitReply))
	case "":
		errs.add("handler.type", "is required")
	default:
		errs.add("handler.type", "must be one of http, nats, custom")
	}
	return out
}

func checkURL(raw string, errs *fieldErrors) {
	if raw == "" {
		errs.add("handler.url", "is required for handler type http")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		errs.add("handler.url", "is not a URL: %v", unwrapURLError(err))
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add("handler.url", "must be an absolute http or https URL")
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func checkHeaders(h map[string]string, errs *fieldErrors) {
	size := 0
	for k, v := range h {
		field := "handler.headers." + k
		if !isToken(k) {
			errs.add("handler.headers", "%q is not a valid header name", k)
			continue
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			errs.add(field, "must not contain CR, LF or NUL")
		}
		size += len(k) + len(v)
	}
	if size > maxHeaderSize {
		errs.add("handler.headers", "must be at most %d bytes in all", maxHeaderSize)
	}
}

// isToken reports whether s is an RFC 9110 token, the syntax of a header
// name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// subjectProblem says what is wrong with a NATS subject to publish to, or
// "" if nothing is.
func subjectProblem(s string) string {
	switch {
	case s == "":
		return "is required for handler type nats"
	case len(s) > 255:
		return "must be at most 255 characters"
	case strings.HasPrefix(s, "tock.") || s == "tock":
		return "must not be in tock's own subject space (tock.)"
	case strings.HasPrefix(s, "$"):
		return "must not be a system subject ($...)"
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return "must be dot-separated tokens, none of them empty"
		}
		if tok == "*" || tok == ">" {
			return "must not contain wildcards"
		}
		if strings.ContainsAny(tok, " \t\r\n\x00*>") {
			return "must not contain whitespace, '*' or '>'"
		}
	}
	return ""
}

// retryOf checks r and turns it into the domain's policy (its rules
// are domain.RetryPolicy.Validate's). Durations keep the client's
// spelling. In the domain, zero means "the default"; a client that sends
// max_attempts or multiplier 0 explicitly is told it is out of range.
func retryOf(r *RetryPolicy, errs *fieldErrors) domain.RetryPolicy {
	var out domain.RetryPolicy
	if r == nil {
		return out
	}
	out.InitialBackoff = deref(r.InitialBackoff)
	out.MaxBackoff = deref(r.MaxBackoff)
	if r.MaxAttempts != nil {
		out.MaxAttempts = *r.MaxAttempts
		if out.MaxAttempts == 0 {
			out.MaxAttempts = -1
		}
	}
	if r.Multiplier != nil {
		out.Multiplier = *r.Multiplier
		if out.Multiplier == 0 {
			out.Multiplier = -1
		}
	}
	if r.Jitter != nil {
		out.Jitter = string(*r.Jitter)
	}
	for _, fe := range out.Validate() {
		errs.add("retry."+fe.Field, "%s", fe.Message)
	}
	out.MaxAttempts, out.Multiplier = max(out.MaxAttempts, 0), max(out.Multiplier, 0)
	return out
}

// priorityOf checks an optional priority class; absent (or null) is
// normal.
func priorityOf(p *Priority, errs *fieldErrors) domain.Priority {
	if p == nil || *p == "" {
		return domain.PriorityNormal
	}
	if !p.Valid() {
		errs.add("priority", "must be one of high, normal, low")
	}
	return domain.Priority(*p)
}

// positiveDuration parses an optional Go duration that must be above zero.
func positiveDuration(field string, v *string, errs *fieldErrors) time.Duration {
	if v == nil {
		return 0
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		errs.add(field, "must be a duration such as 1s, 1m30s or 2h")
		return 0
	}
	if d <= 0 {
		errs.add(field, "must be above zero")
		return 0
	}
	return d
}

// timeoutOf checks an attempt timeout.
func timeoutOf(v *string, errs *fieldErrors) time.Duration {
	d := positiveDuration("timeout", v, errs)
	if d > maxTimeout {
		errs.add("timeout", "must be at most %s", formatDuration(maxTimeout))
		return 0
	}
	return d
}

// payloadOf returns the payload compacted, or nil for none (absent or
// null). It is valid JSON already: it came in a parsed body.
func payloadOf(p *json.RawMessage) json.RawMessage {
	if p == nil {
		return nil
	}
	raw := bytes.TrimSpace(*p)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return buf.Bytes()
}

// formatDuration is time.Duration.String without the zero units at its
// end: 1m rather than 1m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
