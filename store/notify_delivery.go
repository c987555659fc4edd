package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// MaxEventsPerMessage bounds the events one message lists; a rule with
// more pending sends the rest in its next message.
const MaxEventsPerMessage = 200

// BuildMessage makes the body of message id of rule r to channel c from
// the events it lists (oldest first).
type BuildMessage func(id uuid.UUID, r *model.Rule, c *model.Channel, evs []model.NotifyEvent) (json.RawMessage, error)

// groupDueSQL finds a rule with pending events whose group interval has
// passed, locking it (one being grouped by another node is skipped), and
// none of $1 (those that failed in this pass).
const groupDueSQL = `
SELECT ` + ruleColumns + ` FROM notification_rules r
WHERE EXISTS (SELECT 1 FROM notification_events e WHERE e.rule_id = r.id AND e.grouped_at IS NULL)
	AND (r.last_sent_at IS NULL OR r.last_sent_at + r.group_interval_ms * interval '1 ms' <= now())
	AND r.id <> ALL($1)
ORDER BY r.last_sent_at NULLS FIRST
LIMIT 1
FOR UPDATE OF r SKIP LOCKED`

const notifyEventColumns = `id, rule_id, namespace, kind, job_id, COALESCE(job_name, ''), execution_id, COALESCE(handler, ''), at, detail, dedup_key`

func scanNotifyEvent(row pgx.Row) (model.NotifyEvent, error) {
	var e model.NotifyEvent
	var detail []byte
	err := row.Scan(&e.ID, &e.RuleID, &e.Namespace, &e.Kind, &e.JobID, &e.JobName, &e.ExecutionID, &e.Handler, &e.At, &detail, &e.DedupKey)
	e.Detail, e.At = detail, e.At.UTC()
	return e, err
}

// GroupNotifications turns the pending events of up to limit rules whose
// group interval has passed into messages: one per channel of the rule
// that is not paused, listing up to MaxEventsPerMessage events, its body
// made by build. It returns how many messages it made. A rule's events
// go into messages once: the rule's row is locked while they are made,
// and they are marked grouped in the same transaction, one transaction
// per rule (a rule that fails is left for the next call, and the others
// go on). A paused rule's events, or those of a rule whose channels are
// all paused, are marked grouped with no message: pausing silences.
func (s *Store) GroupNotifications(ctx context.Context, limit int, build BuildMessage) (int, error) {
	made, failed := 0, []uuid.UUID{}
	var errs []error
	for range limit {
		var rule *model.Rule
		n := 0
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			r, err := scanRule(tx.QueryRow(ctx, groupDueSQL, failed))
			if err != nil {
				return err
			}
			rule = r
			if n, err = groupRule(ctx, tx, r, build); err != nil || n == 0 {
				return err
			}
			_, err = tx.Exec(ctx, `SELECT pg_notify('`+NotifyChannel+`', '')`)
			return err
		})
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			if rule == nil {
				errs = append(errs, err)
				break
			}
			failed = append(failed, rule.ID)
			errs = append(errs, fmt.Errorf("rule %s: %w", rule.ID, err))
			continue
		}
		made += n
	}
	if err := errors.Join(errs...); err != nil {
		return made, fmt.Errorf("store: group notifications: %w", err)
	}
	return made, nil
}

