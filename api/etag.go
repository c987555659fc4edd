package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store/model"
)

// A job's ETag is its revision, quoted (model.Job.Revision: one more on
// every change made through the API, none on a firing). PATCH and DELETE
// honour If-Match against it, so that two editors (or an editor and an
// apply) never overwrite each other silently.

// etag is job j's ETag.
func etag(j *model.Job) string { return `"` + strconv.FormatInt(j.Revision, 10) + `"` }

// setETag answers j's ETag.
func setETag(c echo.Context, j *model.Job) { c.Response().Header().Set("ETag", etag(j)) }

// ifMatch reads an If-Match header: the revision it names, 0 for none
// or "*"; a 400 naming the header for anything but one ETag of this API.
func ifMatch(h *models.IfMatch) (int64, error) {
	if h == nil {
		return 0, nil
	}
	v := strings.TrimSpace(*h)
	if v == "" || v == "*" {
		return 0, nil
	}
	v = strings.TrimPrefix(v, "W/")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if n, err := strconv.ParseInt(v[1:len(v)-1], 10, 64); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, invalid("If-Match", "must be one ETag of this job as the API answered it (%q) or *, not %q", `"7"`, *h)
}

// preconditionFailed is the 412 of a job changed since its ETag was read.
func preconditionFailed(j string) error {
	return newProblem(http.StatusPreconditionFailed, ProblemPrecondition, "Precondition failed",
		fmt.Sprintf("Job %s changed since the ETag sent as If-Match was read; read it again, and redo the change on what it is now.", j))
}
