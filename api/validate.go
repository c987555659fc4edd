package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/schedule"
)

// newJobOf translates a decoded JobCreate into the use case's terms; the
// value checks are jobs'. It returns the request's own faults: a timeout
// that is no duration. An absent namespace is the default one; an
// explicit "" is passed on, and refused.
func newJobOf(req *models.JobCreate) (jobs.NewJob, fieldErrors) {
	var syntax fieldErrors
	nj := jobs.NewJob{
		Namespace: jobs.DefaultNamespace,
		Name:      req.Name,
		Schedule:  specOf(req.Schedule),
		Handler:   handlerOf(req.Handler),
		// The secret values in clear go to jobs, which seals them.
		SecretHeaders: secretsOf(req.Handler),
		Payload:       payloadOf(req.Payload),
		Retry:         retryOf(req.Retry),
		Priority:      priorityOf(req.Priority),
		Timeout:       timeoutOf(req.Timeout, &syntax),
		Labels:        labelsOf(req.Labels),
	}
	if req.Description != nil {
		nj.Description = *req.Description
	}
	nj.Paused = deref(req.Paused)
	nj.Missed = missedOf(req.Missed)
	if req.Overlap != nil {
		nj.Overlap = string(*req.Overlap)
	}
	if c := req.Concurrency; c != nil {
		nj.Concurrency = &domain.Concurrency{Key: c.Key, Limit: c.Limit,
			Scope: string(deref(c.Scope)), OnLimit: string(deref(c.OnLimit))}
	}
	if r := req.RateLimit; r != nil {
		nj.RateLimit = &domain.RateLimit{Key: r.Key, Limit: r.Limit, Per: r.Per, Burst: deref(r.Burst),
			OnLimit: string(deref(r.OnLimit))}
	}
	if req.Calendars != nil {
		nj.Calendars = *req.Calendars
	}
	if req.OnExcluded != nil {
		nj.OnExcluded = string(*req.OnExcluded)
	}
	if req.Namespace != nil {
		nj.Namespace = *req.Namespace
	}
	nj.Depends = dependsOf(dependsFields{req.DependsOn, req.DependsMode, req.DependsMatch, req.WaitTimeout,
		req.OnTimeout, req.OnUpstreamSkipped}, &syntax)
	checkStartAt(nj.Schedule, &syntax)
	return nj, syntax
}

// patchOf translates a decoded JobPatch into the use case's terms: each
// member present (members are the body's) becomes a change, a null one
// the removal of the payload or timeout. It returns the request's own
// faults, as newJobOf does.
func patchOf(req *models.JobPatch, members map[string]json.RawMessage) (jobs.Patch, fieldErrors) {
	has := func(k string) bool { _, ok := members[k]; return ok }
	var (
		p      jobs.Patch
		syntax fieldErrors
	)
	if has("schedule") {
		p.Schedule = ptr(specOf(req.Schedule))
		checkStartAt(*p.Schedule, &syntax)
	}
	if has("handler") && req.Handler != nil {
		p.Handler = ptr(handlerOf(*req.Handler))
		// secret_headers left out keeps the stored ones; null or {}
		// removes them.
		if memberSent(members["handler"], "secret_headers") {
			p.SecretHeaders = ptr(secretsOf(*req.Handler))
		}
	}
	if has("payload") {
		p.Payload = ptr(payloadOf(req.Payload))
	}
	if has("retry") {
		p.Retry = ptr(retryOf(req.Retry))
	}
	if has("priority") {
		p.Priority = ptr(priorityOf(req.Priority))
	}
	if has("timeout") {
		p.Timeout = ptr(timeoutOf(req.Timeout, &syntax))
	}
	if has("labels") {
		p.Labels = ptr(labelsOf(req.Labels))
	}
	if has("description") {
		p.Description = ptr(deref(req.Description))
	}
	if has("missed") {
		p.Missed = ptr(missedOf(req.Missed))
	}
	if has("overlap") {
		p.Overlap = ptr(string(deref(req.Overlap)))
	}
	if has("concurrency") {
		// null or {} removes it.
		p.Concurrency = &domain.Concurrency{}
		if c := req.Concurrency; c != nil {
			p.Concurrency = &domain.Concurrency{Key: deref(c.Key), Limit: deref(c.Limit),
				Scope: string(deref(c.Scope)), OnLimit: string(deref(c.OnLimit))}
		}
	}
	if has("rate_limit") {
		// null or {} removes it.
		p.RateLimit = &domain.RateLimit{}
		if r := req.RateLimit; r != nil {
			p.RateLimit = &domain.RateLimit{Key: deref(r.Key), Limit: deref(r.Limit), Per: deref(r.Per),
				Burst: deref(r.Burst), OnLimit: string(deref(r.OnLimit))}
		}
	}
	if has("calendars") {
		// null removes them, as [] does.
		p.Calendars = ptr(deref(req.Calendars))
	}
	if has("on_excluded") {
		p.OnExcluded = ptr(string(deref(req.OnExcluded)))
	}
	f := dependsFields{req.DependsOn, req.DependsMode, req.DependsMatch, req.WaitTimeout, req.OnTimeout, req.OnUpstreamSkipped}
	if has("depends_on") && req.DependsOn == nil {
		// null removes them, as [] does.
		f.on = &[]models.DependsOn{}
	}
	p.Depends = dependsOf(f, &syntax)
	return p, syntax
}

