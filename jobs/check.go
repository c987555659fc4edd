package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
)

// Limits on what a job may say.
const (
	// MaxNameLen is the longest job or namespace name.
	MaxNameLen = 200
	// MaxTimeout is the longest attempt timeout.
	MaxTimeout    = 24 * time.Hour
	maxHeaderSize = 8 << 10
	// MaxPayloadBytes is the largest payload a job may carry, measured
	// as executors receive it (domain.CheckJSON's size: compact, numbers
	// written out in full, <, > and & escaped as \u003c and the like).
	// With the rest of an execution's message it stays far inside NATS's
	// default max_payload of 1 MiB: a message NATS refuses could never be
	// dispatched.
	MaxPayloadBytes = 256 << 10
)

var (
	nameChars  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	customName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// httpMethods are the methods the http handler may send.
var httpMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// NameProblem says what is wrong with a job or namespace name, or "" if
// nothing is.
func NameProblem(v string) string {
	switch {
	case v == "":
		return "is required"
	case len(v) > MaxNameLen:
		return fmt.Sprintf("must be at most %d characters", MaxNameLen)
	case !nameChars.MatchString(v):
		return "may contain only letters, digits, '.', '_' and '-'"
	}
	return ""
}

func checkName(field, v string, f *faults) {
	if msg := NameProblem(v); msg != "" {
		f.add(field, "%s", msg)
	}
}

// compile is compile with the Service's cache of compiled schedules:
// parsing a cron expression is half of what Build costs, and the jobs of
// a batch, or of a tockbench run, share a few expressions.
func (s *Service) compile(sp schedule.Spec, f *faults) *schedule.Schedule {
	c, err := s.compiled.Compile(sp)
	if err != nil {
		addScheduleError(err, f)
		return nil
	}
	return c
}

func addScheduleError(err error, f *faults) {
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		f.add(fe.Field, "%s", fe.Message)
		return
	}
	f.add("schedule", "%s", err.Error())
}

