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