// missedOf is the domain's form of a missed-run policy (the zero policy,
// all defaults, when absent). An explicit max of 0 is passed on as -1,
// so that jobs refuses it (see retryOf).
func missedOf(m *models.MissedPolicy) domain.MissedPolicy {
	var out domain.MissedPolicy
	if m == nil {
		return out
	}
	out.Grace = deref(m.Grace)
	if m.Policy != nil {
		out.Policy = string(*m.Policy)
	}
	if m.Max != nil {
		out.Max = *m.Max
		if out.Max == 0 {
			out.Max = -1
		}
	}
	return out
}

// labelsOf is the domain's form of the API's labels (nil for none).
func labelsOf(l *models.Labels) domain.Labels {
	if l == nil || len(*l) == 0 {
		return nil
	}
	return domain.Labels(*l)
}

// fieldErrorsOf is the API's form of the use cases' faults.
func fieldErrorsOf(faults []domain.FieldError) fieldErrors {
	if len(faults) == 0 {
		return nil
	}
	out := make(fieldErrors, len(faults))
	for i, f := range faults {
		out[i] = models.FieldError{Field: f.Field, Message: f.Message}
	}
	return out
}

// specOf turns the API's schedule into the schedule package's.
func specOf(s *models.Schedule) schedule.Spec {
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
	sp.Anchor, sp.StartAt, sp.EndAt = utc(s.Anchor), utc(s.StartAt), utc(s.EndAt)
	sp.Jitter = deref(s.Jitter)
	if s.MaxRuns != nil {
		sp.MaxRuns = *s.MaxRuns
		if sp.MaxRuns == 0 {
			sp.MaxRuns = -1 // refused, as an explicit 0 should be
		}
	}
	return sp
}

// lastWritable is the latest time RFC 3339 can write, and so the API's
// JSON: a time after it fails to encode.
var lastWritable = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)

// writable reports whether RFC 3339 can write t (years 0 to 9999, in
// t's own zone).
func writable(t time.Time) bool { return t.Year() >= 0 && t.Year() <= 9999 }

// checkStartAt refuses a cron schedule whose first run from its
// start_at comes after lastWritable (start_at late in 9999, or a rare
// expression a few years after it): the job would be stored with a next
// run no answer can write, and each list holding it would fail.
func checkStartAt(sp schedule.Spec, syntax *fieldErrors) {
	if sp.StartAt == nil || sp.Cron == "" {
		return
	}
	sched, err := schedule.Compile(sp)
	if err != nil {
		return // jobs reports what is wrong with the schedule
	}
	if first, ok := sched.Next(sp.StartAt.Add(-time.Millisecond)); ok && first.After(lastWritable) {
		syntax.add("schedule.start_at", "is too late: the schedule's first run from it, in the year %d, is after the last time the API can write (the end of 9999)", first.Year())
	}
}

// handlerOf turns the API's handler into the domain's, as sent: jobs
// checks it and fills in its defaults.
func handlerOf(h models.Handler) domain.Handler {
	out := domain.Handler{
		Type:      string(h.Type),
		URL:       deref(h.Url),
		Method:    deref(h.Method),
		Subject:   deref(h.Subject),
		WaitReply: deref(h.WaitReply),
		Name:      deref(h.Name),
	}
	if h.Headers != nil && len(*h.Headers) > 0 {
		out.Headers = *h.Headers
	}
	if h.Log != nil {
		out.Log = &domain.LogPolicy{CapBytes: deref(h.Log.CapBytes), Policy: string(deref(h.Log.Policy))}
	}
	return out
}

// secretsOf is the secret headers h gives, in clear (nil for none, or
// null).
func secretsOf(h models.Handler) map[string]string {
	if h.SecretHeaders == nil || len(*h.SecretHeaders) == 0 {
		return nil
	}
	return *h.SecretHeaders
}

// memberSent reports whether the JSON object obj has a member key, null
// included.
func memberSent(obj json.RawMessage, key string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return false
	}
	_, ok := members[key]
	return ok
}

// retryOf turns r into the domain's policy; jobs checks it
// (domain.RetryPolicy.Validate's rules). Durations keep the client's
// spelling. In the domain, zero means "the default"; a client that sends
// max_attempts or multiplier 0 explicitly is to be told it is out of
// range, so an explicit 0 is passed on as -1.
func retryOf(r *models.RetryPolicy) domain.RetryPolicy {
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
	return out
}

// priorityOf is an optional priority class; absent (or null) is "", which
// jobs reads as normal.
func priorityOf(p *models.Priority) domain.Priority {
	if p == nil {
		return ""
	}
	return domain.Priority(*p)
}

// timeoutOf parses an optional attempt timeout; absent (or null) is 0,
// none. A value that is no duration is the request's fault. One at or
// below zero, which the domain would read as none, is passed on as -1 so
// that jobs refuses it, as retryOf does with an explicit 0.
func timeoutOf(v *string, syntax *fieldErrors) time.Duration {
	if v == nil {
		return 0
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		syntax.add("timeout", "must be a duration such as 1s, 1m30s or 2h")
		return 0
	}
	if d <= 0 {
		return -1
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

// selectorOf parses a label selector ("" selects everything), reporting a
// bad one under "selector".
func selectorOf(raw string, errs *fieldErrors) domain.Selector {
	sel, err := domain.ParseSelector(raw)
	if err != nil {
		errs.add("selector", "%s", err.Error())
	}
	return sel
}
