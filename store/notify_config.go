package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// Notification channels and rules: what the API creates, lists, changes
// and deletes. A write bumps version; an update given the version it read
// writes only if that is still the stored one (ErrStale otherwise), like
// jobs.

const channelColumns = `id, namespace, name, type, url, COALESCE(secret_key_id, ''), secret, paused, created_at, updated_at, version`

func scanChannel(row pgx.Row) (*model.Channel, error) {
	var c model.Channel
	err := row.Scan(&c.ID, &c.Namespace, &c.Name, &c.Type, &c.URL, &c.SecretKeyID, &c.Secret, &c.Paused,
		&c.CreatedAt, &c.UpdatedAt, &c.Version)
	if err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

// CreateChannel stores c with a new id (its times from the database's
// clock); ErrConflict when the namespace has a channel of that name.
func (s *Store) CreateChannel(ctx context.Context, c model.Channel) (*model.Channel, error) {
	c.ID = uuid.Must(uuid.NewV7())
	out, err := scanChannel(s.pool.QueryRow(ctx, `INSERT INTO notification_channels
		(id, namespace, name, type, url, secret_key_id, secret, paused, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, $8, `+nowMS+`, `+nowMS+`) RETURNING `+channelColumns,
		c.ID, c.Namespace, c.Name, c.Type, c.URL, c.SecretKeyID, c.Secret, c.Paused))
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("store: channel %s/%s: %w", c.Namespace, c.Name, ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("store: create channel: %w", err)
	}
	return out, nil
}

// GetChannel returns the channel id, or ErrNotFound.
func (s *Store) GetChannel(ctx context.Context, id uuid.UUID) (*model.Channel, error) {
	c, err := scanChannel(s.pool.QueryRow(ctx, `SELECT `+channelColumns+` FROM notification_channels WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: channel %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: channel %s: %w", id, err)
	}
	return c, nil
}

// ListChannels lists the channels of namespaces (nil: every namespace),
// by namespace and name.
func (s *Store) ListChannels(ctx context.Context, namespaces []string) ([]*model.Channel, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+channelColumns+` FROM notification_channels
		WHERE $1::text[] IS NULL OR namespace = ANY($1) ORDER BY namespace, name`, namespaces)
	if err != nil {
		return nil, fmt.Errorf("store: list channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Channel, error) { return scanChannel(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list channels: %w", err)
	}
	return out, nil
}

// UpdateChannel writes c (name, url, secret, paused) if its Version is
// still the stored one: ErrStale if not, ErrNotFound if it is gone,
// ErrConflict if the new name is taken.
func (s *Store) UpdateChannel(ctx context.Context, c model.Channel) (*model.Channel, error) {
	out, err := scanChannel(s.pool.QueryRow(ctx, `UPDATE notification_channels SET
		name = $3, url = $4, secret_key_id = NULLIF($5, ''), secret = $6, paused = $7,
		updated_at = `+nowMS+`, version = version + 1
		WHERE id = $1 AND version = $2 RETURNING `+channelColumns,
		c.ID, c.Version, c.Name, c.URL, c.SecretKeyID, c.Secret, c.Paused))
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("store: channel %s/%s: %w", c.Namespace, c.Name, ErrConflict)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetChannel(ctx, c.ID); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("store: channel %s: %w", c.ID, ErrStale)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update channel %s: %w", c.ID, err)
	}
	return out, nil
}

// DeleteChannel deletes the channel id, takes it out of its rules (a
// rule left with no channel sends nothing) and fails its notifications
// not yet delivered; ErrNotFound if there is none.
func (s *Store) DeleteChannel(ctx context.Context, id uuid.UUID) error {
	defer s.rules.invalidate() // after the commit, so that no read caches the rules it changed
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM notification_channels WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("store: delete channel %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("store: channel %s: %w", id, ErrNotFound)
		}
		_, err = tx.Exec(ctx, `UPDATE notification_rules SET channels = array_remove(channels, $1),
			updated_at = `+nowMS+`, version = version + 1 WHERE $1 = ANY(channels)`, id)
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE notifications SET state = 'failed', next_attempt_at = NULL,
				last_error = 'the channel was deleted' WHERE channel_id = $1 AND state = 'pending'`, id)
		}
		if err != nil {
			return fmt.Errorf("store: delete channel %s: %w", id, err)
		}
		return nil
	})
}

const ruleColumns = `id, namespace, name, selector, events, channels, failing_after, silent_grace_ms, late_after_ms,
	slow_after_ms, group_interval_ms, paused, last_sent_at, created_at, updated_at, version`

