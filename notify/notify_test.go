package notify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

func TestSignAndVerify(t *testing.T) {
	secret, body := []byte("whsec-0123456789abcdef"), []byte(`{"id":"x"}`)
	now := time.Unix(1_800_000_000, 0)
	h := Sign(secret, body, now)
	if !strings.HasPrefix(h, "t=1800000000,v1=") || len(h) != len("t=1800000000,v1=")+64 {
		t.Fatalf("Sign = %q", h)
	}
	if err := Verify(secret, body, h, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("a good signature: %v", err)
	}
	for name, c := range map[string]struct {
		secret, body []byte
		header       string
		at           time.Time
		want         error
	}{
		"another body":      {secret, []byte(`{"id":"y"}`), h, now, ErrBadSignature},
		"another secret":    {[]byte("whsec-other-0123456789"), body, h, now, ErrBadSignature},
		"no v1":             {secret, body, "t=1800000000", now, ErrBadSignature},
		"no t":              {secret, body, strings.SplitN(h, ",", 2)[1], now, ErrBadSignature},
		"a replay, later":   {secret, body, h, now.Add(6 * time.Minute), ErrStale},
		"from the future":   {secret, body, h, now.Add(-6 * time.Minute), ErrStale},
		"empty header":      {secret, body, "", now, ErrBadSignature},
		"a changed t alone": {secret, body, strings.Replace(h, "t=1800000000", "t=1800000001", 1), now, ErrBadSignature},
	} {
		if err := Verify(c.secret, c.body, c.header, c.at, 5*time.Minute); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, c.want)
		}
	}
}

func TestMessageAndSlackBody(t *testing.T) {
	job := uuid.Must(uuid.NewV7())
	r := &model.Rule{ID: uuid.Must(uuid.NewV7()), Namespace: "pay", Name: "failing"}
	detail, _ := json.Marshal(map[string]any{"consecutive_dead": 3, "error": "refused\nthe connection"})
	evs := []model.NotifyEvent{{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: "pay", Kind: domain.NotifyJobFailing,
		JobID: &job, JobName: "settle", At: time.Now().UTC(), Detail: detail}}
	id := uuid.Must(uuid.NewV7())
	body, err := Build(id, r, nil, evs)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	want := "pay/settle is failing: 3 dead executions in a row: refused the connection"
	if m.ID != id.String() || m.Type != MessageType || m.Summary != want || len(m.Events) != 1 ||
		m.Events[0].Job.ID != job.String() || m.Rule.Name != "failing" {
		t.Errorf("message %+v", m)
	}
	sb, err := slackBody(body)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Text string }
	if err := json.Unmarshal(sb, &s); err != nil || !strings.Contains(s.Text, "rule *failing* in `pay`") || !strings.Contains(s.Text, "• "+want) {
		t.Errorf("slack body %s (%v)", sb, err)
	}
}

// TestSilentAfter: a job is silent once its first run after its last
// success is grace past; a one-shot job never.
func TestSilentAfter(t *testing.T) {
	var cache schedule.Cache
	since := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	spec := func(s schedule.Spec) json.RawMessage { b, _ := json.Marshal(s); return b }
	got, ok := silentAfter(&cache, store.SilentCandidate{Spec: spec(schedule.Spec{Cron: "0 0 3 * * *", Timezone: "Europe/Berlin"}), Since: since}, 5*time.Minute)
	// 03:00 in Berlin on the day summer time begins is 01:00 UTC.
	if want := time.Date(2026, 3, 29, 1, 5, 0, 0, time.UTC); !ok || !got.Equal(want) {
		t.Errorf("silentAfter = %s, %v; want %s", got, ok, want)
	}
	at := since.Add(time.Hour)
	if _, ok := silentAfter(&cache, store.SilentCandidate{Spec: spec(schedule.Spec{At: &at}), Since: since}, time.Minute); ok {
		t.Error("a one-shot job can be silent")
	}
}
