package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/client"
)

// httpClient is the HTTP client tockctl sends its requests with:
// trusting the CA certificates in caFile (the system's if empty), and
// presenting the certificate in certFile and keyFile if they are set.
func httpClient(caFile, certFile, keyFile string) (*http.Client, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if caFile == "" && certFile == "" && keyFile == "" {
		return hc, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert: %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--client-cert and --client-key go together: give both or neither")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--client-cert, --client-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	// HTTP/1.1: when the server refuses the client's certificate, the
	// user then reads its reason ("tls: certificate required"); HTTP/2's
	// connection set-up reports only that it failed.
	t.ForceAttemptHTTP2 = false
	hc.Transport = t
	return hc, nil
}

// newClient is the generated API client for server, sending its requests
// through hc, with token as their bearer key unless it is "".
func newClient(server string, hc *http.Client, token string) (*client.ClientWithResponses, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: want http:// or https://", server)
	}
	return client.NewClientWithResponses(server, client.WithHTTPClient(doer{hc, token}))
}

// doer sends the generated client's requests: it asks for JSON (or a
// problem), and names the request in the error when none came back.
type doer struct {
	http  *http.Client
	token string
}

func (d doer) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Accept") == "" { // executions watch asks for text/event-stream
		req.Header.Set("Accept", "application/json, "+client.ProblemContentType)
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	res, err := d.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &sendError{method: req.Method, url: req.URL.Redacted(), err: err}
	}
	return res, nil
}

// sendError is a request that got no answer.
type sendError struct {
	method, url string
	err         error
}

func (e *sendError) Error() string { return e.method + " " + e.url + ": " + e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// problemError is a request the API refused, with the problem it sent
// (nil when the body was not a problem document).
type problemError struct {
	status  int
	problem *models.Problem
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

// response is what every response of the generated client has.
type response interface {
	StatusCode() int
	ContentType() string
	GetBody() []byte
}

// check turns the outcome of a call of the generated client into the
// error to report: the call's own error, or a *problemError for any
// answer but a 2xx.
func check(r response, err error) error {
	if err != nil {
		var se *sendError
		if errors.As(err, &se) {
			return err
		}
		// The generated client failed to decode the answer's JSON.
		return fmt.Errorf("unexpected response: %w", err)
	}
	if s := r.StatusCode(); s >= 200 && s < 300 {
		return nil
	}
	pe := &problemError{status: r.StatusCode(), body: string(r.GetBody())}
	if mt, _, _ := mime.ParseMediaType(r.ContentType()); mt == client.ProblemContentType {
		var p models.Problem
		if json.Unmarshal(r.GetBody(), &p) == nil {
			pe.problem = &p
		}
	}
	return pe
}

// decoded is the value the generated client decoded from a 2xx answer;
// an answer without one (not JSON, or another status than the document
// names) is unexpected.
func decoded[T any](v *T) (T, error) {
	if v == nil {
		var zero T
		return zero, errors.New("unexpected response: no JSON body of the documented status")
	}
	return *v, nil
}

// parseID parses an id argument: the API's ids are UUIDs.
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("id: must be a UUID, not %q", s)
	}
	return id, nil
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