// checkHandler checks h and returns it with its defaults filled in
// (method POST for http).
func (s *Service) checkHandler(h domain.Handler, f *faults) domain.Handler {
	out := domain.Handler{Type: h.Type}
	notFor := func(field string, set bool) {
		if set {
			f.add("handler."+field, "is not allowed for handler type %s", h.Type)
		}
	}
	switch h.Type {
	case domain.HandlerHTTP:
		out.URL = h.URL
		s.checkURL(out.URL, f)
		out.Method = strings.ToUpper(h.Method)
		if out.Method == "" {
			out.Method = "POST"
		}
		if !httpMethods[out.Method] {
			f.add("handler.method", "must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		}
		if len(h.Headers) > 0 {
			out.Headers = h.Headers
			checkHeaders(out.Headers, f)
		}
		notFor("subject", h.Subject != "")
		notFor("wait_reply", h.WaitReply)
		notFor("name", h.Name != "")
		if len(h.SecretHeaders) > 0 {
			// Sealed values come from Build and Update alone, which seal
			// what callers give in clear (NewJob.SecretHeaders).
			f.add("handler.secret_headers", "must be given in clear, to be sealed by this service")
		}
	case domain.HandlerNATS:
		out.Subject = h.Subject
		if msg := subjectProblem(out.Subject); msg != "" {
			f.add("handler.subject", "%s", msg)
		}
		out.WaitReply = h.WaitReply
		notFor("url", h.URL != "")
		notFor("method", h.Method != "")
		notFor("headers", len(h.Headers) > 0)
		notFor("name", h.Name != "")
	case domain.HandlerCustom:
		out.Name = h.Name
		checkCustomName(out.Name, f)
		notFor("url", h.URL != "")
		notFor("method", h.Method != "")
		notFor("headers", len(h.Headers) > 0)
		notFor("subject", h.Subject != "")
		notFor("wait_reply", h.WaitReply)
	case "":
		f.add("handler.type", "is required")
	default:
		f.add("handler.type", "must be one of http, nats, custom")
	}
	if h.Log != nil {
		for _, fe := range h.Log.Validate(s.maxLogCap) {
			f.add("handler.log."+fe.Field, "%s", fe.Message)
		}
		if *h.Log != (domain.LogPolicy{}) {
			lp := *h.Log
			out.Log = &lp
		}
	}
	return out
}

func checkCustomName(name string, f *faults) {
	switch {
	case name == "":
		f.add("handler.name", "is required for handler type custom")
	case !customName.MatchString(name):
		f.add("handler.name", "must be 1 to 64 letters, digits, '_' or '-'")
	case name == domain.HandlerHTTP || name == domain.HandlerNATS:
		f.add("handler.name", "%q is the name of a built-in handler", name)
	}
}

// checkURL checks an http handler's URL: its form, then the egress
// policy's rules a URL's text can be judged by (a literal address in a
// refused range, tock's own addresses, credentials, ambiguous numeric
// hosts). This is an early, friendly refusal; the executors' check at
// connect time is the one that holds.
func (s *Service) checkURL(raw string, f *faults) {
	if raw == "" {
		f.add("handler.url", "is required for handler type http")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		f.add("handler.url", "is not a URL: %v", err)
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		f.add("handler.url", "must be an absolute http or https URL")
		return
	}
	if err := s.httpPolicy.CheckURL(u); err != nil {
		f.add("handler.url", "%s", err.Error())
	}
}

func checkHeaders(h map[string]string, f *faults) {
	size := 0
	for k, v := range h {
		if !isToken(k) {
			f.add("handler.headers", "%q is not a valid header name", k)
			continue
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			f.add("handler.headers."+k, "must not contain CR, LF or NUL")
		}
		size += len(k) + len(v)
	}
	if size > maxHeaderSize {
		f.add("handler.headers", "must be at most %d bytes in all", maxHeaderSize)
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

// checkRetry checks p (domain.RetryPolicy.Validate's rules) and fills the
// fields it leaves empty from the cluster's default.
func (s *Service) checkRetry(p domain.RetryPolicy, f *faults) domain.RetryPolicy {
	for _, fe := range p.Validate() {
		f.add("retry."+fe.Field, "%s", fe.Message)
	}
	return p.WithDefaults(s.defaultRetry)
}

// checkPolicy checks a job's missed-run and overlap policies and returns
// them with the cluster's defaults filled in.
func (s *Service) checkPolicy(m domain.MissedPolicy, overlap string, f *faults) *domain.JobPolicy {
	for _, fe := range m.Validate() {
		f.add("missed."+fe.Field, "%s", fe.Message)
	}
	if !domain.ValidOverlap(overlap) {
		f.add("overlap", "must be one of %s", strings.Join(domain.Overlaps, ", "))
	}
	p := &domain.JobPolicy{Missed: m.WithDefaults(s.defaults.Missed), Overlap: overlap}
	if p.Overlap == "" {
		p.Overlap = s.defaults.Overlap
	}
	return p
}

// checkPriority checks a priority class; "" is normal.
func checkPriority(p domain.Priority, f *faults) domain.Priority {
	if p == "" {
		return domain.PriorityNormal
	}
	if !p.Valid() {
		f.add("priority", "must be one of high, normal, low")
	}
	return p
}

// checkTimeout checks an attempt timeout; 0 is none.
func checkTimeout(d time.Duration, f *faults) {
	switch {
	case d < 0:
		f.add("timeout", "must be above zero")
	case d > MaxTimeout:
		f.add("timeout", "must be at most 24h")
	}
}

// checkLabels checks a job's labels; faults name "labels.<key>".
func checkLabels(l domain.Labels, f *faults) {
	for _, fe := range l.Validate() {
		f.add(joinField("labels", fe.Field), "%s", fe.Message)
	}
}

// checkDescription checks a job's description.
// checkPayload checks that p, a payload (nil for none), is JSON that
// Postgres's jsonb stores as it is and that fits in an execution's
// message (MaxPayloadBytes).
func checkPayload(p json.RawMessage, f *faults) {
	if len(p) == 0 {
		return
	}
	size, bad := domain.CheckJSON(p)
	for _, b := range bad {
		f.add(domain.JoinJSONPath("payload", b.Path), "%s", b.Message)
	}
	if len(bad) == 0 && size > MaxPayloadBytes {
		f.add("payload", "is %d bytes as executors receive it (compact JSON, numbers written out in full, <, > and & escaped as \\u003c and the like): at most %d (256 KiB) are allowed", size, MaxPayloadBytes)
	}
}

func checkDescription(d string, f *faults) {
	if len(d) > domain.MaxDescription {
		f.add("description", "must be at most %d bytes", domain.MaxDescription)
	}
}

// joinField is field.key, or field when key is "".
func joinField(field, key string) string {
	if key == "" {
		return field
	}
	return field + "." + key
}