// groupRule makes rule r's messages from its pending events.
func groupRule(ctx context.Context, tx pgx.Tx, r *model.Rule, build BuildMessage) (int, error) {
	rows, err := tx.Query(ctx, `SELECT `+notifyEventColumns+` FROM notification_events
		WHERE rule_id = $1 AND grouped_at IS NULL ORDER BY at, id LIMIT $2`, r.ID, MaxEventsPerMessage)
	if err != nil {
		return 0, err
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.NotifyEvent, error) { return scanNotifyEvent(row) })
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	ids := make([]uuid.UUID, len(evs))
	kindSet, jobSet := map[string]bool{}, map[uuid.UUID]bool{}
	kinds, jobs := []string{}, []uuid.UUID{} // not NULL
	for i, e := range evs {
		ids[i] = e.ID
		if !kindSet[e.Kind] {
			kindSet[e.Kind] = true
			kinds = append(kinds, e.Kind)
		}
		if e.JobID != nil && !jobSet[*e.JobID] {
			jobSet[*e.JobID] = true
			jobs = append(jobs, *e.JobID)
		}
	}
	var channels []*model.Channel
	if !r.Paused {
		// FOR SHARE: a channel deleted meanwhile waits for these messages,
		// and then fails them with its other pending ones.
		crows, err := tx.Query(ctx, `SELECT `+channelColumns+` FROM notification_channels
			WHERE id = ANY($1) AND NOT paused ORDER BY name FOR SHARE`, r.Channels)
		if err != nil {
			return 0, err
		}
		if channels, err = pgx.CollectRows(crows, func(row pgx.CollectableRow) (*model.Channel, error) { return scanChannel(row) }); err != nil {
			return 0, err
		}
	}
	b := &pgx.Batch{}
	for _, c := range channels {
		id := uuid.Must(uuid.NewV7())
		body, err := build(id, r, c, evs)
		if err != nil {
			return 0, err
		}
		b.Queue(`INSERT INTO notifications (id, namespace, rule_id, channel_id, state, kinds, job_ids, body,
			created_at, next_attempt_at) VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, `+nowMS+`, `+nowMS+`)`,
			id, r.Namespace, r.ID, c.ID, kinds, jobs, body)
	}
	b.Queue(`UPDATE notification_events SET grouped_at = `+nowMS+` WHERE id = ANY($1)`, ids)
	b.Queue(`UPDATE notification_rules SET last_sent_at = `+nowMS+` WHERE id = $1`, r.ID)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	return len(channels), nil
}

// Delivery is a claimed notification and its channel.
type Delivery struct {
	Notification *model.Notification
	Channel      *model.Channel
}

const notificationColumns = `n.id, n.namespace, n.rule_id, n.channel_id, n.state, n.kinds, n.job_ids, n.body, n.created_at,
	n.next_attempt_at, n.attempts, n.attempt_log, n.sent_at, n.last_error`

func scanNotification(row pgx.Row, extra ...any) (*model.Notification, error) {
	var (
		n        model.Notification
		body, lg []byte
	)
	err := row.Scan(append([]any{&n.ID, &n.Namespace, &n.RuleID, &n.ChannelID, &n.State, &n.Kinds, &n.JobIDs, &body,
		&n.CreatedAt, &n.NextAttemptAt, &n.Attempts, &lg, &n.SentAt, &n.LastError}, extra...)...)
	if err != nil {
		return nil, err
	}
	n.Body, n.CreatedAt = body, n.CreatedAt.UTC()
	if err := json.Unmarshal(lg, &n.AttemptLog); err != nil {
		return nil, fmt.Errorf("attempt log of notification %s: %w", n.ID, err)
	}
	return &n, nil
}

