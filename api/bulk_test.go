package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// POST /v1/jobs:pause and :resume change the jobs of a namespace that
// match a selector, and only those.
func TestBulkPauseAndResumeBySelector(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mk := func(ns, name string, labels map[string]any) models.Job {
		b := jobBody(name)
		b["namespace"] = ns
		if labels != nil {
			b["labels"] = labels
		}
		return e.createJob(b)
	}
	var pay []models.Job
	for i := range 3 {
		pay = append(pay, mk("maint", fmt.Sprintf("pay-%d", i), map[string]any{"team": "payments"}))
	}
	search := mk("maint", "search", map[string]any{"team": "search"})
	elsewhere := mk("other", "pay-x", map[string]any{"team": "payments"})

	bulk := func(op string, body map[string]any) models.BulkChange {
		t.Helper()
		r := e.do("POST", "/v1/jobs:"+op, body)
		mustStatus(t, r, http.StatusOK)
		var res models.BulkChange
		r.decode(t, &res)
		return res
	}
	if res := bulk("pause", map[string]any{"namespace": "maint", "selector": "team=payments"}); res.Matched != 3 || res.Changed != 3 {
		t.Fatalf("pause: %+v", res)
	}
	for _, j := range pay {
		if got := e.getJob(j.Id); got.State != models.JobStatePaused || got.NextRunAt != nil {
			t.Errorf("%s after the bulk pause: %s, next %v", j.Name, got.State, got.NextRunAt)
		}
	}
	for _, j := range []models.Job{search, elsewhere} {
		if got := e.getJob(j.Id); got.State != models.JobStateActive {
			t.Errorf("%s/%s was not selected but is %s", j.Namespace, j.Name, got.State)
		}
	}
	// Again: nothing active matches.
	if res := bulk("pause", map[string]any{"namespace": "maint", "selector": "team=payments"}); res.Matched != 0 || res.Changed != 0 {
		t.Errorf("second pause: %+v", res)
	}
	if res := bulk("resume", map[string]any{"namespace": "maint"}); res.Matched != 3 || res.Changed != 3 {
		t.Fatalf("resume: %+v", res)
	}
	for _, j := range pay {
		if got := e.getJob(j.Id); got.State != models.JobStateActive || got.NextRunAt == nil {
			t.Errorf("%s after the bulk resume: %s, next %v", j.Name, got.State, got.NextRunAt)
		}
	}

	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "namespace"},
		{map[string]any{"namespace": "a b"}, "namespace"},
		{map[string]any{"namespace": "maint", "selector": "team in ()"}, "selector"},
		{map[string]any{"namespace": "maint", "extra": 1}, "extra"},
	} {
		r := e.do("POST", "/v1/jobs:pause", tc.body)
		mustStatus(t, r, http.StatusBadRequest)
		if !hasField(r.problem(t), tc.field) {
			t.Errorf("%v: problem %s does not name %s", tc.body, r.body, tc.field)
		}
	}
}
