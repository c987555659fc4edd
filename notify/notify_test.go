package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/egress"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
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

	// An event about an execution points at its log.
	exec := uuid.Must(uuid.NewV7())
	evs[0].Kind, evs[0].ExecutionID = domain.NotifyExecutionDead, &exec
	body, err = Build(id, r, nil, evs)
	if err != nil {
		t.Fatal(err)
	}
	m = Message{}
	if err := json.Unmarshal(body, &m); err != nil || m.Events[0].Log != "/v1/executions/"+exec.String()+"/logs" {
		t.Errorf("log of the execution's event: %q (%v)", m.Events[0].Log, err)
	}
	if sb, err = slackBody(body); err != nil || !strings.Contains(string(sb), "(log: `GET /v1/executions/"+exec.String()+"/logs`)") {
		t.Errorf("slack body %s (%v): no log", sb, err)
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

// plainKeys "opens" a sealed secret by returning it: the sealing itself
// is package secret's, tested there.
type plainKeys struct{}

func (plainKeys) Open(_ string, sealed, _ []byte) ([]byte, error) { return sealed, nil }

// TestSendNamesOnlyTheURLsOrigin: a delivery's error names the origin of
// its URL, never the rest (a Slack URL is its secret); a webhook delivery
// carries the message's id and a signature the receiver can check.
func TestSendNamesOnlyTheURLsOrigin(t *testing.T) {
	ctx := context.Background()
	policy, err := egress.New(ctx, egress.Rules{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: nil, Egress: policy, Keys: plainKeys{}, Timeout: 5 * time.Second})
	if err == nil || s != nil {
		t.Fatal("New without a Store")
	}
	s, err = New(Config{Store: fakeStore{}, Egress: policy, Keys: plainKeys{}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: the connection is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	secretURL := "http://" + dead + "/services/T000/B000/sl4ckS3cret"
	slack := &model.Channel{Namespace: "ns", Name: "s", Type: model.ChannelSlack, URL: "http://" + dead, Secret: []byte(secretURL)}
	a := s.Test(ctx, slack, nil)
	if a.Error == "" || strings.Contains(a.Error, "sl4ckS3cret") || strings.Contains(a.Error, "/services") ||
		!strings.Contains(a.Error, "http://"+dead) {
		t.Errorf("the attempt's error %q", a.Error)
	}

	var got http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r.Header.Clone(), must(io.ReadAll(r.Body))
	}))
	defer srv.Close()
	hook := &model.Channel{Namespace: "ns", Name: "h", Type: model.ChannelWebhook, URL: srv.URL, Secret: []byte("whsec-0123456789abcdef")}
	if a := s.Test(ctx, hook, nil); a.Error != "" || a.Status != 200 {
		t.Fatalf("a test of a webhook: %+v", a)
	}
	var m Message
	_ = json.Unmarshal(body, &m)
	if m.ID == "" || got.Get(IDHeader) != m.ID || !m.Test {
		t.Errorf("id header %q, message %+v", got.Get(IDHeader), m)
	}
	if err := Verify([]byte("whsec-0123456789abcdef"), body, got.Get(SignatureHeader), time.Now(), time.Minute); err != nil {
		t.Errorf("signature: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// fakeStore is a Store that Test never calls.
type fakeStore struct{ Store }

// recordingStore records what recordStates writes.
type recordingStore struct {
	Store
	changes [][]model.BreakerChange
	seen    [][]model.HandlerSeen
}

func (r *recordingStore) SaveHandlerStates(_ context.Context, changes []model.BreakerChange, seen []model.HandlerSeen) error {
	r.changes, r.seen = append(r.changes, changes), append(r.seen, seen)
	return nil
}

// A node writes a breaker transition once, and that a handler is served
// every 20 s: polling every 2 s writes nothing while nothing changes.
func TestRecordStatesWritesWhatChanged(t *testing.T) {
	now := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	st := &recordingStore{}
	policy, err := egress.New(context.Background(), egress.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: st, Egress: policy, Keys: plainKeys{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	open := wire.BreakerState{Key: "mail", Queue: "mail", ExecutorID: "a", Breaker: wire.BreakerOpen, Since: now.Add(-time.Second)}
	ctx := context.Background()
	for i := range 5 { // 8 s of polls
		if err := s.recordStates(ctx, []wire.BreakerState{open}, now.Add(time.Duration(i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.changes) != 1 || len(st.changes[0]) != 1 || st.changes[0][0].State != wire.BreakerOpen || len(st.seen[0]) != 1 {
		t.Fatalf("5 polls of one state wrote %v, %v; want the transition and the sight once", st.changes, st.seen)
	}
	// 20 s on: the sight again, not the transition; then a new one.
	if err := s.recordStates(ctx, []wire.BreakerState{open}, now.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	closed := open
	closed.Breaker, closed.Since = wire.BreakerClosed, now.Add(21*time.Second)
	if err := s.recordStates(ctx, []wire.BreakerState{closed}, now.Add(22*time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(st.changes) != 3 || len(st.changes[1]) != 0 || len(st.seen[1]) != 1 ||
		len(st.changes[2]) != 1 || st.changes[2][0].State != wire.BreakerClosed || len(st.seen[2]) != 0 {
		t.Fatalf("writes %v, %v; want a sight at 20 s, then the closing alone", st.changes, st.seen)
	}
}
