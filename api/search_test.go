package api

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
)

// GET /v1/executions filters by several states, a time range given as a
// duration, job name prefix, handler and error text, and counts.
func TestSearchExecutionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, &fakeExecutors{})
	dead1, dead2, ok := e.runNow("report-dead-1"), e.runNow("report-dead-2"), e.runNow("sync-ok")
	e.finish(dead1, domain.EventFailed, true)
	e.finish(dead2, domain.EventFailed, true)
	e.finish(ok, domain.EventSucceeded, false)

	ids := func(query string, wantTotal int64) map[uuid.UUID]bool {
		t.Helper()
		r := e.do("GET", "/v1/executions?"+query, nil)
		mustStatus(t, r, http.StatusOK)
		var list models.ExecutionList
		r.decode(t, &list)
		if wantTotal >= 0 && (list.Total == nil || *list.Total != wantTotal) {
			t.Errorf("%s: total %v, want %d", query, list.Total, wantTotal)
		}
		out := map[uuid.UUID]bool{}
		for _, it := range list.Items {
			out[it.Id] = true
		}
		return out
	}
	both := map[uuid.UUID]bool{dead1: true, dead2: true}
	for query, want := range map[string]map[uuid.UUID]bool{
		"state=failed,dead&since=24h&count=true": both,
		"state=dead&job=report-&count=true":      both,
		"job=sync&count=true":                    {ok: true},
		"error=BOOM&count=true":                  both,
		"handler=http&manual=true&count=true":    {dead1: true, dead2: true, ok: true},
		"handler=mailer&count=true":              {},
		"until=2000-01-01T00:00:00Z&count=true":  {},
		"since=1h&state=succeeded&count=true":    {ok: true},
	} {
		got := ids(query, int64(len(want)))
		if len(got) != len(want) {
			t.Errorf("%s: %d executions, want %d", query, len(got), len(want))
		}
		for id := range want {
			if !got[id] {
				t.Errorf("%s: %s missing", query, id)
			}
		}
	}
	// Without count=true there is no total.
	r := e.do("GET", "/v1/executions?state=dead", nil)
	var list models.ExecutionList
	r.decode(t, &list)
	if list.Total != nil {
		t.Errorf("a total without count=true: %d", *list.Total)
	}

	for query, field := range map[string]string{
		"state=failed,buried":                 "state",
		"since=yesterday":                     "since",
		"until=-5m":                           "until",
		"started_before=soon":                 "started_before",
		"namespace=" + url.QueryEscape("a b"): "namespace",
		"job=" + url.QueryEscape("x\x00"):     "job",
		"error=" + url.QueryEscape("a\x00"):   "error",
		"job_id=nope":                         "job_id",
		"manual=maybe":                        "manual",
	} {
		r := e.do("GET", "/v1/executions?"+query, nil)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: problem names %s, want %s", query, fieldsOf(p), field)
		}
	}
}

// GET /v1/stats counts what the search lists, per group, and refuses
// bad parameters naming them.
func TestStatsThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, &fakeExecutors{})
	dead, ok1, ok2 := e.runNow("stats-dead"), e.runNow("stats-ok-1"), e.runNow("stats-ok-2")
	e.finish(dead, domain.EventFailed, true)
	e.finish(ok1, domain.EventSucceeded, false)
	e.finish(ok2, domain.EventSucceeded, false)

	r := e.do("GET", "/v1/stats?group_by=namespace&since=1h", nil)
	mustStatus(t, r, http.StatusOK)
	var rep models.StatsReport
	r.decode(t, &rep)
	if len(rep.Groups) != 1 || rep.Groups[0].Key != "default" || rep.Groups[0].Total != 3 ||
		rep.Groups[0].Counts["succeeded"] != 2 || rep.Groups[0].Counts["dead"] != 1 ||
		rep.Groups[0].SuccessRate == nil || *rep.Groups[0].SuccessRate < 0.66 || *rep.Groups[0].SuccessRate > 0.67 {
		t.Errorf("by namespace: %s", r.body)
	}
	r = e.do("GET", "/v1/stats", nil) // by job, the last 24 hours
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &rep)
	if len(rep.Groups) != 3 || rep.GroupBy != "job" || rep.Until.Sub(rep.Since) != 24*time.Hour {
		t.Errorf("by job: %s", r.body)
	}
	for query, field := range map[string]string{
		"group_by=day":                        "group_by",
		"since=soon":                          "since",
		"since=1h&until=2h":                   "until",
		"namespace=" + url.QueryEscape("a/b"): "namespace",
		"job_id=x":                            "job_id",
	} {
		r := e.do("GET", "/v1/stats?"+query, nil)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); !hasField(p, field) {
			t.Errorf("%s: problem names %s, want %s", query, fieldsOf(p), field)
		}
	}
}