// ClaimNotifications takes up to limit pending notifications that are
// due and not held by another deliverer, holding them for lease, and
// returns them with their channels. A deliverer that dies holding one
// lets it go when the lease ends: another delivers it again, under the
// same id. (A channel's deletion fails its pending notifications: see
// DeleteChannel.)
func (s *Store) ClaimNotifications(ctx context.Context, limit int, lease time.Duration) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT id FROM notifications
			WHERE state = 'pending' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())
			ORDER BY next_attempt_at LIMIT $1
			FOR UPDATE SKIP LOCKED)
		UPDATE notifications n SET locked_until = now() + $2 * interval '1 ms'
		FROM due, notification_channels c WHERE n.id = due.id AND c.id = n.channel_id
		RETURNING `+notificationColumns+`, `+channelCols("c"), limit, lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("store: claim notifications: %w", err)
	}
	var out []Delivery
	for rows.Next() {
		var c model.Channel
		n, err := scanNotification(rows, &c.ID, &c.Namespace, &c.Name, &c.Type, &c.URL, &c.SecretKeyID, &c.Secret,
			&c.Paused, &c.CreatedAt, &c.UpdatedAt, &c.Version)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: claim notifications: %w", err)
		}
		out = append(out, Delivery{Notification: n, Channel: &c})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: claim notifications: %w", err)
	}
	return out, nil
}

// channelCols is channelColumns of the table aliased a.
func channelCols(a string) string {
	return a + ".id, " + a + ".namespace, " + a + ".name, " + a + ".type, " + a + ".url, COALESCE(" + a + ".secret_key_id, ''), " +
		a + ".secret, " + a + ".paused, " + a + ".created_at, " + a + ".updated_at, " + a + ".version"
}

// RecordDelivery records attempt a of notification id, which the caller
// claimed: sent; or, when next is set, to be tried again then; or failed
// for good (next nil and sent false).
func (s *Store) RecordDelivery(ctx context.Context, id uuid.UUID, a model.DeliveryAttempt, sent bool, next *time.Time) error {
	state := model.NotificationPending
	switch {
	case sent:
		state, next = model.NotificationSent, nil
	case next == nil:
		state = model.NotificationFailed
	}
	entry, err := json.Marshal([]model.DeliveryAttempt{a})
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `UPDATE notifications SET state = $2, next_attempt_at = $3, locked_until = NULL,
		attempts = attempts + 1, attempt_log = attempt_log || $4::jsonb, last_error = $5,
		sent_at = CASE WHEN $2 = 'sent' THEN $6::timestamptz END
		WHERE id = $1 AND state = 'pending'`, id, state, next, entry, a.Error, a.At)
	if err != nil {
		return fmt.Errorf("store: finish delivery of %s: %w", id, err)
	}
	return nil
}

// NotificationFilter selects notifications.
type NotificationFilter struct {
	// Namespaces: only these (nil: every namespace).
	Namespaces []string
	RuleID     *uuid.UUID
	JobID      *uuid.UUID
	State      string
	Cursor     string
	Limit      int
}

// ListNotifications lists notifications matching f, newest first, a page
// at a time, and the cursor of the next page ("" after the last).
func (s *Store) ListNotifications(ctx context.Context, f NotificationFilter) ([]*model.Notification, string, error) {
	limit := pageSize(f.Limit)
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if f.Namespaces != nil {
		where = append(where, "n.namespace = ANY("+arg(f.Namespaces)+")")
	}
	if f.RuleID != nil {
		where = append(where, "n.rule_id = "+arg(*f.RuleID))
	}
	if f.JobID != nil {
		where = append(where, "n.job_ids @> ARRAY["+arg(*f.JobID)+"::uuid]")
	}
	if f.State != "" {
		where = append(where, "n.state = "+arg(f.State))
	}
	type cursor struct {
		At time.Time `json:"t"`
		ID uuid.UUID `json:"i"`
	}
	if f.Cursor != "" {
		var c cursor
		if decodeCursor(f.Cursor, &c) != nil {
			return nil, "", ErrBadCursor
		}
		where = append(where, "(n.created_at, n.id) < ("+arg(c.At)+", "+arg(c.ID)+")")
	}
	sql := "SELECT " + notificationColumns + " FROM notifications n"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY n.created_at DESC, n.id DESC LIMIT " + arg(limit+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Notification, error) { return scanNotification(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list notifications: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = encodeCursor(cursor{last.CreatedAt, last.ID})
	}
	return out, next, nil
}

// GetNotification returns notification id, or ErrNotFound.
func (s *Store) GetNotification(ctx context.Context, id uuid.UUID) (*model.Notification, error) {
	n, err := scanNotification(s.pool.QueryRow(ctx, `SELECT `+notificationColumns+` FROM notifications n WHERE n.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: notification %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: notification %s: %w", id, err)
	}
	return n, nil
}

