package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// IdempotencyTTL is how long a write's Idempotency-Key and its first
// response are kept.
const IdempotencyTTL = 24 * time.Hour

// ClaimIdempotencyKey claims key in namespace for a request whose hash is
// hash, or reports what holds it: the same request's response (to
// replay), the same request still in progress, or another request. A key
// older than IdempotencyTTL is free again.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, namespace, key string, hash []byte) (model.Idempotent, error) {
	var out model.Idempotent
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = model.Idempotent{}
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE namespace = $1 AND key = $2
			AND created_at < now() - $3::bigint * interval '1 ms'`, namespace, key, IdempotencyTTL.Milliseconds()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (namespace, key, request_hash) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, namespace, key, hash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			out.Claimed = true
			return nil
		}
		var (
			held   []byte
			status *int
			ct     *string
		)
		err = tx.QueryRow(ctx, `SELECT request_hash, status, content_type, response FROM idempotency_keys
			WHERE namespace = $1 AND key = $2`, namespace, key).Scan(&held, &status, &ct, &out.Response)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("the key was released meanwhile; try again")
		}
		if err != nil {
			return err
		}
		switch {
		case !bytes.Equal(held, hash):
			out.Mismatch, out.Response = true, nil
		case status == nil:
			out.InProgress = true
		default:
			out.Status = *status
			if ct != nil {
				out.ContentType = *ct
			}
		}
		return nil
	})
	if err != nil {
		return model.Idempotent{}, fmt.Errorf("store: idempotency key: %w", err)
	}
	return out, nil
}

// SaveIdempotencyResponse records the response to the request that
// claimed key, for replay.
func (s *Store) SaveIdempotencyResponse(ctx context.Context, namespace, key string, status int, contentType string, body []byte) error {
	_, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET status = $3, content_type = $4, response = $5
		WHERE namespace = $1 AND key = $2`, namespace, key, status, contentType, body)
	if err != nil {
		return fmt.Errorf("store: save idempotent response: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey frees a key whose request failed in a way worth
// retrying (a 5xx): the retry runs afresh.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, namespace, key string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM idempotency_keys WHERE namespace = $1 AND key = $2", namespace, key)
	if err != nil {
		return fmt.Errorf("store: release idempotency key: %w", err)
	}
	return nil
}

// ExpireIdempotencyKeys deletes the keys older than IdempotencyTTL, as of
// now, and returns how many.
func (s *Store) ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM idempotency_keys WHERE created_at < $1", now.Add(-IdempotencyTTL))
	if err != nil {
		return 0, fmt.Errorf("store: expire idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
