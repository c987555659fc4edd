package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// fireText is a run as the tests compare it: its local time and mark.
func fireText(f models.PreviewFire) string {
	s := f.Local.Format(time.RFC3339)
	if f.Dst != nil {
		s += " " + string(*f.Dst)
	}
	if f.Nominal != nil {
		s += " " + *f.Nominal
	}
	if f.Occurrence != nil {
		s += " #" + string(rune('0'+*f.Occurrence))
	}
	return s
}

func firesText(p models.Preview) string {
	var out []string
	for _, f := range p.Fires {
		out = append(out, fireText(f))
	}
	return strings.Join(out, ", ")
}

func TestPreviewSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"spring forward moves a fixed time", map[string]any{
			"schedule": map[string]any{"cron": "0 30 2 * * *", "timezone": "America/New_York"},
			"count":    3, "from": "2026-03-07T12:00:00-05:00",
		}, "2026-03-08T03:00:00-04:00 moved 2026-03-08T02:30:00, 2026-03-09T02:30:00-04:00, 2026-03-10T02:30:00-04:00"},
		{"fall back repeats a wall-clock hour", map[string]any{
			"schedule": map[string]any{"cron": "0 */30 * * * *", "timezone": "America/New_York"},
			"count":    5, "from": "2026-11-01T04:45:00Z",
		}, "2026-11-01T01:00:00-04:00 repeated #1, 2026-11-01T01:30:00-04:00 repeated #1, " +
			"2026-11-01T01:00:00-05:00 repeated #2, 2026-11-01T01:30:00-05:00 repeated #2, 2026-11-01T02:00:00-05:00"},
		{"a half-hour change", map[string]any{
			"schedule": map[string]any{"cron": "0 15 2 * * *", "timezone": "Australia/Lord_Howe"},
			"count":    2, "from": "2026-10-03T00:00:00Z",
		}, "2026-10-04T02:30:00+11:00 moved 2026-10-04T02:15:00, 2026-10-05T02:15:00+11:00"},
		{"LW: the last weekday of each month, in its zone", map[string]any{
			"schedule": map[string]any{"cron": "0 0 12 LW * *", "timezone": "Europe/Berlin"},
			"count":    4, "from": "2026-01-01T00:00:00Z",
		}, "2026-01-30T12:00:00+01:00, 2026-02-27T12:00:00+01:00, 2026-03-31T12:00:00+02:00, 2026-04-30T12:00:00+02:00"},
		{"a one-shot previews its single run", map[string]any{
			"schedule": map[string]any{"at": "2026-10-25T00:30:00Z", "timezone": "Europe/Berlin"},
			"from":     "2026-10-01T00:00:00Z",
		}, "2026-10-25T02:30:00+02:00 repeated #1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/schedules:preview", tc.body)
			mustStatus(t, r, http.StatusOK)
			var p models.Preview
			r.decode(t, &p)
			if got := firesText(p); got != tc.want {
				t.Errorf("fires\n got %s\nwant %s", got, tc.want)
			}
			sched := tc.body["schedule"].(map[string]any)
			from, _ := time.Parse(time.RFC3339, tc.body["from"].(string))
			if p.Timezone != sched["timezone"] || !p.From.Equal(from) || p.JobId != nil || p.State != nil {
				t.Errorf("preview %+v", p)
			}
			for _, f := range p.Fires {
				if !f.At.Equal(f.Local) || f.At.Location() != time.UTC || (f.Dst == nil) != (f.Note == nil) || f.Zone == nil {
					t.Errorf("fire %+v", f)
				}
			}
		})
	}

	// Defaults: ten runs from now, in UTC.
	before := time.Now().Add(-time.Second)
	r := e.do("POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "@hourly"}})
	mustStatus(t, r, http.StatusOK)
	var p models.Preview
	r.decode(t, &p)
	if len(p.Fires) != 10 || p.Timezone != "UTC" || p.From.Before(before) || p.From.After(time.Now().Add(time.Second)) ||
		!p.Fires[0].At.After(p.From) || p.Fires[0].At.Sub(p.From) > time.Hour {
		t.Errorf("default preview: from %v, %d fires %s", p.From, len(p.Fires), firesText(p))
	}
}

