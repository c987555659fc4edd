package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// auditColumns are the audit_log columns an entry is written to.
var auditColumns = []string{"at", "id", "actor", "namespace", "action", "resource", "before", "after", "detail"}

// CreateAuditEntries stores entries, giving each its time and id if it has none.
func (s *Store) CreateAuditEntries(ctx context.Context, entries []model.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"audit_log"}, auditColumns, pgx.CopyFromRows(auditRows(entries)))
	if err != nil {
		return fmt.Errorf("store: write audit: %w", err)
	}
	return nil
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	// Namespaces: only these (nil: every namespace).
	Namespaces   []string
	Actor        string
	Action       string
	Since, Until *time.Time
	Cursor       string
	Limit        int
}

// auditRows are entries as rows of auditColumns, each given its time and
// id if it has none.
func auditRows(entries []model.AuditEntry) [][]any {
	rows := make([][]any, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = time.Now()
		}
		if e.ID == uuid.Nil {
			e.ID = uuid.Must(uuid.NewV7())
		}
		rows[i] = []any{e.At, e.ID, e.Actor, e.Namespace, e.Action, e.Resource, nullJSON(e.Before), nullJSON(e.After), nullJSON(e.Detail)}
	}
	return rows
}

// ListAuditEntries lists entries matching f, newest first, a page at a time,
// and the cursor of the next page ("" after the last).
func (s *Store) ListAuditEntries(ctx context.Context, f AuditFilter) ([]model.AuditEntry, string, error) {
	limit := pageSize(f.Limit)
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if f.Namespaces != nil {
		where = append(where, "namespace = ANY("+arg(f.Namespaces)+")")
	}
	if f.Actor != "" {
		where = append(where, "actor = "+arg(f.Actor))
	}
	if f.Action != "" {
		where = append(where, "action = "+arg(f.Action))
	}
	if f.Since != nil {
		where = append(where, "at >= "+arg(*f.Since))
	}
	if f.Until != nil {
		where = append(where, "at < "+arg(*f.Until))
	}
	if f.Cursor != "" {
		var c struct {
			At time.Time `json:"t"`
			ID uuid.UUID `json:"i"`
		}
		if decodeCursor(f.Cursor, &c) != nil {
			return nil, "", ErrBadCursor
		}
		where = append(where, "(at, id) < ("+arg(c.At)+", "+arg(c.ID)+")")
	}
	sql := "SELECT at, id, actor, namespace, action, resource, before, after, detail FROM audit_log"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY at DESC, id DESC LIMIT " + arg(limit+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.AuditEntry, error) {
		var e model.AuditEntry
		var before, after, detail []byte
		err := r.Scan(&e.At, &e.ID, &e.Actor, &e.Namespace, &e.Action, &e.Resource, &before, &after, &detail)
		e.Before, e.After, e.Detail = before, after, detail
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: list audit: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = encodeCursor(struct {
			At time.Time `json:"t"`
			ID uuid.UUID `json:"i"`
		}{last.At, last.ID})
	}
	return out, next, nil
}

// MaintainAuditPartitions makes the audit trail's day partitions from yesterday
// through daysAhead days after now, and drops the days that ended more
// than retention before now (0: keep everything); it returns the days it
// dropped. The audit trail is written only by API requests, so its locks
// never hold up firing or recording.
func (s *Store) MaintainAuditPartitions(ctx context.Context, now time.Time, daysAhead int, retention time.Duration) (int, error) {
	have, err := partitionsOf(ctx, s.pool, "audit_log")
	if err != nil {
		return 0, fmt.Errorf("store: maintain audit: %w", err)
	}
	today := now.UTC().Truncate(24 * time.Hour)
	for d := -1; d <= daysAhead; d++ {
		day := today.AddDate(0, 0, d)
		name := DayPartition("audit_log", day)
		if have[name] {
			continue
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
				return err
			}
			// Rows of the day already in the default partition move in.
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE tock_audit_moving ON COMMIT DROP AS "+
				"WITH moved AS (DELETE FROM audit_log_default WHERE at >= $1 AND at < $2 RETURNING *) SELECT * FROM moved",
				day, day.AddDate(0, 0, 1)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s PARTITION OF audit_log FOR VALUES FROM ('%s') TO ('%s')",
				name, day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339))); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO audit_log SELECT * FROM tock_audit_moving")
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("store: maintain audit: create %s: %w", name, err)
		}
	}
	if retention <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-retention)
	dropped := 0
	for name := range have {
		day, err := time.Parse("20060102", strings.TrimPrefix(name, "audit_log_"))
		if err != nil || !day.AddDate(0, 0, 1).Before(cutoff) {
			continue
		}
		if _, err := s.pool.Exec(ctx, "DROP TABLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return dropped, fmt.Errorf("store: maintain audit: drop %s: %w", name, err)
		}
		dropped++
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM audit_log_default WHERE at < $1", cutoff); err != nil {
		return dropped, fmt.Errorf("store: maintain audit: %w", err)
	}
	return dropped, nil
}
