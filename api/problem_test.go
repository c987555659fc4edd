package api

import (
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
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
