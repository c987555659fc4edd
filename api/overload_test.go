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
