package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobs"
)

// IdempotencyHeader names the key a client sends with a write it may
// retry: POST /v1/jobs, /v1/jobs:batch, /v1/jobs/{id}/run and
// /v1/jobs/{id}/backfill.
const IdempotencyHeader = "Idempotency-Key"

// ReplayedHeader is set (to "true") on a response replayed for a key.
const ReplayedHeader = "Idempotent-Replayed"

// maxIdempotencyKey is the longest key accepted, in bytes.
const maxIdempotencyKey = 255

// idempotentOperations are the writes that honour Idempotency-Key, with
// how each finds the namespace its key is scoped to.
func (s *Server) idempotentOperations() map[string][]echo.MiddlewareFunc {
	return map[string][]echo.MiddlewareFunc{
		"createJob":      {s.idempotent(bodyNamespace)},
		"createJobBatch": {s.idempotent(batchNamespace)},
		"runJob":         {s.idempotent(s.jobNamespace)},
		"backfillJob":    {s.idempotent(s.jobNamespace)},
	}
}

// idempotent makes a write idempotent under an Idempotency-Key header,
// for store.IdempotencyTTL (24 hours) per namespace (found by ns): the
// first request with a key runs and its response (any status below 500)
// is kept; a later request with the same key and the same method, path
// and body gets that response again, with Idempotent-Replayed: true; the
// same key with another request is a 422; the same request while the
// first is still running is a 409. A 5xx frees the key, so that a retry
// runs afresh. Without the header a request runs as usual.
func (s *Server) idempotent(ns func(c echo.Context, body []byte) string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key := c.Request().Header.Get(IdempotencyHeader)
			if key == "" {
				return next(c)
			}
			if msg := idempotencyKeyProblem(key); msg != "" {
				return invalid(IdempotencyHeader, "%s", msg)
			}
			req := c.Request()
			body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, MaxBatchBytes))
			if err != nil {
				return newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "Request body too large", err.Error())
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			namespace := ns(c, body)
			ctx := req.Context()
			held, err := s.store.ClaimIdempotencyKey(ctx, namespace, key, requestHash(req.Method, req.URL.Path, body))
			if err != nil {
				return err
			}
			switch {
			case held.Mismatch:
				p := newProblem(http.StatusUnprocessableEntity, ProblemValidation, "Idempotency key reused",
					"this Idempotency-Key was sent with a different request in the last 24 hours")
				p.p.Errors = &[]models.FieldError{{Field: IdempotencyHeader, Message: "was used for a different request"}}
				return p
			case held.InProgress:
				return conflict("a request with this Idempotency-Key is still in progress; retry later")
			case !held.Claimed:
				c.Response().Header().Set(ReplayedHeader, "true")
				return c.Blob(held.Status, held.ContentType, held.Response)
			}
			rec := &responseCopy{ResponseWriter: c.Response().Writer}
			c.Response().Writer = rec
			err = next(c)
			if err != nil {
				// Let the error handler write the problem, into rec.
				c.Error(err)
				err = nil
			}
			status := c.Response().Status
			if status >= 500 || !c.Response().Committed {
				return s.store.ReleaseIdempotencyKey(context.WithoutCancel(ctx), namespace, key)
			}
			return s.store.SaveIdempotencyResponse(context.WithoutCancel(ctx), namespace, key, status,
				c.Response().Header().Get(echo.HeaderContentType), rec.body.Bytes())
		}
	}
}

// requestHash identifies a request for its key: its method, path and
// body.
func requestHash(method, path string, body []byte) []byte {
	sum := sha256.New()
	for _, part := range []string{method, "\x00", path, "\x00"} {
		sum.Write([]byte(part))
	}
	sum.Write(body)
	return sum.Sum(nil)
}

// idempotencyKeyProblem says what is wrong with a key; "" if nothing.
func idempotencyKeyProblem(key string) string {
	if len(key) > maxIdempotencyKey {
		return "must be at most 255 bytes"
	}
	for _, r := range key {
		if r < 0x21 || r > 0x7e {
			return "must be printable ASCII without spaces"
		}
	}
	return ""
}

// responseCopy copies what a handler writes, for replay.
type responseCopy struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *responseCopy) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// bodyNamespace is the namespace of a job to create: the body's, or the
// default one.
func bodyNamespace(_ echo.Context, body []byte) string {
	var j struct {
		Namespace string `json:"namespace"`
	}
	if json.Unmarshal(body, &j) != nil || j.Namespace == "" {
		return jobs.DefaultNamespace
	}
	return j.Namespace
}

// batchNamespace is the namespace the jobs of a batch share; "" when they
// name several (the key is then scoped to no namespace).
func batchNamespace(_ echo.Context, body []byte) string {
	var b struct {
		Jobs []struct {
			Namespace string `json:"namespace"`
		} `json:"jobs"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	ns := ""
	for i, j := range b.Jobs {
		n := j.Namespace
		if n == "" {
			n = jobs.DefaultNamespace
		}
		if i > 0 && n != ns {
			return ""
		}
		ns = n
	}
	return ns
}

// jobNamespace is the namespace of the job the path names; "" when there
// is no such job (the request answers 404, which is kept like any
// answer).
func (s *Server) jobNamespace(c echo.Context, _ []byte) string {
	id, err := uuid.Parse(strings.TrimSpace(c.Param("id")))
	if err != nil {
		return ""
	}
	j, err := s.store.GetJob(c.Request().Context(), id)
	if err != nil {
		return ""
	}
	return j.Namespace
}
