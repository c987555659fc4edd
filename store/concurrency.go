package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Concurrency by key (migration 35): an execution of a job with a
// concurrency policy carries its key, limit and on_limit (slotColumns),
// and the triggers on executions take and release its slot in the
// transactions that queue and end it. Nothing here takes or frees a slot,
// but for the backstop of ReleaseSilentSlots.

// ErrAtLimit: a run asked for now of a job whose concurrency key is at
// its limit, with on_limit skip.
var ErrAtLimit = errors.New("concurrency key at its limit")

// atLimit reports whether err is tock_slot_take refusing a manual run
// (SQLSTATE TK001), and its message.
func atLimit(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "TK001" {
		return pe.Message, true
	}
	return "", false
}

// slotColumns are the executions columns that carry a job's concurrency
// policy; slotValues reads them from the jobs row named by alias (NULL
// for a job without one).
const slotColumns = "slot_key, slot_limit, slot_on_limit, rate_limit"

func slotValues(alias string) string {
	c := alias + "policy->'concurrency'"
	return c + "->>'slot_key', (" + c + "->>'limit')::int, " + c + "->>'on_limit', " + alias + "policy->'rate_limit'"
}

// slot is a job's concurrency policy as slotColumns' values.
type slot struct {
	key     *string
	limit   *int
	onLimit *string
	rate    *domain.RateLimit
}

func slotOf(j *model.Job) slot {
	var s slot
	if j.Policy == nil {
		return s
	}
	if c := j.Policy.Concurrency; c != nil && c.Slot != "" {
		v := c.WithDefaults()
		s.key, s.limit, s.onLimit = &v.Slot, &v.Limit, &v.OnLimit
	}
	if r := j.Policy.RateLimit; r != nil && r.Slot != "" {
		s.rate = r
	}
	return s
}

// ListConcurrencyKeys lists the concurrency keys with executions holding
// or waiting for their slots, of namespace (its namespace-scoped keys and
// the cluster-scoped keys its executions use; every key when ""), by key.
func (s *Store) ListConcurrencyKeys(ctx context.Context, namespace string) ([]model.SlotKey, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT slot_key, count(*) FILTER (WHERE held), count(*) FILTER (WHERE NOT held),
			min(scheduled_for) FILTER (WHERE NOT held)
		FROM concurrency_slots WHERE $1 = '' OR namespace = $1
		GROUP BY slot_key ORDER BY slot_key`, namespace)
	if err != nil {
		return nil, fmt.Errorf("store: concurrency keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.SlotKey, error) {
		var k model.SlotKey
		err := r.Scan(&k.Slot, &k.Held, &k.Waiting, &k.OldestWaiting)
		k.OldestWaiting = utcPtr(k.OldestWaiting)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: concurrency keys: %w", err)
	}
	return out, nil
}

// ListSlotHolders lists the executions holding (held) or waiting for a
// slot of key slot (a scoped key, domain.Concurrency.Slot), oldest first,
// at most limit.
func (s *Store) ListSlotHolders(ctx context.Context, slot string, held bool, limit int) ([]model.SlotHolder, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT execution_id, scheduled_for, job_id, namespace, since FROM concurrency_slots
		WHERE slot_key = $1 AND held = $2 ORDER BY scheduled_for, execution_id LIMIT $3`, slot, held, pageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("store: slots of %s: %w", slot, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.SlotHolder, error) {
		var h model.SlotHolder
		err := r.Scan(&h.ExecutionID, &h.ScheduledFor, &h.JobID, &h.Namespace, &h.Since)
		h.ScheduledFor, h.Since = h.ScheduledFor.UTC(), h.Since.UTC()
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: slots of %s: %w", slot, err)
	}
	return out, nil
}

// CountSlots counts, for the metrics, the slots held and the executions
// waiting, by scoped key.
func (s *Store) CountSlots(ctx context.Context) (held, waiting map[string]int, err error) {
	keys, err := s.ListConcurrencyKeys(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	held, waiting = make(map[string]int, len(keys)), make(map[string]int, len(keys))
	for _, k := range keys {
		held[k.Slot], waiting[k.Slot] = k.Held, k.Waiting
	}
	return held, waiting, nil
}

// ReleaseSilentSlots frees the concurrency slots that executions of
// buckets, cancelled while an attempt of theirs might run, still keep
// (migration 36) with no sign of life from that attempt since olderThan:
// no executor will report its end (it was killed, or its delivery was
// lost), so the key's waiters get the slots. It returns how many it
// freed. The lost-work rescue calls it with its LostAfter.
func (s *Store) ReleaseSilentSlots(ctx context.Context, buckets []int, olderThan time.Time) (int, error) {
	if len(buckets) == 0 {
		return 0, nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT tock_slot_expire($1, $2)", buckets, olderThan.UTC()).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: release silent slots of %d buckets: %w", len(buckets), err)
	}
	return n, nil
}

// lockSlotSQL takes a key's lock, as the triggers do: the two-int form of
// the advisory locks, apart from the store's one-bigint keys.
const lockSlotSQL = "SELECT pg_advisory_xact_lock(1953459051, hashtext($1))"

// cancelOldestSQL cancels, as CancelExecution does, the $2 oldest
// executions holding a slot of key $1 (by when they took it).
const cancelOldestSQL = `
UPDATE executions x SET state = 'cancelled', finished_at = ` + nowMS + `,
	dispatched_at = COALESCE(x.dispatched_at, ` + nowMS + `), next_attempt_at = NULL, buffered = false,
	error = 'cancelled: a newer run needed its concurrency slot (on_limit cancel_oldest)'
FROM (SELECT execution_id, scheduled_for FROM concurrency_slots
	WHERE slot_key = $1 AND held AND releasing_at IS NULL ORDER BY since, scheduled_for, execution_id LIMIT $2) o
WHERE x.id = o.execution_id AND x.scheduled_for = o.scheduled_for AND x.state IN ('queued', 'running', 'failed')
RETURNING x.id`

// cancelOldest makes room, for the moved jobs whose concurrency policy
// says cancel_oldest, for their runs: under each key's lock, in key
// order, it cancels the key's oldest executions beyond what the limit
// leaves for them, and returns those it cancelled (to tell their
// executors). Their slots go, by the triggers, to the key's oldest
// waiting executions, which the runs inserted next join, once their
// attempts have stopped (migration 36): slots releasing already are not
// counted again.
func cancelOldest(ctx context.Context, tx pgx.Tx, groups map[int]*policyGroup, won map[uuid.UUID]int64) ([]uuid.UUID, error) {
	want := map[string]int{}
	limit := map[string]int{}
	for _, g := range groups {
		for _, f := range g.firings {
			c := f.Concurrency
			if c == nil || c.OnLimit != domain.OnLimitCancelOldest || c.Slot == "" || len(f.Runs) == 0 {
				continue
			}
			if _, ok := won[f.JobID]; ok {
				want[c.Slot] += len(f.Runs)
				limit[c.Slot] = c.Limit
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	var cancelled []uuid.UUID
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if _, err := tx.Exec(ctx, lockSlotSQL, key); err != nil {
			return nil, err
		}
		var held int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM concurrency_slots WHERE slot_key = $1 AND held AND releasing_at IS NULL", key).
			Scan(&held); err != nil {
			return nil, err
		}
		over := held + min(want[key], limit[key]) - limit[key]
		if over <= 0 {
			continue
		}
		rows, err := tx.Query(ctx, cancelOldestSQL, key, over)
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return nil, err
		}
		cancelled = append(cancelled, ids...)
	}
	return cancelled, nil
}
