package store

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// TestSearchJobsMatchesBruteForce lists random jobs with random filters,
// alone and combined, page by page through the cursor, and counts them,
// against a filter written in Go over the same jobs. Each filter is
// tried both ways a next-run range can be read (jobs_due, or a filter on
// job_names' rows).
func TestSearchJobsMatchesBruteForce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	rng := rand.New(rand.NewPCG(44, 1))
	t0 := baseTime()
	namespaces := []string{"alpha", "beta", "gamma"}
	keys := []string{"team", "env", "tier"}
	values := []string{"a", "b", "c", ""}
	handlers := []domain.Handler{
		{Type: domain.HandlerHTTP, URL: "http://example.test/hook"},
		{Type: domain.HandlerNATS, Subject: "x.y"},
		{Type: domain.HandlerCustom, Name: "worker-a"},
		{Type: domain.HandlerCustom, Name: "worker-b"},
	}
	var all []*model.Job
	for i := range 420 {
		next := t0.Add(time.Duration(rng.IntN(3600)) * time.Second)
		j := testJob(fmt.Sprintf("job-%c%03d", 'a'+rune(rng.IntN(4)), i), &next)
		j.Namespace = namespaces[rng.IntN(len(namespaces))]
		j.Handler = handlers[rng.IntN(len(handlers))]
		if rng.IntN(5) > 0 {
			j.Labels = domain.Labels{}
			for _, k := range keys {
				if rng.IntN(3) > 0 {
					j.Labels[k] = values[rng.IntN(len(values))]
				}
			}
		}
		switch rng.IntN(6) {
		case 0:
			j.State, j.NextRunAt, j.PausedNextRunAt = domain.JobPaused, nil, &next
		case 1:
			j.State, j.NextRunAt = domain.JobCompleted, nil
		}
		all = append(all, j)
	}
	// Every way a job is created: one at a time, in a batch, copied.
	for _, j := range all[:60] {
		mustCreate(t, s, j)
	}
	if _, err := s.CreateJobBatch(ctx, all[60:200]); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyJobs(ctx, all[200:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE job_names"); err != nil {
		t.Fatal(err)
	}

	randomSelector := func() domain.Selector {
		var sel domain.Selector
		for range rng.IntN(3) {
			r := domain.Requirement{Key: keys[rng.IntN(len(keys))]}
			switch rng.IntN(6) {
			case 0:
				r.Op, r.Value = domain.OpEquals, values[rng.IntN(len(values))]
			case 1:
				r.Op, r.Value = domain.OpNotEquals, values[rng.IntN(len(values))]
			case 2:
				r.Op = domain.OpExists
			case 3:
				r.Op = domain.OpNotExists
			case 4:
				r.Op, r.Values = domain.OpIn, []string{values[rng.IntN(len(values))], values[rng.IntN(len(values))]}
			case 5:
				r.Op, r.Values = domain.OpNotIn, []string{values[rng.IntN(len(values))]}
			}
			sel = append(sel, r)
		}
		return sel
	}
	randomFilter := func() JobFilter {
		var f JobFilter
		if rng.IntN(3) > 0 {
			f.Namespace = namespaces[rng.IntN(len(namespaces))]
		}
		if rng.IntN(3) == 0 {
			f.State = []domain.JobState{domain.JobActive, domain.JobPaused, domain.JobCompleted}[rng.IntN(3)]
		}
		if rng.IntN(3) == 0 {
			f.Handler = []string{"http", "nats", "worker-a", "worker-b", "none"}[rng.IntN(5)]
		}
		if rng.IntN(4) == 0 {
			f.NamePrefix = []string{"job-a", "job-b0", "job-", "nope"}[rng.IntN(4)]
		}
		f.Selector = randomSelector()
		if rng.IntN(3) == 0 {
			f.NextRunAfter = t0.Add(time.Duration(rng.IntN(3600)) * time.Second)
		}
		if rng.IntN(3) == 0 {
			f.NextRunBefore = t0.Add(time.Duration(rng.IntN(3600)) * time.Second)
		}
		f.Limit = 1 + rng.IntN(40)
		return f
	}
	matches := func(f JobFilter, j *model.Job) bool {
		return (f.Namespace == "" || j.Namespace == f.Namespace) &&
			(f.State == "" || j.State == f.State) &&
			(f.Handler == "" || j.Handler.Queue() == f.Handler) &&
			strings.HasPrefix(j.Name, f.NamePrefix) &&
			f.Selector.Matches(j.Labels) &&
			(f.NextRunAfter.IsZero() || j.NextRunAt != nil && !j.NextRunAt.Before(f.NextRunAfter)) &&
			(f.NextRunBefore.IsZero() || j.NextRunAt != nil && j.NextRunAt.Before(f.NextRunBefore))
	}
	key := func(j *model.Job) string { return j.Namespace + "/" + j.Name }
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *model.Job) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	// With a next-run range: active jobs soonest first, then by
	// namespace and name.
	var byNextRun []*model.Job
	for _, j := range sorted {
		if j.NextRunAt != nil {
			byNextRun = append(byNextRun, j)
		}
	}
	slices.SortStableFunc(byNextRun, func(a, b *model.Job) int { return a.NextRunAt.Compare(*b.NextRunAt) })

	for i := range 300 {
		f := randomFilter()
		var want []string
		order := sorted
		if !f.NextRunAfter.IsZero() || !f.NextRunBefore.IsZero() {
			order = byNextRun
		}
		for _, j := range order {
			if matches(f, j) {
				want = append(want, key(j))
			}
		}
		// The default probe reads the few jobs of these filters by name;
		// a probe of 1 walks the jobs in range by next run.
		for _, probe := range []int{0, 1} {
			s.namedProbe = probe
			var got []string
			g := f
			for pages := 0; ; pages++ {
				page, next, err := s.ListJobs(ctx, g)
				if err != nil {
					t.Fatalf("filter %d %+v: %v", i, f, err)
				}
				if len(page) > g.Limit || next != "" && len(page) != g.Limit || pages > len(all) {
					t.Fatalf("filter %d %+v: page of %d, next %q", i, f, len(page), next)
				}
				for _, j := range page {
					got = append(got, key(j))
				}
				if next == "" {
					break
				}
				g.Cursor = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("filter %d %+v (named probe %d):\n got %v\nwant %v", i, f, probe, got, want)
			}
			n, exact, err := s.CountJobsMatching(ctx, f)
			if err != nil || n != len(want) || !exact {
				t.Fatalf("filter %d %+v (named probe %d): count %d, %v, %v; want %d", i, f, probe, n, exact, err, len(want))
			}
		}
	}
	s.namedProbe = 0
}

