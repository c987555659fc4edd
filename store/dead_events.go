package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// MaxDeadEventBytes bounds the event text a dead event keeps.
const MaxDeadEventBytes = 64 << 10

// RecordDeadEvents records events the recorder could not place (see
// model.DeadEvent), in one statement.
func (s *Store) RecordDeadEvents(ctx context.Context, evs []model.DeadEvent) error {
	if len(evs) == 0 {
		return nil
	}
	var (
		ns, types, reasons, texts []string
		ids                       []*uuid.UUID
		scheds                    []*time.Time
		attempts                  []*int
	)
	for _, e := range evs {
		ns, types, reasons = append(ns, e.Namespace), append(types, e.Type), append(reasons, e.Reason)
		ids, scheds, attempts = append(ids, e.ExecutionID), append(scheds, e.ScheduledFor), append(attempts, e.Attempt)
		text := cleanText(string(e.Event))
		if len(text) > MaxDeadEventBytes {
			text = text[:MaxDeadEventBytes]
		}
		texts = append(texts, text)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO dead_events (namespace, execution_id, scheduled_for, attempt, type, reason, event)
		SELECT * FROM unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::int[], $5::text[], $6::text[], $7::text[])`,
		ns, ids, scheds, attempts, types, reasons, texts)
	if err != nil {
		return fmt.Errorf("store: record %d dead events: %w", len(evs), err)
	}
	return nil
}

// DeadEventFilter selects dead events for ListDeadEvents.
type DeadEventFilter struct {
	// Namespaces: only these (nil: every namespace).
	Namespaces []string
	Cursor     string
	Limit      int
}

// ListDeadEvents lists dead events matching f, newest first, a page at a
// time, and the cursor of the next page ("" after the last).
func (s *Store) ListDeadEvents(ctx context.Context, f DeadEventFilter) ([]model.DeadEvent, string, error) {
	limit := pageSize(f.Limit)
	var args sqlArgs
	arg := args.add
	sql := `SELECT id, recorded_at, namespace, execution_id, scheduled_for, attempt, type, reason, event
		FROM dead_events WHERE true`
	if f.Namespaces != nil {
		sql += " AND namespace = ANY(" + arg(f.Namespaces) + ")"
	}
	if f.Cursor != "" {
		var c struct {
			ID int64 `json:"i"`
		}
		if decodeCursor(f.Cursor, &c) != nil {
			return nil, "", ErrBadCursor
		}
		sql += " AND id < " + arg(c.ID)
	}
	sql += " ORDER BY id DESC LIMIT " + arg(limit+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list dead events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.DeadEvent, error) {
		var (
			e    model.DeadEvent
			text string
		)
		err := r.Scan(&e.ID, &e.RecordedAt, &e.Namespace, &e.ExecutionID, &e.ScheduledFor, &e.Attempt, &e.Type, &e.Reason, &text)
		e.Event, e.RecordedAt, e.ScheduledFor = []byte(text), e.RecordedAt.UTC(), utcPtr(e.ScheduledFor)
		return e, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: list dead events: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(struct {
			ID int64 `json:"i"`
		}{out[limit-1].ID})
	}
	return out, next, nil
}
