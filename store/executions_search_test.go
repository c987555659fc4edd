package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// row is one execution of the search data set.
type row struct {
	id       uuid.UUID
	job      uuid.UUID
	ns, name string
	at       time.Time
	state    domain.ExecState
	handler  string // http, nats or a custom name
	err      string
	started  *time.Time
	finished *time.Time
	attempts int
	manual   bool
	backfill bool
}

// searchData writes 60 executions of 4 jobs over two days straight into
// the executions table, and returns them.
func searchData(t *testing.T, s *Store) []row {
	t.Helper()
	ctx := context.Background()
	type job struct {
		id       uuid.UUID
		ns, name string
		handler  string
	}
	jobs := []job{
		{uuid.New(), "team-a", "alpha-report", "http"},
		{uuid.New(), "team-a", "alpha-sync", "mailer"},
		{uuid.New(), "team-b", "beta", "nats"},
		{uuid.New(), "team-b", "alphabet", "mailer"},
	}
	states := []domain.ExecState{domain.ExecSucceeded, domain.ExecFailed, domain.ExecDead, domain.ExecRunning,
		domain.ExecQueued, domain.ExecCancelled, domain.ExecSucceeded}
	base := time.Now().UTC().Truncate(time.Second).Add(-36 * time.Hour)
	var rows []row
	for i := 0; i < 60; i++ {
		j := jobs[i%len(jobs)]
		r := row{job: j.id, ns: j.ns, name: j.name, handler: j.handler,
			at: base.Add(time.Duration(i) * 30 * time.Minute), state: states[i%len(states)],
			manual: i%9 == 0, backfill: i%11 == 0}
		r.id = domain.ExecutionID(r.job, r.at)
		if r.state == domain.ExecFailed || r.state == domain.ExecDead {
			r.err = []string{"HTTP 503: Service Unavailable", "dial tcp: connection refused", "timeout after 30s"}[i%3]
		}
		if r.state != domain.ExecQueued {
			st := r.at.Add(time.Duration(i%4+1) * 100 * time.Millisecond)
			r.started = &st
		}
		if r.state.Final() {
			fin := r.started.Add(time.Duration(i%5+1) * time.Second)
			r.finished = &fin
		}
		r.attempts = i%3 + 1
		h := map[string]any{"type": "custom", "name": r.handler}
		switch r.handler {
		case "http":
			h = map[string]any{"type": "http", "url": "http://example.test/x"}
		case "nats":
			h = map[string]any{"type": "nats", "subject": "a.b"}
		}
		_, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			manual, state, handler, error, started_at, backfill, created_at, finished_at, attempts)
			VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8, $9, $10, $11, $5, $12, $13)`,
			r.id, r.job, r.ns, r.name, r.at, r.manual, r.state, h, r.err, r.started, r.backfill, r.finished, r.attempts)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// listAll pages through f (limit 4) and returns the ids in order.
func listAll(t *testing.T, s *Store, f ExecFilter) []uuid.UUID {
	t.Helper()
	f.Limit = 4
	var ids []uuid.UUID
	for i := 0; ; i++ {
		page, next, err := s.ListExecutions(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			ids = append(ids, e.ID)
		}
		if next == "" {
			return ids
		}
		if i > 100 {
			t.Fatal("more than 100 pages")
		}
		f.Cursor = next
	}
}

func TestSearchExecutions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	rows := searchData(t, s)
	job := rows[1].job
	mid := rows[30].at
	hourAgo := rows[50].at
	tests := []struct {
		name  string
		f     ExecFilter
		match func(r row) bool
	}{
		{"all", ExecFilter{}, func(r row) bool { return true }},
		{"failed or dead", ExecFilter{States: []domain.ExecState{domain.ExecFailed, domain.ExecDead}},
			func(r row) bool { return r.state == domain.ExecFailed || r.state == domain.ExecDead }},
		{"succeeded", ExecFilter{State: domain.ExecSucceeded}, func(r row) bool { return r.state == domain.ExecSucceeded }},
		{"namespace", ExecFilter{Namespace: "team-b"}, func(r row) bool { return r.ns == "team-b" }},
		{"job id", ExecFilter{JobID: &job}, func(r row) bool { return r.job == job }},
		{"job name prefix", ExecFilter{JobPrefix: "alpha-"}, func(r row) bool { return strings.HasPrefix(r.name, "alpha-") }},
		{"job name prefix with a wildcard", ExecFilter{JobPrefix: "alpha%"}, func(r row) bool { return false }},
		{"custom handler", ExecFilter{Handler: "mailer"}, func(r row) bool { return r.handler == "mailer" }},
		{"http handler", ExecFilter{Handler: "http"}, func(r row) bool { return r.handler == "http" }},
		{"since", ExecFilter{Since: &mid}, func(r row) bool { return !r.at.Before(mid) }},
		{"until", ExecFilter{Until: &mid}, func(r row) bool { return r.at.Before(mid) }},
		{"since and until", ExecFilter{Since: &mid, Until: &hourAgo}, func(r row) bool { return !r.at.Before(mid) && r.at.Before(hourAgo) }},
		{"error, any case", ExecFilter{Error: "SERVICE unavail"}, func(r row) bool { return strings.Contains(r.err, "Service Unavailable") }},
		{"error with a wildcard", ExecFilter{Error: "503%"}, func(r row) bool { return false }},
		{"manual", ExecFilter{Manual: ptr(true)}, func(r row) bool { return r.manual }},
		{"not backfill", ExecFilter{Backfill: ptr(false)}, func(r row) bool { return !r.backfill }},
		{"running, started before", ExecFilter{State: domain.ExecRunning, StartedBefore: &mid},
			func(r row) bool { return r.state == domain.ExecRunning && r.started != nil && r.started.Before(mid) }},
		{"everything at once", ExecFilter{States: []domain.ExecState{domain.ExecFailed, domain.ExecDead}, Namespace: "team-a",
			Since: &rows[0].at, Error: "refused"},
			func(r row) bool {
				return (r.state == domain.ExecFailed || r.state == domain.ExecDead) && r.ns == "team-a" && strings.Contains(r.err, "refused")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []uuid.UUID
			for _, r := range rows {
				if tt.match(r) {
					want = append(want, r.id)
				}
			}
			// Newest first.
			slices.Reverse(want)
			got := listAll(t, s, tt.f)
			if !slices.Equal(got, want) {
				t.Errorf("listed %d executions, want %d\n got %v\nwant %v", len(got), len(want), got, want)
			}
			n, err := s.CountExecutions(context.Background(), tt.f)
			if err != nil || n != int64(len(want)) {
				t.Errorf("count = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}

// Executions created while a listing is paged through never shift it:
// the pages hold each execution that existed once, in order.
func TestSearchPaginationStableWhileRowsArrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	rows := searchData(t, s)
	f := ExecFilter{States: []domain.ExecState{domain.ExecFailed, domain.ExecDead, domain.ExecSucceeded}, Limit: 3}
	var got []uuid.UUID
	for page := 0; ; page++ {
		execs, next, err := s.ListExecutions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range execs {
			got = append(got, e.ID)
		}
		// New executions arrive: newer ones, and a late one of an old time.
		for k, at := range []time.Time{time.Now().Add(time.Duration(page) * time.Second), rows[0].at.Add(-time.Minute)} {
			id := uuid.New()
			if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
				state, handler, created_at) VALUES ($1, $2, 0, 'x', $3, $4, 'failed', '{"type":"nats","subject":"a"}', now())`,
				domain.ExecutionID(id, at), id, fmt.Sprintf("late-%d-%d", page, k), at); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	seen := map[uuid.UUID]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("execution %s listed twice", id)
		}
		seen[id] = true
	}
	for _, r := range rows {
		if (r.state == domain.ExecFailed || r.state == domain.ExecDead || r.state == domain.ExecSucceeded) && !seen[r.id] {
			t.Errorf("execution %s (%s) missing from the pages", r.id, r.at.Format(time.TimeOnly))
		}
	}
}

