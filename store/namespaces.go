package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// UpdateNamespaceRetention sets namespace ns's retention (0 removes it: the
// cluster's applies again) and returns the namespace.
func (s *Store) UpdateNamespaceRetention(ctx context.Context, ns string, d time.Duration) (*model.Namespace, error) {
	var ms *int64
	if d > 0 {
		v := d.Milliseconds()
		ms = &v
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO namespaces (name, retention_ms) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET retention_ms = excluded.retention_ms, updated_at = now()`, ns, ms)
	if err != nil {
		return nil, fmt.Errorf("store: set retention of namespace %s: %w", ns, err)
	}
	all, err := s.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range all {
		if n.Name == ns {
			return &n, nil
		}
	}
	return &model.Namespace{Name: ns}, nil
}

// ListNamespaces lists the namespaces that have jobs or settings, by
// name, with their job counts, settings and oldest ended execution.
//
// The oldest ended execution is read from the executions_namespace
// index, whose entries are the ended executions: one descent per day
// partition and namespace, however many rows.
func (s *Store) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT l.name, l.jobs, l.retention_ms,
			(SELECT min(x.scheduled_for) FROM executions x WHERE x.namespace = l.name AND x.`+finalStates+`)
		FROM (SELECT COALESCE(j.namespace, n.name) AS name, COALESCE(j.jobs, 0) AS jobs, n.retention_ms
			FROM (SELECT namespace, count(*) AS jobs FROM job_names GROUP BY namespace) j
			FULL JOIN namespaces n ON n.name = j.namespace) l
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Namespace, error) {
		var n model.Namespace
		var ms *int64
		err := r.Scan(&n.Name, &n.Jobs, &ms, &n.OldestExecution)
		if ms != nil {
			d := time.Duration(*ms) * time.Millisecond
			n.Retention = &d
		}
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	return out, nil
}