// SilentCandidate is a job a job.silent rule watches: active, recurring,
// and when its silence is counted from.
type SilentCandidate struct {
	JobID uuid.UUID
	Name  string
	Spec  json.RawMessage // the job's schedule (schedule.Spec)
	// Since is when the job last succeeded, or was created or resumed if
	// that is later: silence is counted from it.
	Since time.Time
}

// ListSilenceCandidates lists the active jobs of rule r's namespace that its
// selector chooses, with when each last succeeded (or started being
// watched). A paused or completed job is never silent.
func (s *Store) ListSilenceCandidates(ctx context.Context, r *model.Rule) ([]SilentCandidate, error) {
	sel, err := domain.ParseSelector(r.Selector)
	if err != nil {
		return nil, fmt.Errorf("store: rule %s selector: %w", r.ID, err)
	}
	var args sqlArgs
	arg := args.add
	sql := `SELECT j.id, j.name, j.schedule,
		GREATEST(j.created_at, j.skip_before, s.last_success_at)
		FROM jobs j LEFT JOIN job_successes s ON s.job_id = j.id
		WHERE j.namespace = ` + arg(r.Namespace) + ` AND j.state = 'active' AND j.schedule->>'cron' IS NOT NULL` +
		andSQL(selectorSQL("labels", sel, "", arg))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: silent candidates of rule %s: %w", r.ID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SilentCandidate, error) {
		var c SilentCandidate
		var spec []byte
		err := row.Scan(&c.JobID, &c.Name, &spec, &c.Since)
		c.Spec, c.Since = spec, c.Since.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: silent candidates of rule %s: %w", r.ID, err)
	}
	return out, nil
}

// SaveHandlerBreaker records that handler's circuit breaker is open (on
// some executor) or closed (on all), as of since. It reports whether
// this call changed what was recorded, and whether the handler was
// recorded before: of several nodes seeing the same change, one is told
// it changed it.
func (s *Store) SaveHandlerBreaker(ctx context.Context, handler string, open bool, since time.Time) (changed, known bool, err error) {
	var inserted bool
	err = s.pool.QueryRow(ctx, `INSERT INTO handler_breakers AS h (handler, open, since) VALUES ($1, $2, $3)
		ON CONFLICT (handler) DO UPDATE SET open = excluded.open, since = excluded.since
		WHERE h.open <> excluded.open
		RETURNING xmax = 0`, handler, open, since).Scan(&inserted)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("store: handler %s breaker: %w", handler, err)
	}
	return true, !inserted, nil
}

// ListHandlerRules lists the active rules that ask for event kind and choose
// at least one job, not completed, that runs on handler (its key,
// domain.Handler.Key).
func (s *Store) ListHandlerRules(ctx context.Context, kind, handler string) ([]*model.Rule, error) {
	rules, err := s.ListActiveRules(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []*model.Rule
	for _, r := range rules {
		if !slices.Contains(r.Events, kind) {
			continue
		}
		sel, err := domain.ParseSelector(r.Selector)
		if err != nil {
			continue
		}
		var args sqlArgs
		arg := args.add
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT handler FROM jobs WHERE namespace = `+arg(r.Namespace)+
			` AND state <> 'completed'`+andSQL(selectorSQL("labels", sel, "", arg)), args...)
		if err != nil {
			return nil, fmt.Errorf("store: rules of handler %s: %w", handler, err)
		}
		hs, err := pgx.CollectRows(rows, pgx.RowTo[domain.Handler])
		if err != nil {
			return nil, fmt.Errorf("store: rules of handler %s: %w", handler, err)
		}
		if !slices.ContainsFunc(hs, func(h domain.Handler) bool { return h.Key() == handler }) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
