package jobs

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Selection picks the jobs a bulk operation changes: those of Namespace
// (required: no bulk operation spans the whole cluster) whose labels
// match Selector (all of them when it is empty).
type Selection struct {
	Namespace string
	Selector  domain.Selector
}

// BulkResult counts what a bulk operation did: the jobs in the state it
// changes that matched, and those it changed.
type BulkResult struct {
	Matched, Changed int
}

// bulkPage is how many jobs a bulk operation reads at a time.
const bulkPage = 500

// PauseMatching pauses every active job of sel, one at a time, as Pause
// does. It is not atomic: a job created or changed meanwhile may be
// missed, and on an error the jobs before it stay paused (the result
// counts them).
func (s *Service) PauseMatching(ctx context.Context, sel Selection) (BulkResult, error) {
	return s.eachMatching(ctx, sel, domain.JobActive, func(id uuid.UUID) (*model.Job, error) {
		return s.Pause(ctx, id)
	}, domain.JobPaused)
}

// ResumeMatching resumes every paused job of sel, one at a time, as
// Resume does (with or without catch-up); a job whose schedule has no
// run left stays paused and is not counted as changed. Not atomic, like
// PauseMatching.
func (s *Service) ResumeMatching(ctx context.Context, sel Selection, catchUp bool) (BulkResult, error) {
	return s.eachMatching(ctx, sel, domain.JobPaused, func(id uuid.UUID) (*model.Job, error) {
		return s.Resume(ctx, id, catchUp)
	}, domain.JobActive)
}

// eachMatching applies change to every job of sel in state from, a page
// at a time in name order, and counts the jobs that end up in state to.
// A job deleted, completed or left without a next run meanwhile is
// skipped; any other error stops it.
func (s *Service) eachMatching(ctx context.Context, sel Selection, from domain.JobState,
	change func(uuid.UUID) (*model.Job, error), to domain.JobState) (BulkResult, error) {
	var res BulkResult
	if p := NameProblem(sel.Namespace); p != "" {
		return res, &InvalidError{Faults: []domain.FieldError{{Field: "namespace", Message: p}}}
	}
	f := store.JobFilter{Namespace: sel.Namespace, State: from, Selector: sel.Selector, Limit: bulkPage}
	for {
		page, next, err := s.store.ListJobs(ctx, f)
		if err != nil {
			return res, err
		}
		for _, j := range page {
			res.Matched++
			got, err := change(j.ID)
			switch {
			case errors.Is(err, store.ErrNotFound), errors.Is(err, ErrCompleted), errors.Is(err, ErrNoNextRun):
				continue
			case err != nil:
				return res, err
			case got.State == to:
				res.Changed++
			}
		}
		if next == "" {
			return res, nil
		}
		f.Cursor = next
	}
}
