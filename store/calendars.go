package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

const calendarColumns = "namespace, name, spec, revision, created_at, updated_at"

func scanCalendar(row pgx.Row) (model.Calendar, error) {
	var c model.Calendar
	var spec []byte
	err := row.Scan(&c.Namespace, &c.Name, &spec, &c.Revision, &c.CreatedAt, &c.UpdatedAt)
	c.Spec = spec
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, err
}

// CreateCalendar stores a new calendar (its Revision, CreatedAt and
// UpdatedAt filled in); a name taken in its namespace is ErrConflict.
func (s *Store) CreateCalendar(ctx context.Context, c *model.Calendar) error {
	row := s.pool.QueryRow(ctx, `INSERT INTO calendars (namespace, name, spec) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING RETURNING `+calendarColumns, c.Namespace, c.Name, c.Spec)
	got, err := scanCalendar(row)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store: create calendar %s/%s: %w", c.Namespace, c.Name, ErrConflict)
	case err != nil:
		return fmt.Errorf("store: create calendar %s/%s: %w", c.Namespace, c.Name, err)
	}
	*c = got
	return nil
}

// GetCalendar reads a calendar, or fails with ErrNotFound.
func (s *Store) GetCalendar(ctx context.Context, namespace, name string) (model.Calendar, error) {
	c, err := scanCalendar(s.pool.QueryRow(ctx, "SELECT "+calendarColumns+" FROM calendars WHERE namespace = $1 AND name = $2",
		namespace, name))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("store: get calendar %s/%s: %w", namespace, name, err)
	}
	return c, nil
}

// ListCalendars lists a namespace's calendars by name.
func (s *Store) ListCalendars(ctx context.Context, namespace string) ([]model.Calendar, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+calendarColumns+" FROM calendars WHERE namespace = $1 ORDER BY name", namespace)
	if err != nil {
		return nil, fmt.Errorf("store: list calendars: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Calendar, error) { return scanCalendar(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list calendars: %w", err)
	}
	return out, nil
}

// UpdateCalendar replaces calendar c's spec (one more revision), only
// while its revision is revision (0: any; else ErrRevision); it fails
// with ErrNotFound when there is none, and refreshes c.
func (s *Store) UpdateCalendar(ctx context.Context, c *model.Calendar, revision int64) error {
	row := s.pool.QueryRow(ctx, `UPDATE calendars SET spec = $3, revision = revision + 1, updated_at = now()
		WHERE namespace = $1 AND name = $2 AND ($4 = 0 OR revision = $4) RETURNING `+calendarColumns,
		c.Namespace, c.Name, c.Spec, revision)
	got, err := scanCalendar(row)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetCalendar(ctx, c.Namespace, c.Name); gerr != nil {
			return gerr
		}
		err = ErrRevision
	}
	if err != nil {
		return fmt.Errorf("store: update calendar %s/%s: %w", c.Namespace, c.Name, err)
	}
	*c = got
	return nil
}

// DeleteCalendar deletes a calendar, or fails with ErrNotFound.
func (s *Store) DeleteCalendar(ctx context.Context, namespace, name string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM calendars WHERE namespace = $1 AND name = $2", namespace, name)
	if err != nil {
		return fmt.Errorf("store: delete calendar %s/%s: %w", namespace, name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete calendar %s/%s: %w", namespace, name, ErrNotFound)
	}
	return nil
}
