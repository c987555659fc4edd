package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// Calendars through the API, on real Postgres: create, read with the
// periods they do not allow, extends (an include calendar of business
// hours that extends holidays), faults named by field, a cycle refused,
// If-Match, a calendar others extend kept, the audit trail.
func TestCalendars(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holidays := map[string]any{"name": "us-holidays", "timezone": "America/New_York", "dates": []string{"2026-12-25", "2027-01-01"}}
	r := e.do("POST", "/v1/calendars", holidays)
	mustStatus(t, r, http.StatusCreated)
	if r.header.Get("ETag") != `"1"` {
		t.Errorf("ETag %q", r.header.Get("ETag"))
	}
	mustStatus(t, e.do("POST", "/v1/calendars", holidays), http.StatusConflict)

	// Christmas is a whole day in New York: 05:00Z to 05:00Z.
	r = e.do("GET", "/v1/calendars/us-holidays?from=2026-12-20T00:00:00Z&days=10", nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Calendar
	r.decode(t, &got)
	if got.Periods == nil || len(*got.Periods) != 1 {
		t.Fatalf("periods: %+v", got.Periods)
	}
	p := (*got.Periods)[0]
	if !p.Start.Equal(time.Date(2026, 12, 25, 5, 0, 0, 0, time.UTC)) || !p.End.Equal(time.Date(2026, 12, 26, 5, 0, 0, 0, time.UTC)) ||
		p.Calendar != "us-holidays" || !strings.Contains(p.Reason, "2026-12-25") {
		t.Fatalf("Christmas: %+v", p)
	}

	business := map[string]any{"name": "business", "timezone": "America/New_York", "mode": "include",
		"weekly":  []any{map[string]any{"days": []string{"MON", "TUE", "WED", "THU", "FRI"}, "start": "09:00", "end": "17:00"}},
		"extends": []string{"us-holidays"}}
	mustStatus(t, e.do("POST", "/v1/calendars", business), http.StatusCreated)
	r = e.do("GET", "/v1/calendars/business?from=2026-12-24T00:00:00Z&days=2", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	// Thursday 24th: allowed 09:00-17:00 New York (14:00-22:00Z); Friday
	// 25th: not at all (the holiday).
	var allowed []string
	last := time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)
	for _, p := range *got.Periods {
		if p.Start.After(last) {
			allowed = append(allowed, last.Format("02T15:04")+"-"+p.Start.Format("02T15:04"))
		}
		last = p.End
	}
	if strings.Join(allowed, " ") != "24T14:00-24T22:00" {
		t.Fatalf("business allows %v; periods %+v", allowed, *got.Periods)
	}

	// A schedule's preview marks the runs a calendar does not allow.
	r = e.do("POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "0 0 12 * * *", "timezone": "America/New_York"},
		"from": "2026-12-23T00:00:00Z", "count": 4, "calendars": []string{"us-holidays"}})
	mustStatus(t, r, http.StatusOK)
	var pv models.Preview
	r.decode(t, &pv)
	var marks []string
	for _, f := range pv.Fires {
		m := f.At.Format("01-02")
		if f.Excluded != nil {
			m += " " + f.Excluded.Calendar + ": " + f.Excluded.Reason
		}
		marks = append(marks, m)
	}
	if got := strings.Join(marks, ", "); got != "12-23, 12-24, 12-25 us-holidays: date 2026-12-25, 12-26" {
		t.Fatalf("preview marks: %s", got)
	}
	r = e.do("POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "@daily"}, "calendars": []string{"nope"}})
	mustStatus(t, r, http.StatusBadRequest)
	if pr := r.problem(t); !hasField(pr, "calendars[0]") {
		t.Fatalf("an unknown calendar: %s", fieldsOf(pr))
	}

	// Faults are named by field; a cycle by extends.
	r = e.do("POST", "/v1/calendars", map[string]any{"name": "bad", "timezone": "Mars/Olympus", "dates": []string{"2026-02-30"},
		"extends": []string{"nope"}, "colour": "red"})
	mustStatus(t, r, http.StatusBadRequest)
	pr := r.problem(t)
	for _, f := range []string{"timezone", "dates[0]", "extends[0]", "colour"} {
		if !hasField(pr, f) {
			t.Errorf("no fault for %s in %s", f, fieldsOf(pr))
		}
	}
	cycle := map[string]any{"name": "us-holidays", "timezone": "America/New_York", "dates": []string{"2026-12-25"}, "extends": []string{"business"}}
	r = e.do("PUT", "/v1/calendars/us-holidays", cycle)
	mustStatus(t, r, http.StatusBadRequest)
	if pr := r.problem(t); !hasField(pr, "extends[0]") && !hasField(pr, "extends") {
		t.Errorf("a cycle: %s", fieldsOf(pr))
	}

	// If-Match; a calendar that others extend stays.
	holidays["dates"] = []string{"2026-12-25"}
	r = e.doHeaders("PUT", "/v1/calendars/us-holidays", holidays, map[string]string{"If-Match": `"1"`})
	mustStatus(t, r, http.StatusOK)
	mustStatus(t, e.doHeaders("PUT", "/v1/calendars/us-holidays", holidays, map[string]string{"If-Match": `"1"`}), http.StatusPreconditionFailed)
	mustStatus(t, e.do("DELETE", "/v1/calendars/us-holidays", nil), http.StatusConflict)
	mustStatus(t, e.do("DELETE", "/v1/calendars/business", nil), http.StatusNoContent)
	mustStatus(t, e.do("DELETE", "/v1/calendars/us-holidays", nil), http.StatusNoContent)
	mustStatus(t, e.do("GET", "/v1/calendars/us-holidays", nil), http.StatusNotFound)

	r = e.do("GET", "/v1/audit?action=calendars.update", nil)
	var audit models.AuditList
	r.decode(t, &audit)
	if len(audit.Items) != 1 || audit.Items[0].Resource != "calendar us-holidays" || audit.Items[0].Before == nil || audit.Items[0].After == nil {
		t.Fatalf("audit of the update: %+v", audit.Items)
	}
}

// Jobs that name calendars, through the API: faults by field (an unknown
// calendar, calendars that allow none of the job's runs in 10 years, a
// bad on_excluded, a one-shot run excluded under skip), the fields
// answered and changed, the preview's marks, a used calendar kept (409),
// a batch, and an apply set that round-trips them.
func TestJobCalendars(t *testing.T) {
	t.Parallel()
	e := setEnv(t)
	mustStatus(t, e.do("POST", "/v1/calendars", map[string]any{"name": "xmas", "dates": []string{"2030-12-25"}}), http.StatusCreated)
	// Every day, the whole day: allows nothing.
	mustStatus(t, e.do("POST", "/v1/calendars", map[string]any{"name": "never", "daily": []any{map[string]string{"start": "00:00", "end": "00:00"}}}), http.StatusCreated)
	mustStatus(t, e.do("POST", "/v1/calendars", map[string]any{"name": "weekends", "weekly": []any{map[string]any{"days": []string{"SAT", "SUN"}}}}), http.StatusCreated)

	bad := func(body map[string]any, fields ...string) models.Problem {
		t.Helper()
		r := e.do("POST", "/v1/jobs", body)
		mustStatus(t, r, http.StatusBadRequest)
		p := r.problem(t)
		for _, f := range fields {
			if !hasField(p, f) {
				t.Errorf("no fault on %s: %s", f, fieldsOf(p))
			}
		}
		return p
	}
	with := func(name string, kv ...any) map[string]any {
		b := jobBody(name)
		for i := 0; i < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		return b
	}
	bad(with("j", "calendars", []string{"xmas", "nope"}), "calendars[1]")
	bad(with("j", "calendars", []string{"xmas"}, "on_excluded", "later"), "on_excluded")
	bad(with("j", "on_excluded", "skip"), "on_excluded")
	bad(with("j", "calendars", []string{"xmas", "xmas"}), "calendars[1]")
	p := bad(with("j", "calendars", []string{"xmas", "never"}), "calendars")
	if !strings.Contains(fieldsOf(p), `"never"`) || strings.Contains(fieldsOf(p), `"xmas"`) {
		t.Errorf("the fault names the calendar that excludes the runs: %s", fieldsOf(p))
	}
	// Weekend runs and weekends excluded: none left.
	p = bad(with("j", "schedule", map[string]any{"cron": "0 0 12 * * SAT,SUN"}, "calendars", []string{"weekends"}), "calendars")
	if !strings.Contains(fieldsOf(p), `"weekends"`) {
		t.Errorf("the fault names weekends: %s", fieldsOf(p))
	}
	// A one-shot run on an excluded day: refused under skip, accepted
	// under next_allowed.
	oneShot := func(on string) map[string]any {
		return with("once-"+on, "schedule", map[string]any{"at": "2030-12-25T10:00:00Z"}, "calendars", []string{"xmas"}, "on_excluded", on)
	}
	bad(oneShot("skip"), "calendars")
	e.createJob(oneShot("next_allowed"))

	j := e.createJob(with("daily", "schedule", map[string]any{"cron": "0 0 12 * * *"}, "calendars", []string{"xmas"}))
	if j.Calendars == nil || strings.Join(*j.Calendars, ",") != "xmas" || j.OnExcluded == nil || *j.OnExcluded != models.OnExcludedSkip {
		t.Fatalf("answered calendars %v, on_excluded %v", j.Calendars, j.OnExcluded)
	}
	// Its preview marks Christmas.
	r := e.do("GET", "/v1/jobs/"+j.Id.String()+"/preview?from=2030-12-23T00:00:00Z&count=4", nil)
	mustStatus(t, r, http.StatusOK)
	var pv models.Preview
	r.decode(t, &pv)
	var marks []string
	for _, f := range pv.Fires {
		if f.Excluded != nil {
			marks = append(marks, f.At.Format("01-02")+" "+f.Excluded.Calendar+": "+f.Excluded.Reason)
		}
	}
	if got := strings.Join(marks, ", "); got != "12-25 xmas: date 2030-12-25" {
		t.Errorf("preview marks %q", got)
	}

	// PATCH: a bad name is a 400 by field; on_excluded alone keeps the
	// calendars; [] removes them with on_excluded.
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"calendars": []string{"gone"}})
	mustStatus(t, r, http.StatusBadRequest)
	if !hasField(r.problem(t), "calendars[0]") {
		t.Errorf("PATCH unknown calendar: %s", fieldsOf(r.problem(t)))
	}
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"on_excluded": "next_allowed"})
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &j)
	if j.Calendars == nil || *j.OnExcluded != models.OnExcludedNextAllowed {
		t.Errorf("after on_excluded: %v %v", j.Calendars, j.OnExcluded)
	}

	// A calendar a job names is kept: 409 naming the job.
	r = e.do("DELETE", "/v1/calendars/xmas", nil)
	mustStatus(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "daily") {
		t.Errorf("409 does not name the job: %s", r.body)
	}

	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"calendars": nil})
	mustStatus(t, r, http.StatusOK)
	var cleared models.Job
	r.decode(t, &cleared)
	if cleared.Calendars != nil || cleared.OnExcluded != nil {
		t.Errorf("after calendars: null: %v %v", cleared.Calendars, cleared.OnExcluded)
	}

	// A batch reports a job's calendar faults under its place.
	r = e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{with("b1", "calendars", []string{"nope"}), with("b2", "calendars", []string{"xmas"})}})
	mustStatus(t, r, http.StatusOK)
	var br models.JobBatchResult
	r.decode(t, &br)
	if br.Created != 1 || br.Items[0].Problem == nil || !hasField(*br.Items[0].Problem, "jobs[0].calendars[0]") {
		t.Errorf("batch: %s", r.body)
	}

	// An apply set: created with calendars, planned unchanged again, a
	// change of on_excluded is a change, and a bad name a 400 by field.
	set := with("set-daily", "schedule", map[string]any{"cron": "0 0 12 * * *"}, "calendars", []string{"xmas"})
	e.apply("cal", map[string]any{"jobs": []any{set}})
	if got := actions(e.plan("cal", map[string]any{"jobs": []any{set}})); got != "set-daily:unchanged" {
		t.Errorf("plan again: %s", got)
	}
	set["on_excluded"] = "next_allowed"
	pl := e.plan("cal", map[string]any{"jobs": []any{set}})
	var fields []string
	if len(pl.Changes) == 1 && pl.Changes[0].Fields != nil {
		for _, f := range *pl.Changes[0].Fields {
			fields = append(fields, f.Field)
		}
	}
	if got := actions(pl); got != "set-daily:update" || strings.Join(fields, ",") != "on_excluded" {
		t.Errorf("plan of on_excluded: %s, fields %v", got, fields)
	}
	set["calendars"] = []string{"nope"}
	r = e.do("POST", "/v1/applysets/cal:plan", map[string]any{"jobs": []any{set}})
	mustStatus(t, r, http.StatusBadRequest)
	if !hasField(r.problem(t), "jobs[0].calendars[0]") {
		t.Errorf("apply set with an unknown calendar: %s", fieldsOf(r.problem(t)))
	}
}
