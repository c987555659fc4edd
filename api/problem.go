package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
)

// Problem type URIs: stable identifiers of the kinds of error the API
// answers with, in the type member of every problem+json body.
const (
	ProblemValidation       = "https://tock.dev/problems/validation"
	ProblemNotFound         = "https://tock.dev/problems/not-found"
	ProblemConflict         = "https://tock.dev/problems/conflict"
	ProblemPrecondition     = "https://tock.dev/problems/precondition-failed"
	ProblemMethodNotAllowed = "https://tock.dev/problems/method-not-allowed"
	ProblemTooLarge         = "https://tock.dev/problems/too-large"
	ProblemUnsupportedMedia = "https://tock.dev/problems/unsupported-media-type"
	ProblemMisdirected      = "https://tock.dev/problems/misdirected-request"
	ProblemUnavailable      = "https://tock.dev/problems/unavailable"
	ProblemInternal         = "https://tock.dev/problems/internal"
)

// ProblemContentType is the media type of every error response.
const ProblemContentType = "application/problem+json"

// StatusClientClosed is the status of a request whose client went away
// before its answer (nginx's 499): counted in the request metrics, never
// seen by the client.
const StatusClientClosed = 499

// apiError is an error a handler returns to be answered as a problem.
type apiError struct {
	p models.Problem
}

func (e *apiError) Error() string {
	if e.p.Detail != nil {
		return e.p.Title + ": " + *e.p.Detail
	}
	return e.p.Title
}

func newProblem(status int, typ, title, detail string) *apiError {
	p := models.Problem{Type: typ, Title: title, Status: status}
	if detail != "" {
		p.Detail = &detail
	}
	return &apiError{p: p}
}

// fieldErrors collects what is wrong with a request, field by field.
type fieldErrors []models.FieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, models.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// merge adds to fe the faults in more that are not about a field fe
// already faults (or one inside or around it): a member of the wrong type
// decodes as absent, and "is required" on top of "must be a string" would
// only confuse.
func (fe fieldErrors) merge(more fieldErrors) fieldErrors {
	out := append(fieldErrors(nil), fe...)
next:
	for _, m := range more {
		for _, f := range fe {
			if related(m.Field, f.Field) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// related reports whether a and b are the same field or one holds the
// other.
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// err is nil when nothing was collected, else a validation problem.
func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return validationProblem(fe...)
}

func validationProblem(errs ...models.FieldError) *apiError {
	detail := "The request is invalid."
	if len(errs) == 1 {
		detail = errs[0].Field + ": " + errs[0].Message
	} else if len(errs) > 1 {
		fields := make([]string, len(errs))
		for i, e := range errs {
			fields[i] = e.Field
		}
		detail = fmt.Sprintf("%d fields are invalid: %s.", len(errs), strings.Join(fields, ", "))
	}
	p := newProblem(http.StatusBadRequest, ProblemValidation, "Invalid request", detail)
	list := append([]models.FieldError(nil), errs...)
	p.p.Errors = &list
	return p
}

func invalid(field, format string, args ...any) *apiError {
	return validationProblem(models.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func notFound(detail string) *apiError {
	return newProblem(http.StatusNotFound, ProblemNotFound, "Not found", detail)
}

func conflict(detail string) *apiError {
	return newProblem(http.StatusConflict, ProblemConflict, "Conflict", detail)
}

// failure logs an unexpected failure of the request with msg and args
// and answers a bare 500, never with err's text; or, when err says that
// no usable Postgres answered (down, or failing over), 503 with
// Retry-After: the client may retry the same request, and a load balancer
// may send it to another node.
func (s *Server) failure(c echo.Context, err error, msg string, args ...any) *apiError {
	args = append([]any{"method", c.Request().Method, "path", c.Request().URL.Path, "err", err}, args...)
	// The client went away (closed its connection or gave up waiting):
	// nothing failed here and no one reads the answer. 499, nginx's
	// "client closed request", so that the request metrics keep it apart
	// from the server's own failures; logged at debug.
	if errors.Is(err, context.Canceled) && c.Request().Context().Err() == context.Canceled {
		s.log.DebugContext(c.Request().Context(), msg+": client went away", args...)
		return newProblem(StatusClientClosed, ProblemUnavailable, "Client closed request",
			"The client closed the connection before the answer was ready.")
	}
	// Cut by the pool's statement timeout, or by the request's own budget
	// (its context's deadline passed: a wait for a connection, or a
	// statement, ran past it).
	if store.Overloaded(err) && c.Request().Context().Err() != context.Canceled ||
		errors.Is(err, context.DeadlineExceeded) && c.Request().Context().Err() == context.DeadlineExceeded {
		// Refused, so that it holds no connection longer (issue 44).
		s.log.WarnContext(c.Request().Context(), msg+": cut for taking too long", args...)
		c.Response().Header().Set("Retry-After", "2")
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Request too expensive",
			"The request's database work ran longer than this server allows (tockd --api-statement-timeout, --api-request-timeout); "+
				"narrow it (a smaller page, a more selective filter) or retry later.")
	}
	if store.Unavailable(err) {
		s.log.WarnContext(c.Request().Context(), msg+": PostgreSQL unavailable", args...)
		c.Response().Header().Set("Retry-After", "1")
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Database unavailable",
			"PostgreSQL is unreachable or failing over; retry the request.")
	}
	s.log.ErrorContext(c.Request().Context(), msg, args...)
	return internalProblem()
}

func internalProblem() *apiError {
	return newProblem(http.StatusInternalServerError, ProblemInternal, "Internal server error",
		"The server failed to handle the request; the failure has been logged.")
}

// paramError matches the errors the generated wrapper returns when a
// path, query or header parameter does not parse, or a header comes more
// than once, so that the problem can name it.
var paramError = regexp.MustCompile(`^(?:Invalid format for parameter|Query argument|Expected one value for) ([A-Za-z0-9_-]+)(?::| is required|, got \d+)\s*(.*)$`)

// errorHandler turns every error a handler, the router or a middleware
// returns into a problem+json response. Anything it does not recognise is
// logged and answered with a bare 500, never with its text.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var (
		ae *apiError
		he *echo.HTTPError
	)
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he) && he.Code < 500:
		ae = s.fromHTTPError(he, c)
	default:
		ae = s.failure(c, err, "request failed")
	}
	writeProblem(c, ae)
}

