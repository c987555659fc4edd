package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// The series counts a job's executions in their interval, aligned to it,
// with every interval a point; bad input is a 400 naming its parameter.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("charted"))
	now, err := e.store.Now(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(-90 * time.Minute)
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, at)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Record(t, e.store, model.AttemptEvent{ID: x.ID, Attempt: 1, Executor: "exec-a", At: at.Add(250 * time.Millisecond),
		Type: domain.EventStarted})

	for _, q := range []string{"/v1/stats/series?since=3h&interval=15m", "/v1/stats/series?since=3h&interval=15m&job_id=" + j.Id.String(),
		"/v1/stats/series?since=3h&interval=15m&namespace=default"} {
		r := e.do("GET", q, nil)
		mustStatus(t, r, http.StatusOK)
		var s models.StatsSeries
		r.decode(t, &s)
		if s.Since.Truncate(15*time.Minute) != s.Since || len(s.Points) < 12 || len(s.Points) > 13 {
			t.Fatalf("%s: since %s, %d points", q, s.Since, len(s.Points))
		}
		var total int64
		for _, p := range s.Points {
			total += p.Total
			if p.Total == 0 {
				continue
			}
			if !p.At.Equal(at.UTC().Truncate(15*time.Minute)) || p.Counts["running"] != 1 || p.StartLagMs == nil ||
				*p.StartLagMs.P50 < 200 || *p.StartLagMs.P50 > 300 {
				t.Errorf("%s: point %+v", q, p)
			}
		}
		if total != 1 {
			t.Errorf("%s: %d executions", q, total)
		}
	}
	for q, field := range map[string]string{
		"/v1/stats/series?interval=2m":                      "interval",
		"/v1/stats/series?interval=1m&since=168h":           "interval",
		"/v1/stats/series?since=1h&until=2h":                "until",
		"/v1/stats/series?since=yesterday":                  "since",
		"/v1/stats/series?namespace=Bad%20Name&interval=1h": "namespace",
	} {
		r := e.do("GET", q, nil)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: problem %s, want the field %s", q, fieldsOf(p), field)
		}
	}
}
