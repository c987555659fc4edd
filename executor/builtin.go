package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/telemetry"
	"github.com/tock-sched/tock/wire"
)

// tockHeaders are the headers both built-in handlers send to the target:
// the execution id (also as Idempotency-Key, so a target can drop a
// redelivered attempt), the job id, the scheduled time and the attempt.
func tockHeaders(e *Execution) map[string]string {
	return map[string]string{
		wire.HeaderIdempotencyKey: e.ExecutionID,
		wire.HeaderExecutionID:    e.ExecutionID,
		wire.HeaderJobID:          e.JobID,
		wire.HeaderScheduledFor:   wire.FormatTime(e.ScheduledFor),
		wire.HeaderAttempt:        strconv.Itoa(e.Attempt),
	}
}

// HTTPHandler is the built-in "http" handler: it sends the job's payload
// as the body of a request (Method, default POST, to URL with Headers)
// plus the tock headers, within the attempt's context. A 2xx answer is
// success with the response body as output; 408, 429 and 5xx are
// retryable, after the answer's Retry-After (delta-seconds or an HTTP
// date, at most MaxRetryAfter) if it has one, else after the retry
// policy's backoff; network errors and timeouts are retryable; any other
// status is a permanent failure. A call the client refuses (an
// egress.Policy's Client: a private address, tock's own, credentials in
// the URL, too many redirects) is a permanent failure that says why.
//
// A nil client means http.DefaultClient, which calls any address: tockd
// passes its egress policy's client, and so should any executor that
// runs URLs its users wrote.
//
// HTTPHandler opens no secret headers: an execution that has some fails
// for good. HTTPHandlerWith can.
func HTTPHandler(client *http.Client) Func {
	return HTTPHandlerWith(HTTPOptions{Client: client})
}

// SecretOpener decrypts sealed secret values; *secret.Keyring is the real
// one. Its errors must not hold the value.
type SecretOpener interface {
	Open(keyID string, sealed, ad []byte) ([]byte, error)
}

// HTTPOptions configure the built-in http handler.
type HTTPOptions struct {
	// Client makes the requests; nil means http.DefaultClient (see
	// HTTPHandler).
	Client *http.Client
	// Secrets opens the handler's secret headers (domain.SealedSecret),
	// just before the request; their values go into the request and
	// nowhere else (no error, log or metric holds one). Nil: an
	// execution with secret headers fails for good, saying that this
	// executor has no --secret-key-file.
	Secrets SecretOpener
}

