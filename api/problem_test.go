package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
)

// A handler whose answer fails to encode (as a time after the year 9999
// did) gets a 500 problem+json, not a problem labelled with the
// application/json that c.JSON had set.
func TestProblemAfterFailedJSON(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/v1/jobs", nil), rec)
	err := c.JSON(http.StatusOK, math.NaN())
	if err == nil {
		t.Fatal("NaN encoded")
	}
	s.errorHandler(err, c)
	var p models.Problem
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusInternalServerError || ct != ProblemContentType ||
		json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Type != ProblemInternal {
		t.Errorf("%d %s %s, want a 500 %s of type %s", rec.Code, ct, rec.Body, ProblemContentType, ProblemInternal)
	}
}

// A parameter given twice that takes one value is a 400 naming it: a
// header (once, the problem named "request"), a query parameter (once,
// limit's said "must be an integer").
func TestParameterGivenTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("twice"))
	for _, tc := range []struct {
		method, path string
		header       string
	}{
		{"POST", "/v1/jobs/" + j.Id.String() + "/run", "Idempotency-Key"},
		{"GET", "/v1/changes", "Last-Event-ID"},
		{"GET", "/v1/jobs?limit=1&limit=2", ""},
		{"GET", "/v1/jobs?state=active&state=paused", ""},
	} {
		req, err := http.NewRequest(tc.method, e.http.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		field := tc.header
		if field != "" {
			req.Header[field] = []string{"a", "b"}
		} else {
			field = tc.path[strings.Index(tc.path, "?")+1 : strings.Index(tc.path, "=")]
		}
		res, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := resp{status: res.StatusCode, header: res.Header, body: body}
		if r.status != http.StatusBadRequest || !strings.Contains(fieldsOf(r.problem(t)), field+": must be given once") {
			t.Errorf("%s %s with %s twice: %d %s, want 400 saying %s must be given once", tc.method, tc.path, field, r.status, body, field)
		}
	}
}