// A job's listing reads its executions in time windows, newest first
// (ExecFilter.windows): pages that straddle the windows' bounds, days
// far back, runs ahead of now and an upper bound all come out whole, in
// order, once each.
func TestSearchJobAcrossWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	job := uuid.New()
	now := time.Now().UTC().Truncate(time.Second)
	var want []uuid.UUID // newest first
	for _, back := range []time.Duration{-36 * time.Hour, 0, time.Hour, 47 * time.Hour, 49 * time.Hour,
		5 * 24 * time.Hour, 15*24*time.Hour + time.Hour, 17 * 24 * time.Hour, 40 * 24 * time.Hour} {
		at := now.Add(-back)
		if err := s.EnsureHistoryPartitions(ctx, at); err != nil {
			t.Fatal(err)
		}
		id := domain.ExecutionID(job, at)
		if _, err := s.pool.Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler) VALUES ($1, $2, 0, 'n', 'j', $3, 'succeeded', '{"type":"nats","subject":"a"}')`,
			id, job, at); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	for _, limit := range []int{1, 2, 3, 50} {
		f := ExecFilter{JobID: &job, Limit: limit}
		var got []uuid.UUID
		for range 20 {
			page, next, err := s.ListExecutions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				got = append(got, e.ID)
			}
			if next == "" {
				break
			}
			f.Cursor = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: got %d executions %v, want %d %v", limit, len(got), got, len(want), want)
		}
	}
	until := now.Add(-48 * time.Hour)
	page, _, err := s.ListExecutions(ctx, ExecFilter{JobID: &job, Until: &until})
	if err != nil || !slices.Equal(ids(page), want[4:]) {
		t.Errorf("until 48 h ago: got %v, %v; want %v", ids(page), err, want[4:])
	}
}

func ids(execs []*model.Execution) []uuid.UUID {
	out := make([]uuid.UUID, len(execs))
	for i, e := range execs {
		out[i] = e.ID
	}
	return out
}
