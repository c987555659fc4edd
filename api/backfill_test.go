package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

func TestBackfillValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	minutely := jobBody("every-minute")
	minutely["schedule"] = map[string]any{"cron": "0 * * * * *"}
	secondly := jobBody("every-second")
	secondly["schedule"] = map[string]any{"cron": "* * * * * *"}
	once := jobBody("once")
	once["schedule"] = map[string]any{"in": "1h"}
	j, s, o := e.createJob(minutely), e.createJob(secondly), e.createJob(once)

	now := time.Now().UTC()
	hourAgo := now.Add(-time.Hour).Format(time.RFC3339)
	at := now.Add(-time.Minute).Format(time.RFC3339)
	for _, c := range []struct {
		name  string
		job   uuid.UUID
		body  any
		field string
	}{
		{"from missing", j.Id, map[string]any{"to": at}, "from"},
		{"from not a time", j.Id, map[string]any{"from": "yesterday", "to": at}, "from"},
		{"to missing", j.Id, map[string]any{"from": hourAgo}, "to"},
		{"to before from", j.Id, map[string]any{"from": at, "to": hourAgo}, "to"},
		{"to equal to from", j.Id, map[string]any{"from": at, "to": at}, "to"},
		{"to in the future", j.Id, map[string]any{"from": hourAgo, "to": now.Add(time.Hour).Format(time.RFC3339)}, "to"},
		{"over a million times", s.Id, map[string]any{"from": now.Add(-12 * 24 * time.Hour).Format(time.RFC3339), "to": at}, "to"},
		{"overlap other than allow", j.Id, map[string]any{"from": hourAgo, "to": at, "overlap": "skip"}, "overlap"},
		{"unknown member", j.Id, map[string]any{"from": hourAgo, "to": at, "until": at}, "until"},
		{"one-shot job", o.Id, map[string]any{"from": hourAgo, "to": at}, "id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs/"+c.job.String()+"/backfill", c.body)
			mustStatus(t, r, http.StatusBadRequest)
			if p := r.problem(t); !hasField(p, c.field) {
				t.Errorf("problem names %s, want %s", fieldsOf(p), c.field)
			}
		})
	}
	r := e.do("POST", "/v1/jobs/"+uuid.NewString()+"/backfill", map[string]any{"from": hourAgo, "to": at})
	mustStatus(t, r, http.StatusNotFound)
	r = e.do("POST", "/v1/jobs/not-an-id/backfill", map[string]any{"from": hourAgo, "to": at})
	mustStatus(t, r, http.StatusBadRequest)
}

func TestBackfillAcceptedListedAndStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := jobBody("every-minute")
	body["schedule"] = map[string]any{"cron": "0 * * * * *"}
	j := e.createJob(body)
	from := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute)
	to := from.Add(time.Hour)

	r := e.do("POST", "/v1/jobs/"+j.Id.String()+"/backfill", map[string]any{"from": from, "to": to, "overlap": "allow"})
	mustStatus(t, r, http.StatusAccepted)
	var b models.Backfill
	r.decode(t, &b)
	if b.Total != 60 || b.Fired != 0 || b.State != models.BackfillStateRunning || b.JobId != j.Id ||
		!b.From.Equal(from) || !b.To.Equal(to) || !b.NextAt.Equal(from) || b.FinishedAt != nil {
		t.Fatalf("accepted %+v", b)
	}
	r = e.do("POST", "/v1/jobs/"+j.Id.String()+"/backfill", map[string]any{"from": from, "to": to})
	mustStatus(t, r, http.StatusAccepted)
	var b2 models.Backfill
	r.decode(t, &b2)

	list := func() []models.Backfill {
		r := e.do("GET", "/v1/jobs/"+j.Id.String()+"/backfills", nil)
		mustStatus(t, r, http.StatusOK)
		var l models.BackfillList
		r.decode(t, &l)
		return l.Items
	}
	if l := list(); len(l) != 2 || l[0].Id != b2.Id || l[1].Id != b.Id {
		t.Fatalf("list: %+v", l)
	}
	stop := "/v1/jobs/" + j.Id.String() + "/backfills/" + b.Id.String()
	mustStatus(t, e.do("DELETE", stop, nil), http.StatusNoContent)
	mustStatus(t, e.do("DELETE", stop, nil), http.StatusNoContent) // again: nothing to do
	if l := list(); l[1].State != models.BackfillStateStopped || l[1].FinishedAt == nil {
		t.Errorf("stopped backfill listed as %+v", l[1])
	}
	if _, err := e.store.Pool().Exec(e.ctx, "UPDATE backfills SET state = 'done' WHERE id = $1", b2.Id); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+j.Id.String()+"/backfills/"+b2.Id.String(), nil), http.StatusConflict)
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+j.Id.String()+"/backfills/"+uuid.NewString(), nil), http.StatusNotFound)
	mustStatus(t, e.do("DELETE", "/v1/jobs/"+uuid.NewString()+"/backfills/"+b.Id.String(), nil), http.StatusNotFound)
	mustStatus(t, e.do("GET", "/v1/jobs/"+uuid.NewString()+"/backfills", nil), http.StatusNotFound)
	mustStatus(t, e.do("GET", "/v1/jobs/"+j.Id.String()+"/backfills?limit=0", nil), http.StatusBadRequest)
}
