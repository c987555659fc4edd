package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
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

// ListCalendarJobs lists the jobs of a namespace whose policy names any of
// the calendars names, by name, at most limit of them: their id, bucket,
// namespace, name, state, schedule, next run and policy. It walks the
// namespace's job names (an index), and reads each job by its key: a
// calendar's change costs what its namespace holds, not the cluster.
func (s *Store) ListCalendarJobs(ctx context.Context, namespace string, names []string, limit int) ([]*model.Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT j.id, j.bucket, j.namespace, j.name, j.state, j.schedule, j.next_run_at, j.policy
		FROM job_names n JOIN jobs j ON j.bucket = n.bucket AND j.id = n.job_id
		WHERE n.namespace = $1 AND j.policy->'calendars' ?| $2::text[]
		ORDER BY n.name LIMIT $3`, namespace, names, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list jobs naming calendars %v: %w", names, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Job, error) {
		var (
			j      model.Job
			policy *domain.JobPolicy
		)
		err := r.Scan(&j.ID, &j.Bucket, &j.Namespace, &j.Name, &j.State, &j.Schedule, &j.NextRunAt, &policy)
		j.NextRunAt, j.Policy = utcPtr(j.NextRunAt), policy
		return &j, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list jobs naming calendars %v: %w", names, err)
	}
	return out, nil
}

// UpdateJobNextRuns moves active jobs' next runs, each only while it is
// still the one read (compare and set on next_run_at), and announces the
// jobs it moved on JobsChannel, so that their scanners read them again.
// It returns how many it moved.
func (s *Store) UpdateJobNextRuns(ctx context.Context, moves []model.NextRunMove) (int, error) {
	if len(moves) == 0 {
		return 0, nil
	}
	ids, buckets := make([]uuid.UUID, len(moves)), make([]int32, len(moves))
	froms, tos := make([]time.Time, len(moves)), make([]time.Time, len(moves))
	for i, m := range moves {
		ids[i], buckets[i], froms[i], tos[i] = m.ID, int32(m.Bucket), ms(m.From), ms(m.To)
	}
	var n int
	// The rows are locked first, in (bucket, id) order (the store's lock
	// order: the lock comes after the sort), then moved.
	err := s.pool.QueryRow(ctx, `WITH m AS (
			SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::timestamptz[]) AS m(id, bucket, from_at, to_at)
		), locked AS (
			SELECT j.bucket, j.id, m.to_at FROM jobs j JOIN m ON j.bucket = m.bucket AND j.id = m.id
			WHERE (j.state = 'active') IS TRUE AND j.next_run_at = m.from_at
			ORDER BY j.bucket, j.id FOR UPDATE OF j
		), moved AS (
			UPDATE jobs j SET next_run_at = l.to_at, version = j.version + 1, updated_at = `+nowMS+`
			FROM locked l JOIN m ON m.bucket = l.bucket AND m.id = l.id
			WHERE j.bucket = l.bucket AND j.id = l.id AND (j.state = 'active') IS TRUE AND j.next_run_at = m.from_at
			RETURNING j.bucket, j.id
		)
		SELECT count(pg_notify($5, bucket::text || ':' || id::text)) FROM moved`,
		ids, buckets, froms, tos, JobsChannel).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: move %d jobs' next runs: %w", len(moves), err)
	}
	return n, nil
}
