package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// breakerHistoryKeep is how long a breaker's transitions are kept.
const breakerHistoryKeep = 7 * 24 * time.Hour

// SaveHandlerStates records breaker transitions (each executor's breaker
// for a handler entering a state: a row each, written once however many
// nodes record it) and that handlers were seen served (a handler's
// last_seen moves only when 20 s older, so that nodes recording the same
// sight do not all rewrite it).
func (s *Store) SaveHandlerStates(ctx context.Context, changes []model.BreakerChange, seen []model.HandlerSeen) error {
	b := &pgx.Batch{}
	if len(changes) > 0 {
		var (
			handlers, queues, executors, st, reasons []string
			since                                    []time.Time
		)
		for _, c := range changes {
			handlers, queues, executors = append(handlers, c.Handler), append(queues, c.Queue), append(executors, c.ExecutorID)
			st, since, reasons = append(st, c.State), append(since, c.Since), append(reasons, c.Reason)
		}
		b.Queue(`INSERT INTO handler_breaker_history (handler, since, executor_id, state, queue, reason)
			SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[])
			ON CONFLICT DO NOTHING`, handlers, since, executors, st, queues, reasons)
	}
	if len(seen) > 0 {
		var (
			handlers, queues []string
			at               []time.Time
		)
		for _, h := range seen {
			handlers, queues, at = append(handlers, h.Handler), append(queues, h.Queue), append(at, h.LastSeen)
		}
		b.Queue(`INSERT INTO handlers_seen AS h (handler, queue, last_seen)
			SELECT DISTINCT ON (handler) * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(handler, queue, last_seen)
			ON CONFLICT (handler) DO UPDATE SET queue = excluded.queue, last_seen = excluded.last_seen
			WHERE h.last_seen < excluded.last_seen - interval '20 seconds'`, handlers, queues, at)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: save handler states: %w", err)
	}
	return nil
}

// DeleteOldBreakerHistory deletes the breaker transitions older than a
// week before now.
func (s *Store) DeleteOldBreakerHistory(ctx context.Context, now time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM handler_breaker_history WHERE since < $1`, now.Add(-breakerHistoryKeep)); err != nil {
		return fmt.Errorf("store: delete old breaker history: %w", err)
	}
	return nil
}

// ListBreakerHistory lists the latest breaker transitions (at most limit
// per handler) of the handlers, or of every handler when none is given,
// newest first within a handler.
func (s *Store) ListBreakerHistory(ctx context.Context, handlers []string, limit int) ([]model.BreakerChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT handler, queue, executor_id, state, since, reason FROM (
			SELECT *, row_number() OVER (PARTITION BY handler ORDER BY since DESC, executor_id) AS n
			FROM handler_breaker_history WHERE coalesce(cardinality($1::text[]), 0) = 0 OR handler = ANY($1)) h
		WHERE n <= $2 ORDER BY handler, since DESC, executor_id`, handlers, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list breaker history: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.BreakerChange, error) {
		var c model.BreakerChange
		err := r.Scan(&c.Handler, &c.Queue, &c.ExecutorID, &c.State, &c.Since, &c.Reason)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list breaker history: %w", err)
	}
	return out, nil
}

// ListHandlersSeen lists every handler some executor has said it served,
// with when it last did, in handler order.
func (s *Store) ListHandlersSeen(ctx context.Context) ([]model.HandlerSeen, error) {
	rows, err := s.pool.Query(ctx, `SELECT handler, queue, last_seen FROM handlers_seen ORDER BY handler`)
	if err != nil {
		return nil, fmt.Errorf("store: list handlers seen: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.HandlerSeen, error) {
		var h model.HandlerSeen
		err := r.Scan(&h.Handler, &h.Queue, &h.LastSeen)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list handlers seen: %w", err)
	}
	return out, nil
}