// HTTPHandlerWith is HTTPHandler with the options o. Secret headers are
// sent with the first request and with redirects to the same origin
// (scheme, host and port) only: a redirect elsewhere gets none of them.
func HTTPHandlerWith(o HTTPOptions) Func {
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, e *Execution) (output string, err error) {
		ctx, span := startHandlerSpan(ctx, "http")
		defer func() { endHandlerSpan(span, err) }()
		h := e.Handler
		if h.URL == "" {
			return "", Permanent(errors.New("http handler: no url"))
		}
		secrets, err := openSecrets(o.Secrets, h.SecretHeaders)
		if err != nil {
			return "", Permanent(fmt.Errorf("http handler: %w", err))
		}
		method := h.Method
		if method == "" {
			method = http.MethodPost
		}
		var body io.Reader
		if len(e.Payload) > 0 {
			body = bytes.NewReader(e.Payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, h.URL, body)
		if err != nil {
			return "", Permanent(fmt.Errorf("http handler: %w", err))
		}
		target := method + " " + safeURL(req.URL)
		for k, v := range h.Headers {
			req.Header.Set(k, v)
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range secrets {
			req.Header.Set(k, v)
		}
		for k, v := range tockHeaders(e) {
			req.Header.Set(k, v)
		}
		if span.SpanContext().IsValid() {
			// The target's server span joins the execution's trace.
			telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
			if span.IsRecording() {
				// The origin only: a path or query may hold what the trace
				// backend should not.
				span.SetAttributes(attribute.String("http.request.method", method),
					attribute.String("server.address", req.URL.Hostname()),
					attribute.String("url.scheme", req.URL.Scheme))
			}
		}
		c := client
		if len(secrets) > 0 {
			c = withoutSecretsElsewhere(client, secrets)
		}
		// The attempt's log: the request line, then the status and how
		// long the answer took, then the response body (up to the job's
		// log cap). The recorded output stays its first 4 KiB.
		lw := Log(ctx)
		fmt.Fprintf(lw, "> %s\n", target)
		began := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			fmt.Fprintf(lw, "< no answer after %s: %v\n", time.Since(began).Round(time.Millisecond), logSafe(err))
			// client.Do's error names the full URL; keep query strings,
			// which may hold credentials, out of the recorded error.
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err
			}
			var refusal *egress.Refusal
			if errors.As(err, &refusal) {
				// Not "dial tcp 10.0.0.5:80: refused: ...": the refusal
				// says it all, and no retry changes it.
				return "", Permanent(fmt.Errorf("%s: %w", target, refusal))
			}
			return "", fmt.Errorf("%s: %w", target, err)
		}
		defer resp.Body.Close()
		// The body up to the log's cap (one byte more than the output
		// keeps, at least, so Truncate knows where to cut).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, max(logCapOf(e), domain.MaxOutputBytes+1)))
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // lets the connection be reused
		fmt.Fprintf(lw, "< %s in %s, %d bytes\n", resp.Status, time.Since(began).Round(time.Millisecond), len(b))
		if len(b) > 0 {
			_, _ = lw.Write(b)
			if b[len(b)-1] != '\n' {
				_, _ = io.WriteString(lw, "\n")
			}
		}
		output = domain.Truncate(string(b))
		code := resp.StatusCode
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		switch {
		case code >= 200 && code < 300:
			return output, nil
		case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
			err := fmt.Errorf("%s: %s", target, resp.Status)
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				err = RetryAfter(err, d)
			}
			return output, err
		default:
			return output, Permanent(fmt.Errorf("%s: %s", target, resp.Status))
		}
	}
}

// openSecrets opens a handler's secret headers. Its errors name the
// header and the key, never a value.
func openSecrets(o SecretOpener, sealed map[string]domain.SealedSecret) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	if o == nil {
		return nil, errors.New("the job has secret headers, and this executor has no --secret-key-file to decrypt them")
	}
	out := make(map[string]string, len(sealed))
	for name, s := range sealed {
		v, err := o.Open(s.KeyID, s.Data, domain.SecretHeaderAD(name))
		if err != nil {
			return nil, fmt.Errorf("secret header %s: cannot decrypt it: %w", name, err)
		}
		out[name] = string(v)
	}
	return out, nil
}

