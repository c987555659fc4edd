package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// The store creates no job that could not behave: every way of creating
// jobs refuses it with ErrInvalidJob, before the database is asked, and
// stores the rest of a batch all the same.
func TestCreateRefusesImpossibleJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	next := baseTime().Add(time.Hour)
	for _, tc := range []struct {
		name  string
		state domain.JobState
		next  *time.Time
		edit  func(j *model.Job)
		says  string
	}{
		{name: "active-without-next-run", state: domain.JobActive, says: "an active job needs a next run"},
		{name: "default-state-without-next-run", says: "an active job needs a next run"},
		{name: "paused-with-next-run", state: domain.JobPaused, next: &next, says: "a paused job has no next run"},
		{name: "completed-with-next-run", state: domain.JobCompleted, next: &next, says: "a completed job has no next run"},
		{name: "unknown-state", state: "sleeping", next: &next, says: `state "sleeping" is not one of`},
		{name: "negative-timeout", next: &next, edit: func(j *model.Job) { j.Timeout = -time.Second }, says: "timeout -1s is negative"},
		{name: "", next: &next, says: "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := func(name string) *model.Job {
				j := testJob(name, nil)
				j.State, j.NextRunAt = tc.state, tc.next
				if tc.edit != nil {
					tc.edit(j)
				}
				return j
			}
			check := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: %v, want ErrInvalidJob saying %q", how, err, tc.says)
				}
			}
			check("CreateJob", s.CreateJob(ctx, bad(tc.name)))

			good := testJob("batch-ok-"+tc.name, &next)
			errs, err := s.CreateJobBatch(ctx, []*model.Job{good, bad(withPrefix("batch-", tc.name))})
			if err != nil || errs[0] != nil {
				t.Fatalf("CreateJobBatch: %v, %v; want the valid job stored", err, errs)
			}
			check("CreateJobBatch", errs[1])

			check("CopyJobs", s.CopyJobs(ctx, []*model.Job{testJob("bulk-ok-"+tc.name, &next), bad(withPrefix("bulk-", tc.name))}))
			if n := count(t, s, "SELECT count(*) FROM jobs WHERE name IN ($1, $2, $3)",
				tc.name, withPrefix("batch-", tc.name), withPrefix("bulk-", tc.name)); n != 0 {
				t.Errorf("%d refused jobs stored", n)
			}
			if n := count(t, s, "SELECT count(*) FROM jobs WHERE name = $1", "bulk-ok-"+tc.name); n != 0 {
				t.Errorf("CopyJobs stored part of a call it refused")
			}
		})
	}
}

// withPrefix is name with a prefix, or "" for the nameless case.
func withPrefix(prefix, name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprint(prefix, name)
}