func (s *Server) fromHTTPError(he *echo.HTTPError, c echo.Context) *apiError {
	msg, _ := he.Message.(string)
	switch he.Code {
	case http.StatusBadRequest:
		if m := paramError.FindStringSubmatch(msg); m != nil {
			detail := m[2]
			switch {
			case strings.HasPrefix(msg, "Expected one value"), strings.Contains(detail, "multiple values"):
				return invalid(m[1], "must be given once")
			case detail == "":
				detail = "is required"
			}
			return invalid(m[1], "%s", paramMessage(m[1], detail))
		}
		return invalid("request", "%s", msg)
	case http.StatusNotFound:
		return notFound(fmt.Sprintf("No route for %s %s.", c.Request().Method, c.Request().URL.Path))
	case http.StatusMethodNotAllowed:
		return newProblem(he.Code, ProblemMethodNotAllowed, "Method not allowed",
			fmt.Sprintf("%s is not allowed on %s.", c.Request().Method, c.Request().URL.Path))
	case http.StatusRequestEntityTooLarge:
		return newProblem(he.Code, ProblemTooLarge, "Request too large", "The request body is too large.")
	case http.StatusUnsupportedMediaType:
		return newProblem(he.Code, ProblemUnsupportedMedia, "Unsupported media type", "Send the body as application/json.")
	}
	text := http.StatusText(he.Code)
	if text == "" {
		text = "Error"
	}
	return newProblem(he.Code, "about:blank", text, msg)
}

// paramMessage words a parameter's parse failure for users; the runtime's
// own text names Go types.
func paramMessage(name, detail string) string {
	switch name {
	case "id":
		return "must be a UUID"
	case "limit", "count":
		return "must be an integer"
	case "from":
		// A + in a query string reads as a space: the usual way an
		// offset like +01:00 goes wrong.
		return "must be an RFC 3339 time such as 2026-12-01T09:00:00Z (write a + in an offset as %2B)"
	}
	return detail
}

func writeProblem(c echo.Context, ae *apiError) {
	body, err := json.Marshal(ae.p)
	if err != nil {
		body = []byte(`{"type":"` + ProblemInternal + `","title":"Internal server error","status":500}`)
		ae.p.Status = http.StatusInternalServerError
	}
	// Set here, not by Blob: Echo keeps a Content-Type once set, and a
	// handler whose c.JSON failed to encode has set application/json.
	c.Response().Header().Set(echo.HeaderContentType, ProblemContentType)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ae.p.Status)
		return
	}
	_ = c.Blob(ae.p.Status, ProblemContentType, body)
}
