package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// A read that runs longer than the API allows is cut and refused, 503
// with Retry-After and a problem saying what to do, rather than left to
// hold a connection (issue 44): by the API pool's statement timeout
// (store.ForRequests, tockd --api-statement-timeout) and by the
// request's budget (--api-request-timeout). A cheap read on the same
// server is answered.
func TestTooExpensiveReadsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.Postgres(t)
	seed, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(seed.Close)
	if _, err := seed.Init(ctx, 16); err != nil {
		t.Fatal(err)
	}
	// 30,000 jobs: a negative selector matching none (!team, when every
	// job has the label) walks them all; a positive one is answered from
	// an index (issue 44).
	next := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	jobs := make([]*model.Job, 30_000)
	for i := range jobs {
		jobs[i] = &model.Job{Namespace: "default", Name: fmt.Sprintf("job-%05d", i), State: domain.JobActive,
			Schedule: schedule.Spec{Cron: "0 0 3 * * *"}, NextRunAt: &next, Labels: domain.Labels{"team": "a"},
			Handler: domain.Handler{Type: domain.HandlerCustom, Name: "h"}}
	}
	if err := seed.CopyJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}

	open := func(timeout time.Duration) *store.Store {
		st, err := store.Open(ctx, url, store.ForRequests(2, timeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		// Init's own statement may meet a tiny timeout on a loaded machine.
		for try := 0; ; try++ {
			_, err := st.Init(ctx, 16)
			if err == nil {
				break
			}
			if !store.Overloaded(err) || try == 50 {
				t.Fatal(err)
			}
		}
		return st
	}
	for name, e := range map[string]*env{
		"statement timeout": newEnvWith(t, open(5*time.Millisecond)),
		// A budget spent before the read starts: with 2 ms, a read that
		// finished as the deadline passed (its cancel arriving after its
		// result) was answered 200 under make test's load.
		"request budget": newEnvWith(t, open(0), func(c *Config) { c.Limits.RequestTimeout = time.Microsecond }),
	} {
		r := e.do("GET", "/v1/jobs?namespace=default&selector=%21team&limit=50", nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("%s: an expensive listing answered %d (Retry-After %q) %s; want 503 with Retry-After",
				name, r.status, r.header.Get("Retry-After"), r.body)
			continue
		}
		var p models.Problem
		r.decode(t, &p)
		if p.Title != "Request too expensive" || !strings.Contains(deref(p.Detail), "narrow it") {
			t.Errorf("%s: problem %+v", name, p)
		}
		if r := e.do("GET", "/healthz", nil); r.status != http.StatusOK {
			t.Errorf("%s: /healthz answered %d", name, r.status)
		}
	}
	// With room to run, the same listing is answered.
	e := newEnvWith(t, open(30*time.Second), func(c *Config) { c.Limits.RequestTimeout = time.Minute })
	mustStatus(t, e.do("GET", "/v1/jobs?namespace=default&selector=%21team&limit=50", nil), http.StatusOK)
}

// TestReadsHaveTheirShare checks --api-read-share: once the node's reads
// have used their share of its time, the next read is refused with 429,
// Retry-After and a problem saying why, while writes, /healthz and the
// budget's refill are untouched.
func TestReadsHaveTheirShare(t *testing.T) {
	t.Parallel()
	// A microsecond of reading a second: the first read overdraws it,
	// and the bucket takes as many seconds to refill as the read took
	// microseconds.
	e := newEnvWith(t, openStore(t), func(c *Config) { c.Limits.ReadShare = 1e-6 })
	mustStatus(t, e.do("GET", "/v1/jobs?namespace=default", nil), http.StatusOK)
	r := e.do("GET", "/v1/jobs?namespace=default", nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("a read past the share answered %d (Retry-After %q) %s; want 429 with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	var p models.Problem
	r.decode(t, &p)
	if p.Title != "Too many reads" || !strings.Contains(deref(p.Detail), "--api-read-share") {
		t.Errorf("problem %+v", p)
	}
	mustStatus(t, e.do("POST", "/v1/jobs", map[string]any{"name": "w", "schedule": map[string]any{"cron": "0 0 3 * * *"},
		"handler": map[string]any{"type": "custom", "name": "h"}}), http.StatusCreated)
	mustStatus(t, e.do("GET", "/healthz", nil), http.StatusOK)
}

// TestWorkBucket checks the read share's arithmetic on a clock of its
// own: a full bucket admits, work overdraws it, and it admits again once
// refilled at its rate.
func TestWorkBucket(t *testing.T) {
	t0 := time.Now()
	w := &workBucket{rate: 0.5, tokens: 0.5, last: t0}
	if d := w.admit(t0); d != 0 {
		t.Fatalf("full bucket: wait %s", d)
	}
	w.spend(2 * time.Second) // 0.5 - 2 = -1.5 s: 3 s to refill past 0
	if d := w.admit(t0.Add(time.Second)); d < 1900*time.Millisecond || d > 2100*time.Millisecond {
		t.Errorf("overdrawn by 1 s at 0.5/s: wait %s, want ~2 s", d)
	}
	if d := w.admit(t0.Add(3100 * time.Millisecond)); d != 0 {
		t.Errorf("refilled: wait %s", d)
	}
	// It holds at most one second's worth, however long it was idle.
	if d := w.admit(t0.Add(time.Hour)); d != 0 || w.tokens != 0.5 {
		t.Errorf("after an hour idle: wait %s, %g s in the bucket; want 0.5", d, w.tokens)
	}
}

// slowStore is a store whose listings wait for their request to end: a
// read still running when its client goes away.
type slowStore struct {
	Store
	started chan struct{}
}

func (s slowStore) ListJobs(ctx context.Context, _ store.JobFilter) ([]*model.Job, string, error) {
	close(s.started)
	<-ctx.Done()
	return nil, "", fmt.Errorf("list jobs: %w", ctx.Err())
}

// A client that goes away while its read runs is not the server's
// failure: no ERROR in the log, and the request counted as 499, not 500.
func TestClientGoneIsNotAFailure(t *testing.T) {
	t.Parallel()
	st := slowStore{Store: openStore(t), started: make(chan struct{})}
	e := newEnvWith(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+"/v1/jobs?namespace=default", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-st.started
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d before the client left", resp.StatusCode)
	}
	want := `tock_http_request_duration_seconds_count{method="GET",route="/v1/jobs",status="499"} 1`
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/metrics", nil)
		if strings.Contains(string(r.body), want) {
			if strings.Contains(string(r.body), `status="500"`) {
				t.Errorf("a request counted as 500:\n%s", r.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %s:\n%s", want, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if logs := e.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("the client's leaving was logged as an error:\n%s", logs)
	}
}