func scanRule(row pgx.Row) (*model.Rule, error) {
	var (
		r                              model.Rule
		grace, late, slow, groupPeriod int64
	)
	err := row.Scan(&r.ID, &r.Namespace, &r.Name, &r.Selector, &r.Events, &r.Channels, &r.FailingAfter,
		&grace, &late, &slow, &groupPeriod, &r.Paused, &r.LastSentAt, &r.CreatedAt, &r.UpdatedAt, &r.Version)
	if err != nil {
		return nil, err
	}
	r.SilentGrace, r.LateAfter = time.Duration(grace)*time.Millisecond, time.Duration(late)*time.Millisecond
	r.SlowAfter, r.GroupInterval = time.Duration(slow)*time.Millisecond, time.Duration(groupPeriod)*time.Millisecond
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return &r, nil
}

// checkRuleChannels fails with ErrNotFound unless every channel of r is
// a channel of r's namespace.
func checkRuleChannels(ctx context.Context, tx pgx.Tx, r *model.Rule) error {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM notification_channels WHERE id = ANY($1) AND namespace = $2`,
		r.Channels, r.Namespace).Scan(&n)
	if err != nil {
		return err
	}
	if n != len(uniqueIDs(r.Channels)) {
		return fmt.Errorf("store: rule %s/%s: a channel: %w", r.Namespace, r.Name, ErrNotFound)
	}
	return nil
}

func uniqueIDs(ids []uuid.UUID) map[uuid.UUID]bool {
	m := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// CreateRule stores r with a new id; ErrConflict when the namespace has
// a rule of that name, ErrNotFound when one of its channels is not a
// channel of its namespace.
func (s *Store) CreateRule(ctx context.Context, r model.Rule) (*model.Rule, error) {
	r.ID = uuid.Must(uuid.NewV7())
	var out *model.Rule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkRuleChannels(ctx, tx, &r); err != nil {
			return err
		}
		var err error
		out, err = scanRule(tx.QueryRow(ctx, `INSERT INTO notification_rules
			(id, namespace, name, selector, events, channels, failing_after, silent_grace_ms, late_after_ms,
			 slow_after_ms, group_interval_ms, paused, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, `+nowMS+`, `+nowMS+`) RETURNING `+ruleColumns,
			r.ID, r.Namespace, r.Name, r.Selector, r.Events, r.Channels, r.FailingAfter, r.SilentGrace.Milliseconds(),
			r.LateAfter.Milliseconds(), r.SlowAfter.Milliseconds(), r.GroupInterval.Milliseconds(), r.Paused))
		return err
	})
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("store: rule %s/%s: %w", r.Namespace, r.Name, ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("store: create rule: %w", err)
	}
	s.rules.invalidate()
	return out, nil
}

// GetRule returns the rule id, or ErrNotFound.
func (s *Store) GetRule(ctx context.Context, id uuid.UUID) (*model.Rule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `SELECT `+ruleColumns+` FROM notification_rules WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: rule %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: rule %s: %w", id, err)
	}
	return r, nil
}

// ListRules lists the rules of namespaces (nil: every namespace), by
// namespace and name.
func (s *Store) ListRules(ctx context.Context, namespaces []string) ([]*model.Rule, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+ruleColumns+` FROM notification_rules
		WHERE $1::text[] IS NULL OR namespace = ANY($1) ORDER BY namespace, name`, namespaces)
	if err != nil {
		return nil, fmt.Errorf("store: list rules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Rule, error) { return scanRule(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list rules: %w", err)
	}
	return out, nil
}

// UpdateRule writes r if its Version is still the stored one: ErrStale
// if not, ErrNotFound if it (or one of its channels) is gone,
// ErrConflict if the new name is taken.
func (s *Store) UpdateRule(ctx context.Context, r model.Rule) (*model.Rule, error) {
	var out *model.Rule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkRuleChannels(ctx, tx, &r); err != nil {
			return err
		}
		var err error
		out, err = scanRule(tx.QueryRow(ctx, `UPDATE notification_rules SET
			name = $3, selector = $4, events = $5, channels = $6, failing_after = $7, silent_grace_ms = $8,
			late_after_ms = $9, slow_after_ms = $10, group_interval_ms = $11, paused = $12,
			updated_at = `+nowMS+`, version = version + 1
			WHERE id = $1 AND version = $2 RETURNING `+ruleColumns,
			r.ID, r.Version, r.Name, r.Selector, r.Events, r.Channels, r.FailingAfter, r.SilentGrace.Milliseconds(),
			r.LateAfter.Milliseconds(), r.SlowAfter.Milliseconds(), r.GroupInterval.Milliseconds(), r.Paused))
		return err
	})
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("store: rule %s/%s: %w", r.Namespace, r.Name, ErrConflict)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetRule(ctx, r.ID); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("store: rule %s: %w", r.ID, ErrStale)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update rule %s: %w", r.ID, err)
	}
	s.rules.invalidate()
	return out, nil
}

// DeleteRule deletes the rule id and its events not yet sent;
// ErrNotFound if there is none. Its messages stay listed until
// retention.
func (s *Store) DeleteRule(ctx context.Context, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM notification_rules WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("store: delete rule %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: rule %s: %w", id, ErrNotFound)
	}
	s.rules.invalidate()
	return nil
}