// A preview agrees with firing: the first run a job previews is the next
// run its creation computed, and the runs after it follow.
func TestPreviewAgreesWithCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := jobBody("every-ten-seconds")
	b["schedule"] = map[string]any{"cron": "*/10 * * * * *", "timezone": "Australia/Lord_Howe"}
	j := e.createJob(b)
	r := e.do("GET", "/v1/jobs/"+j.Id.String()+"/preview?count=3&from="+url.QueryEscape(j.CreatedAt.Format(time.RFC3339Nano)), nil)
	mustStatus(t, r, http.StatusOK)
	var p models.Preview
	r.decode(t, &p)
	if len(p.Fires) != 3 || !p.Fires[0].At.Equal(*j.NextRunAt) ||
		p.Fires[1].At.Sub(p.Fires[0].At) != 10*time.Second || p.Fires[2].At.Sub(p.Fires[1].At) != 10*time.Second {
		t.Errorf("job next run %v, created %v; preview %s", j.NextRunAt, j.CreatedAt, firesText(p))
	}
}

func TestPreviewJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := jobBody("fall-back")
	b["schedule"] = map[string]any{"cron": "0 30 1 * * *", "timezone": "America/New_York"}
	j := e.createJob(b)
	path := "/v1/jobs/" + j.Id.String() + "/preview"

	r := e.do("GET", path+"?count=2&from="+url.QueryEscape("2026-10-31T12:00:00-04:00"), nil)
	mustStatus(t, r, http.StatusOK)
	var p models.Preview
	r.decode(t, &p)
	if got, want := firesText(p), "2026-11-01T01:30:00-04:00 repeated #1, 2026-11-02T01:30:00-05:00"; got != want {
		t.Errorf("fires\n got %s\nwant %s", got, want)
	}
	if p.JobId == nil || *p.JobId != j.Id || p.State == nil || *p.State != models.JobStateActive ||
		p.Timezone != "America/New_York" || p.Schedule.Cron == nil || *p.Schedule.Cron != "0 30 1 * * *" {
		t.Errorf("preview %+v", p)
	}
	if n := p.Fires[0].Note; n == nil || !strings.Contains(*n, "first occurrence only") {
		t.Errorf("note %v", n)
	}

	// From now by default, ten runs; the first is the job's next run.
	r = e.do("GET", path, nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if len(p.Fires) != 10 || !p.Fires[0].At.Equal(*j.NextRunAt) {
		t.Errorf("default preview: %s; job's next run %v", firesText(p), j.NextRunAt)
	}

	// A paused job previews its schedule anyway.
	mustStatus(t, e.do("POST", "/v1/jobs/"+j.Id.String()+"/pause", nil), http.StatusOK)
	r = e.do("GET", path+"?count=1", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if len(p.Fires) != 1 || p.State == nil || *p.State != models.JobStatePaused || !p.Fires[0].At.Equal(*j.NextRunAt) {
		t.Errorf("paused job's preview: %+v", p)
	}

	// A one-shot job previews its single run, whatever from says.
	at := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	once := jobBody("once")
	once["schedule"] = map[string]any{"at": at.Format(time.RFC3339), "timezone": "Europe/Berlin"}
	o := e.createJob(once)
	r = e.do("GET", "/v1/jobs/"+o.Id.String()+"/preview?count=5&from=2030-01-01T00:00:00Z", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &p)
	if len(p.Fires) != 1 || !p.Fires[0].At.Equal(at) || p.Timezone != "Europe/Berlin" {
		t.Errorf("one-shot preview: %+v", p)
	}
}

func TestPreviewBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("weekdays"))
	job := "/v1/jobs/" + j.Id.String() + "/preview"
	unknown := "/v1/jobs/00000000-0000-4000-8000-000000000000/preview"
	cron := map[string]any{"cron": "0 0 9 * * *"}
	tests := []struct {
		name, method, path string
		body               any
		field, msg         string
	}{
		{"job count 0", "GET", job + "?count=0", nil, "count", "between 1 and 1000"},
		{"job count 5000", "GET", job + "?count=5000", nil, "count", "between 1 and 1000"},
		{"job count not a number", "GET", job + "?count=ten", nil, "count", "must be an integer"},
		{"job bad from", "GET", job + "?from=yesterday", nil, "from", "RFC 3339"},
		{"job from with an unencoded plus", "GET", job + "?from=2026-03-08T00:00:00+01:00", nil, "from", "%2B"},
		{"unknown job, count 0", "GET", unknown + "?count=0", nil, "count", ""},
		{"bad job id", "GET", "/v1/jobs/nope/preview", nil, "id", "UUID"},

		{"count 0", "POST", "/v1/schedules:preview", map[string]any{"schedule": cron, "count": 0}, "count", "between 1 and 1000"},
		{"count 5000", "POST", "/v1/schedules:preview", map[string]any{"schedule": cron, "count": 5000}, "count", "between 1 and 1000"},
		{"count not a number", "POST", "/v1/schedules:preview", map[string]any{"schedule": cron, "count": "ten"}, "count", "integer"},
		{"bad cron", "POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "0 0 25 * * *"}}, "schedule.cron", ""},
		{"bad zone", "POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "@daily", "timezone": "Mars/Base"}}, "schedule.timezone", "unknown time zone"},
		{"cron and at", "POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "@daily", "in": "5m"}}, "schedule", "only one"},
		{"at before from", "POST", "/v1/schedules:preview", map[string]any{
			"schedule": map[string]any{"at": "2026-01-01T00:00:00Z"}, "from": "2026-02-01T00:00:00Z"}, "schedule.at", "must be in the future"},
		{"bad from", "POST", "/v1/schedules:preview", map[string]any{"schedule": cron, "from": "yesterday"}, "from", "RFC 3339"},
		{"no schedule", "POST", "/v1/schedules:preview", map[string]any{"count": 3}, "schedule", "is required"},
		{"unknown field", "POST", "/v1/schedules:preview", map[string]any{"schedule": cron, "limit": 3}, "limit", "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.body)
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation || !hasField(p, tc.field) {
				t.Fatalf("problem does not name %s: %s", tc.field, r.body)
			}
			if !strings.Contains(fieldsOf(p), tc.msg) {
				t.Errorf("errors %s do not say %q", fieldsOf(p), tc.msg)
			}
		})
	}

	// Every fault at once: the request's, the schedule's and the count's.
	r := e.do("POST", "/v1/schedules:preview", map[string]any{"schedule": map[string]any{"cron": "nope"}, "count": 0, "limit": 1})
	mustStatus(t, r, http.StatusBadRequest)
	p := r.problem(t)
	for _, f := range []string{"limit", "schedule.cron", "count"} {
		if !hasField(p, f) {
			t.Errorf("errors do not name %s: %s", f, fieldsOf(p))
		}
	}

	r = e.do("GET", unknown, nil)
	mustStatus(t, r, http.StatusNotFound)
	if p := r.problem(t); p.Type != ProblemNotFound {
		t.Errorf("unknown job: %s", r.body)
	}
}

// TestPreviewStopsAtYear9999: a preview lists the runs RFC 3339 can
// write and leaves out those after the year 9999, or before year 0 in
// the schedule's zone (once such a from was a 500).
func TestPreviewStopsAtYear9999(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(map[string]any{"name": "yearly", "schedule": map[string]any{"cron": "@yearly"}, "handler": jobBody("x")["handler"]})
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/schedules:preview", `{"schedule":{"cron":"@yearly"},"from":"9990-06-01T00:00:00Z","count":20}`},
		{"GET", "/v1/jobs/" + j.Id.String() + "/preview?count=20&from=9990-06-01T00:00:00Z", ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := e.do(req.method, req.path, body)
		mustStatus(t, r, http.StatusOK)
		var p models.Preview
		r.decode(t, &p)
		if len(p.Fires) != 9 || p.Fires[8].At.Year() != 9999 {
			t.Errorf("%s %s: fires %s, want the 9 of 9991 to 9999", req.method, req.path, firesText(p))
		}
	}
	// From year 0 in a zone behind UTC: the first runs' local times are
	// in year -1.
	r := e.do("POST", "/v1/schedules:preview", `{"schedule":{"cron":"@hourly","timezone":"America/New_York"},"from":"0000-01-01T00:00:00Z","count":10}`)
	mustStatus(t, r, http.StatusOK)
	var p models.Preview
	r.decode(t, &p)
	for _, f := range p.Fires {
		if f.Local.Year() < 0 {
			t.Errorf("fire %s listed", fireText(f))
		}
	}
}
