package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// record records one event with RecordAttemptEvents and returns its result.
func (s *Store) recordOne(ctx context.Context, ev model.AttemptEvent) error {
	res, err := s.RecordAttemptEvents(ctx, []model.AttemptEvent{ev})
	if err != nil {
		return err
	}
	return res[0]
}

// attemptStarted records a started event about the first dispatch.
func (s *Store) attemptStarted(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time) error {
	return s.recordOne(ctx, model.AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at, Type: domain.EventStarted})
}

// attemptFinished records the end of an attempt with outcome succeeded,
// failed or timed_out, about the first dispatch.
func (s *Store) attemptFinished(ctx context.Context, id uuid.UUID, attempt int, executor string, at time.Time,
	outcome domain.Outcome, final bool, errMsg, output string) error {
	ev := model.AttemptEvent{ID: id, Attempt: attempt, Executor: executor, At: at, Final: final, Error: errMsg, Output: output}
	switch outcome {
	case domain.OutcomeSucceeded:
		ev.Type = domain.EventSucceeded
	case domain.OutcomeFailed:
		ev.Type = domain.EventFailed
	case domain.OutcomeTimedOut:
		ev.Type, ev.TimedOut = domain.EventFailed, true
	default:
		return fmt.Errorf("attempt finished with outcome %q", outcome)
	}
	return s.recordOne(ctx, ev)
}