// TestSearchColumnsInStep checks that job_names' copies of each job's
// state, handler queue and labels follow the job through what changes
// them: creation, an update, a pause and a resume, a firing that
// completes a one-shot job, and deletion.
func TestSearchColumnsInStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	inStep := func(when string) {
		t.Helper()
		var names, jobs, off int
		err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM job_names), (SELECT count(*) FROM jobs),
			(SELECT count(*) FROM job_names n LEFT JOIN jobs j ON j.bucket = n.bucket AND j.id = n.job_id
			 WHERE j.id IS NULL OR n.state IS DISTINCT FROM j.state OR n.labels IS DISTINCT FROM j.labels
				OR n.handler IS DISTINCT FROM (`+handlerKeyOf("j.handler")+`))`).Scan(&names, &jobs, &off)
		if err != nil || names != jobs || off != 0 {
			t.Fatalf("%s: %d names, %d jobs, %d out of step, %v", when, names, jobs, off, err)
		}
	}
	t0 := baseTime()
	epochs, jobs := benchJobs(t, s, 4, t0)
	inStep("created")

	j := jobs[0]
	j.Labels = domain.Labels{"team": "search"}
	j.Handler = domain.Handler{Type: domain.HandlerCustom, Name: "worker"}
	if err := s.UpdateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	inStep("labels and handler updated")
	if got, _, _ := s.ListJobs(ctx, JobFilter{Handler: "worker", Selector: domain.Selector{{Key: "team", Op: domain.OpEquals, Value: "search"}}}); len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("listed %v after the update", got)
	}

	next := *j.NextRunAt
	j.State, j.NextRunAt, j.PausedNextRunAt = domain.JobPaused, nil, &next
	if err := s.UpdateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	inStep("paused")
	j.State, j.NextRunAt, j.PausedNextRunAt = domain.JobActive, &next, nil
	if err := s.UpdateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	inStep("resumed")

	// A one-shot job: fired with no next run, it is completed.
	res, err := s.Fire(ctx, "bench", epochs, []Firing{{JobID: jobs[1].ID, Bucket: jobs[1].Bucket, ScheduledFor: t0}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %v, %v", res, err)
	}
	inStep("completed by its firing")
	// The same through the policy path (a jittered run).
	due := t0.Add(time.Second)
	res, err = s.Fire(ctx, "bench", epochs, []Firing{{JobID: jobs[3].ID, Bucket: jobs[3].Bucket, ScheduledFor: t0,
		Runs: []model.Run{{At: t0, Due: &due}}}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire with a policy: %v, %v", res, err)
	}
	inStep("completed by a jittered firing")
	if got, _, _ := s.ListJobs(ctx, JobFilter{State: domain.JobCompleted}); len(got) != 2 {
		t.Fatalf("completed jobs listed: %v", got)
	}
	// A recurring job's firing moves its next run and nothing else.
	later := t0.Add(time.Minute)
	fireEvery(t, s, epochs, jobs[2:3], t0, later)
	inStep("fired")

	if _, err := s.DeleteJob(ctx, jobs[2].ID); err != nil {
		t.Fatal(err)
	}
	inStep("deleted")
}

// TestSearchJobsPlans checks, on a namespace of 20,000 jobs with a rare
// state, handler and label, that each rare filter reads its own index
// rather than walking the namespace's names, that a next-run range walks
// its index in order, and that no search scans a table, as each is run
// (runSearch's planner settings).
func TestSearchJobsPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const n = 20_000
	jobs := make([]*model.Job, n)
	t0 := baseTime()
	for i := range jobs {
		next := t0.Add(time.Duration(i) * time.Second)
		jobs[i] = testJob(fmt.Sprintf("plan-%05d", i), &next)
		jobs[i].Labels = domain.Labels{"team": "common"}
		if i%1000 == 7 {
			jobs[i].State, jobs[i].NextRunAt = domain.JobPaused, nil
			jobs[i].Handler = domain.Handler{Type: domain.HandlerCustom, Name: "rare"}
			jobs[i].Labels = domain.Labels{"team": "rare"}
		}
	}
	if err := s.CopyJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// A second namespace stored after the first, its jobs all alike.
	last := make([]*model.Job, n)
	for i := range last {
		last[i] = testJob(fmt.Sprintf("last-%05d", i), nil)
		last[i].Namespace = "zz-last"
		last[i].Labels = domain.Labels{"team": "common"}
	}
	if err := s.CopyJobs(ctx, last); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE job_names, jobs"); err != nil {
		t.Fatal(err)
	}
	hour := JobFilter{NextRunBefore: t0.Add(time.Hour)}
	inNamespace := hour
	inNamespace.Namespace = "default"
	for _, tc := range []struct {
		f     JobFilter
		index string
	}{
		// A next-run range over many jobs walks them in order by
		// jobs_due (a partition's index is named by its columns), the
		// namespace tested on its entries; no sort of the range, no
		// probe of job_names.
		{inNamespace, "_next_run_at_namespace_name_idx"},
		{hour, "_next_run_at_namespace_name_idx"},
		// Common filters of the namespace stored last: any index but no
		// sequential scan, which under the count's LIMIT is priced as if
		// the matches were spread over the table, and reads every
		// namespace stored before.
		{JobFilter{Namespace: "zz-last", Handler: "http", Selector: domain.Selector{{Key: "team", Op: domain.OpEquals, Value: "common"}}}, ""},
		{JobFilter{Namespace: "default", State: domain.JobPaused}, "job_names_state"},
		{JobFilter{Namespace: "default", Handler: "rare"}, "job_names_handler"},
		{JobFilter{Namespace: "default", Selector: domain.Selector{{Key: "team", Op: domain.OpEquals, Value: "rare"}}}, "job_names_terms"},
		{JobFilter{Namespace: "default", Selector: domain.Selector{{Key: "team", Op: domain.OpIn, Values: []string{"rare", "none"}}}}, "job_names_terms"},
	} {
		for _, page := range []bool{true, false} {
			q, err := s.searchJobs(ctx, tc.f, page)
			if err != nil {
				t.Fatal(err)
			}
			sql := "SELECT 1" + q.from + " ORDER BY " + q.order + " LIMIT 51"
			if !page {
				sql = "SELECT count(*) FROM (SELECT 1" + q.from + " LIMIT 1001) x"
			}
			var plan []string
			read := func(rows pgx.Rows) error {
				var line string
				_, err := pgx.ForEachRow(rows, []any{&line}, func() error {
					plan = append(plan, line)
					return nil
				})
				return err
			}
			// Planned as the search runs it.
			err = s.runSearch(ctx, q, "EXPLAIN "+sql, read)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			if tc.index != "" && (!strings.Contains(text, tc.index) || strings.Contains(text, "job_names_pkey")) ||
				strings.Contains(text, "Seq Scan") ||
				page && !tc.f.NextRunBefore.IsZero() && (strings.Contains(text, "Sort  (") ||
					tc.f.Namespace != "" && !namespaceOnEntries.MatchString(text)) {
				t.Errorf("%+v (page %v): plan does not read %q alone, or scans a table:\n%s", tc.f, page, tc.index, text)
			}
		}
	}
}

// namespaceOnEntries matches a plan that tests the namespace on jobs_due's
// entries (an index condition), not on the rows.
var namespaceOnEntries = regexp.MustCompile(`Index Cond: \(\(next_run_at < [^\n]*\) AND \(namespace = `)

// TestSearchesArePlannedForTheirValues runs a count many times and checks
// that no connection ran it with a generic plan: priced for no value in
// particular, the plan the connection would settle on after five runs
// ANDed two large bitmaps (210 ms at 10,000,000 jobs, where the
// namespace's index counts the same in 9 ms).
func TestSearchesArePlannedForTheirValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	jobs := make([]*model.Job, 20_000)
	for i := range jobs {
		jobs[i] = testJob(fmt.Sprintf("job-%05d", i), nil)
		jobs[i].Labels = domain.Labels{"team": []string{"a", "b", "c"}[i%3], "tier": "y"}
		if i%20 == 1 {
			jobs[i].Labels["tier"] = "x"
		}
		if i%4 == 0 {
			jobs[i].Handler = domain.Handler{Type: domain.HandlerCustom, Name: "worker"}
		}
	}
	if err := s.CopyJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE job_names"); err != nil {
		t.Fatal(err)
	}
	f := JobFilter{Namespace: "default", Handler: "http", Selector: domain.Selector{{Key: "tier", Op: domain.OpEquals, Value: "x"}}}
	for range 12 {
		if _, _, err := s.CountJobsMatching(ctx, f); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ListJobs(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var runs int
	for _, c := range conns {
		var generic, custom int
		err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements WHERE statement LIKE '%FROM job_names n WHERE%'
			AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&generic, &custom)
		if err != nil {
			t.Fatal(err)
		}
		if generic > 0 {
			t.Errorf("a connection ran job_names searches with %d generic plans (%d custom)", generic, custom)
		}
		runs += custom
	}
	if runs < 24 {
		t.Errorf("%d custom plans of job_names searches seen on the idle connections; want the 24 runs", runs)
	}
}

// A selector's key=value requirements are one containment test of
// job_names.terms, with the namespace: two conditions made the planner
// AND two large GIN bitmaps and sort (475 ms at 10,000,000 jobs, where
// the state's index found the page in 11 ms; docs/bench.md). A key
// required twice with different values keeps both (nothing matches).
func TestSelectorEqualsAreOneContainment(t *testing.T) {
	for _, c := range []struct {
		sel  string
		want int // containment tests of n.terms
	}{
		{"team=payments,env=staging", 1},
		{"team=payments,env=staging,tier", 1},
		{"team=payments,team=search", 2},
		{"tier in (a,b)", 2},
	} {
		sel, err := domain.ParseSelector(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		var args sqlArgs
		conds := selectorSQL("n.terms", sel, "billing", args.add)
		n := strings.Count(strings.Join(conds, " AND "), "n.terms @>")
		if n != c.want {
			t.Errorf("%s: %d containment tests in %q, want %d", c.sel, n, conds, c.want)
		}
	}
	var args sqlArgs
	sel, _ := domain.ParseSelector("team=payments,env=staging")
	selectorSQL("n.terms", sel, "billing", args.add)
	if doc, ok := args[0].(domain.Labels); !ok || doc["team"] != "payments" || doc["env"] != "staging" || doc[nsTerm] != "billing" {
		t.Errorf("the containment document: %#v", args)
	}
}
