package store

import (
	"context"
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Labels and a description are stored and read back, by every way of
// creating a job and by UpdateJob; a listing by selector returns the jobs
// whose labels match, and a job without labels matches only != and !key.
func TestLabelsAndSelector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime()

	pay := testJob("pay", &at)
	pay.Namespace, pay.Labels, pay.Description = "sel", domain.Labels{"team": "payments", "tier": "web"}, "charges cards"
	mustCreate(t, s, pay)
	batch := testJob("batch", &at)
	batch.Namespace, batch.Labels = "sel", domain.Labels{"team": "payments", "tier": "batch"}
	if errs, err := s.CreateJobBatch(ctx, []*model.Job{batch}); err != nil || errs[0] != nil {
		t.Fatalf("batch: %v %v", err, errs)
	}
	var many []*model.Job // more than insertJobs takes, so COPY writes them
	for i := range maxInsertedJobs + 1 {
		j := testJob("bulk-"+string(rune('a'+i%26))+string(rune('a'+i/26)), &at)
		j.Namespace, j.Labels, j.Description = "bulk", domain.Labels{"team": "search"}, "bulk"
		many = append(many, j)
	}
	if errs, err := s.CreateJobBatch(ctx, many); err != nil || errs[0] != nil {
		t.Fatalf("bulk: %v %v", err, errs)
	}
	plain := testJob("plain", &at)
	plain.Namespace = "sel"
	mustCreate(t, s, plain)

	got, err := s.GetJob(ctx, pay.ID)
	if err != nil || got.Labels["team"] != "payments" || got.Labels["tier"] != "web" || got.Description != "charges cards" {
		t.Fatalf("read back %+v %v", got, err)
	}
	if g, _ := s.GetJob(ctx, many[len(many)-1].ID); g.Labels["team"] != "search" || g.Description != "bulk" {
		t.Fatalf("copied job read back labels %v description %q", g.Labels, g.Description)
	}
	if g, _ := s.GetJob(ctx, plain.ID); g.Labels != nil || g.Description != "" {
		t.Fatalf("a job without labels reads back %v %q", g.Labels, g.Description)
	}

	list := func(sel string) []string {
		t.Helper()
		parsed, err := domain.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		jobs, _, err := s.ListJobs(ctx, JobFilter{Namespace: "sel", Selector: parsed})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range jobs {
			names = append(names, j.Name)
		}
		return names
	}
	for sel, want := range map[string]string{
		"team=payments":             "batch pay",
		"team=payments,tier!=batch": "pay",
		"tier!=batch":               "pay plain",
		"tier":                      "batch pay",
		"!tier":                     "plain",
		"team=search":               "",
	} {
		if got := list(sel); joinNames(got) != want {
			t.Errorf("selector %q: %q, want %q", sel, joinNames(got), want)
		}
	}

	got.Labels, got.Description = domain.Labels{"team": "billing"}, ""
	if err := s.UpdateJob(ctx, got); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.GetJob(ctx, pay.ID); len(g.Labels) != 1 || g.Labels["team"] != "billing" || g.Description != "" {
		t.Fatalf("after update: %v %q", g.Labels, g.Description)
	}
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += " "
		}
		out += n
	}
	return out
}
