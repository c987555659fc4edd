package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/tock-sched/tock/api"
)

// client calls the REST API.
type client struct {
	base string // server URL, e.g. http://127.0.0.1:8080
	http *http.Client
}

// problemError is a request the API refused, with the problem it sent
// (nil when the body was not a problem document).
type problemError struct {
	status  int
	problem *api.Problem
	body    string
}

func (e *problemError) Error() string {
	if e.problem != nil {
		if e.problem.Detail != nil && *e.problem.Detail != "" {
			return *e.problem.Detail
		}
		return e.problem.Title
	}
	msg := fmt.Sprintf("%d %s", e.status, http.StatusText(e.status))
	if b := strings.TrimSpace(e.body); b != "" {
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		msg += ": " + b
	}
	return msg
}

// do sends a request with an optional JSON body and returns the response
// body of a 2xx answer; any other answer is a *problemError.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	u, err := url.Parse(strings.TrimRight(c.base, "/") + path)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", c.base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: want http:// or https://", c.base)
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, u.Redacted(), err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return out, nil
	}
	pe := &problemError{status: res.StatusCode, body: string(out)}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == api.ProblemContentType {
		var p api.Problem
		if json.Unmarshal(out, &p) == nil {
			pe.problem = &p
		}
	}
	return nil, pe
}

// get decodes a 2xx answer into v and returns the raw body too.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body, v any) ([]byte, error) {
	raw, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if v != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, fmt.Errorf("%s %s: unexpected response: %w", method, path, err)
		}
	}
	return raw, nil
}

// printError writes err on stderr: a problem's detail and each field
// error on a line of its own.
func (a *app) printError(err error) {
	fmt.Fprintf(a.stderr, "error: %v\n", err)
	var pe *problemError
	if errors.As(err, &pe) && pe.problem != nil && pe.problem.Errors != nil {
		for _, fe := range *pe.problem.Errors {
			fmt.Fprintf(a.stderr, "  %s: %s\n", fe.Field, fe.Message)
		}
	}
}