// withoutSecretsElsewhere is client, but following a redirect to another
// origin than the first request's without the secret headers. net/http
// itself drops only Authorization, Cookie and a few others, and only on
// a redirect to another domain.
func withoutSecretsElsewhere(client *http.Client, secrets map[string]string) *http.Client {
	c := *client
	check := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			for name := range secrets {
				req.Header.Del(name)
			}
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 { // net/http's default policy
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// MaxRetryAfter caps the wait an HTTP target can ask for with Retry-After.
const MaxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After header value (RFC 9110 10.2.3):
// delta-seconds or an HTTP date, which now turns into a delay.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

// safeURL is u without its query, fragment and password, for errors.
func safeURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	return c.Redacted()
}

// Header a NATS service (github.com/nats-io/nats.go/micro) sets on an
// error reply.
const (
	natsServiceError     = "Nats-Service-Error"
	natsServiceErrorCode = "Nats-Service-Error-Code"
)

// NATSHandler is the built-in "nats" handler: it publishes the job's
// payload to Subject with the tock headers. Without WaitReply the attempt
// succeeds once the server has the message (there is no delivery
// guarantee beyond that: use a custom handler for one). With WaitReply it
// sends a request and records the reply as output; no responders and
// timeouts are retryable, and a NATS service error reply
// (Nats-Service-Error) is a failure, permanent for a 4xx code other than
// 408 and 429.
func NATSHandler(nc *nats.Conn) Func {
	return func(ctx context.Context, e *Execution) (output string, err error) {
		ctx, span := startHandlerSpan(ctx, "nats")
		defer func() { endHandlerSpan(span, err) }()
		h := e.Handler
		if h.Subject == "" {
			return "", Permanent(errors.New("nats handler: no subject"))
		}
		if reservedSubject(h.Subject) {
			return "", Permanent(fmt.Errorf("nats handler: subject %s is reserved for tock and NATS", h.Subject))
		}
		m := nats.NewMsg(h.Subject)
		m.Data = e.Payload
		for k, v := range tockHeaders(e) {
			m.Header.Set(k, v)
		}
		if span.SpanContext().IsValid() {
			telemetry.Propagator.Inject(ctx, telemetry.NATSCarrier(m.Header))
			span.SetAttributes(attribute.String("messaging.system", "nats"),
				attribute.String("messaging.destination.name", h.Subject))
		}
		lw := Log(ctx)
		if !h.WaitReply {
			fmt.Fprintf(lw, "> publish to %s, %d bytes\n", h.Subject, len(m.Data))
			if err := nc.PublishMsg(m); err != nil {
				return "", natsErr(h.Subject, err)
			}
			fctx := ctx
			if _, ok := ctx.Deadline(); !ok {
				var cancel context.CancelFunc
				fctx, cancel = context.WithTimeout(ctx, publishTimeout)
				defer cancel()
			}
			if err := nc.FlushWithContext(fctx); err != nil {
				return "", fmt.Errorf("nats publish to %s: flush: %w", h.Subject, err)
			}
			return "", nil
		}
		fmt.Fprintf(lw, "> request to %s, %d bytes\n", h.Subject, len(m.Data))
		began := time.Now()
		reply, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			fmt.Fprintf(lw, "< no reply after %s: %v\n", time.Since(began).Round(time.Millisecond), err)
			return "", natsErr(h.Subject, err)
		}
		fmt.Fprintf(lw, "< reply in %s, %d bytes\n", time.Since(began).Round(time.Millisecond), len(reply.Data))
		if d := reply.Data; len(d) > 0 {
			_, _ = lw.Write(d)
			if d[len(d)-1] != '\n' {
				_, _ = io.WriteString(lw, "\n")
			}
		}
		output = domain.Truncate(string(reply.Data))
		if msg := reply.Header.Get(natsServiceError); msg != "" {
			code := reply.Header.Get(natsServiceErrorCode)
			err := fmt.Errorf("nats request to %s: service error %s: %s", h.Subject, code, msg)
			if c, _ := strconv.Atoi(code); c >= 400 && c < 500 && c != 408 && c != 429 {
				return output, Permanent(err)
			}
			return output, err
		}
		return output, nil
	}
}

// reservedSubject reports whether a job may not publish to subject:
// tock's own streams (a job would fire executions or forge events) and
// NATS's system and JetStream API subjects.
func reservedSubject(subject string) bool {
	return strings.HasPrefix(subject, wire.ExecSubjectPrefix) || strings.HasPrefix(subject, wire.EventSubjectPrefix) ||
		strings.HasPrefix(subject, wire.LogSubjectPrefix) || strings.HasPrefix(subject, "$")
}

// logCapOf is the log cap of e's job.
func logCapOf(e *Execution) int64 {
	p := domain.LogPolicy{}
	if e.Handler.Log != nil {
		p = *e.Handler.Log
	}
	return p.WithDefaults().CapBytes
}

// logSafe is err as the log shows it: a url.Error's URL (which may hold
// credentials in its query) left out.
func logSafe(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

func natsErr(subject string, err error) error {
	err = fmt.Errorf("nats publish to %s: %w", subject, err)
	if errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrMaxPayload) {
		return Permanent(err)
	}
	return err
}

// startHandlerSpan starts a built-in handler's call span
// (telemetry.SpanHandler), a child of the attempt's span in ctx, from that
// span's tracer provider (a no-op one without it).
func startHandlerSpan(ctx context.Context, handler string) (context.Context, trace.Span) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(telemetry.ScopeName)
	ctx, span := tracer.Start(ctx, telemetry.SpanHandler, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("tock.handler", handler))
	}
	return ctx, span
}

// endHandlerSpan ends a handler's call span, with err as its status.
func endHandlerSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
