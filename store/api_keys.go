package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

const apiKeyColumns = `id, secret_hash, namespace, role, name, created_by, created_at, expires_at, last_used_at`

func scanAPIKey(row pgx.Row) (*model.APIKey, error) {
	var k model.APIKey
	err := row.Scan(&k.ID, &k.SecretHash, &k.Namespace, &k.Role, &k.Name, &k.CreatedBy, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// CreateAPIKey stores k (its CreatedAt is set from the database's clock)
// and returns it as stored.
func (s *Store) CreateAPIKey(ctx context.Context, k model.APIKey) (*model.APIKey, error) {
	out, err := scanAPIKey(s.pool.QueryRow(ctx, `INSERT INTO api_keys (id, secret_hash, namespace, role, name, created_by, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+apiKeyColumns,
		k.ID, k.SecretHash, k.Namespace, k.Role, k.Name, k.CreatedBy, k.ExpiresAt))
	if err != nil {
		return nil, fmt.Errorf("store: create API key: %w", err)
	}
	return out, nil
}

// UseAPIKey returns the key with id and notes that it was used now
// (last_used_at, kept to the minute so that a busy key does not write on
// every request). ErrNotFound if there is none.
func (s *Store) UseAPIKey(ctx context.Context, id string) (*model.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `UPDATE api_keys SET last_used_at = now()
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
		RETURNING `+apiKeyColumns, id))
	if errors.Is(err, pgx.ErrNoRows) {
		k, err = scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1`, id))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: API key %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: API key %s: %w", id, err)
	}
	return k, nil
}

// ListAPIKeys lists the keys of namespaces (every key when namespaces is
// nil), oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, namespaces []string) ([]*model.APIKey, error) {
	sql := `SELECT ` + apiKeyColumns + ` FROM api_keys`
	var args []any
	if namespaces != nil {
		sql += ` WHERE namespace = ANY($1)`
		args = append(args, namespaces)
	}
	rows, err := s.pool.Query(ctx, sql+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list API keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.APIKey, error) { return scanAPIKey(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list API keys: %w", err)
	}
	return keys, nil
}

// DeleteAPIKey deletes the key with id; ErrNotFound if there is none.
func (s *Store) DeleteAPIKey(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM api_keys WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("store: delete API key %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete API key %s: %w", id, ErrNotFound)
	}
	return nil
}

// CountUsableAPIKeys counts the keys that have not expired.
func (s *Store) CountUsableAPIKeys(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE expires_at IS NULL OR expires_at > now()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count API keys: %w", err)
	}
	return n, nil
}

// GetAPIKey returns the key with id; ErrNotFound if there is none.
func (s *Store) GetAPIKey(ctx context.Context, id string) (*model.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: API key %s: %w", id, err)
	}
	return k, nil
}
