package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/store/model"
)

// CreateManualExecution queues a manual execution of job id, whatever its state, for
// the database's present moment (a millisecond or so later if that time
// is taken); it fails with store.ErrNotFound when there is no such job.
func (s *Service) CreateManualExecution(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	return s.store.CreateManualExecution(ctx, id, now)
}

// Cancel cancels execution id in two steps. The cancellation is recorded
// in the database first, so that the outbox never publishes the execution
// again and a late result cannot revive it; then the executors are told,
// so that a running attempt stops. If they cannot be told, Cancel returns
// the cancelled execution with an error wrapping ErrNotAnnounced, and
// cancelling again (which is idempotent) tells them.
//
// Without Config.Executors it fails with ErrNoExecutors and records
// nothing. A finished execution fails with store.ErrFinished, an unknown
// one with store.ErrNotFound.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	if s.executors == nil {
		return nil, ErrNoExecutors
	}
	e, err := s.store.CancelExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.executors.Cancel(ctx, id); err != nil {
		return e, fmt.Errorf("cancel execution %s: %w: %w", id, ErrNotAnnounced, err)
	}
	return e, nil
}

// Redrive queues dead execution id again, for a fresh series of attempts
// under its retry policy. An execution that is not dead fails with
// store.ErrNotDead, an unknown one with store.ErrNotFound.
func (s *Service) Redrive(ctx context.Context, id uuid.UUID) (*model.Execution, error) {
	return s.store.RedriveExecution(ctx, id)
}
