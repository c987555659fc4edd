package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// ExecFilter selects executions for ListExecutions and CountExecutions.
// The zero value selects every execution; each field set narrows the
// selection (they combine with AND).
type ExecFilter struct {
	// JobID limits the list to one job's executions.
	JobID *uuid.UUID
	// State and States limit the list to executions in one of these
	// states; both empty lists all.
	State  domain.ExecState
	States []domain.ExecState
	// Namespace limits the list to one namespace.
	Namespace string
	// JobPrefix limits the list to jobs whose name starts with it.
	JobPrefix string
	// Handler limits the list to executions for one handler queue: "http",
	// "nats", or a custom handler's name.
	Handler string
	// Since and Until bound the scheduled time: Since ≤ scheduled_for <
	// Until. Only the day partitions in the range are read.
	Since, Until *time.Time
	// StartedBefore limits the list to executions started before it (for
	// stuck work: running, started over an hour ago).
	StartedBefore *time.Time
	// Error limits the list to executions whose error contains it, in
	// any case.
	Error string
	// Manual and Backfill, when set, limit the list to manual runs (or
	// not) and to backfill runs (or not).
	Manual, Backfill *bool
	// Limit is the page size: 50 when 0, at most 500.
	Limit int
	// Cursor continues a listing where the page that returned it ended;
	// "" starts with the newest.
	Cursor string
}

// filtered reports whether f narrows the listing by a column that an
// index orders by scheduled time (the job's, the states', the
// namespace's), in which case the listing is ordered by (scheduled_for,
// id) to walk that index. Other listings, narrowed or not, are ordered by
// id alone, which is the same order (an id begins with its scheduled
// time), and walk the primary key newest first, testing each row: a
// handler's, a day's or a job name prefix's first page reads about as
// many rows as it skips, where ordering by time sorted every match (a
// handler's first page over 30 days of 5.5 million executions took 15 s,
// a day's 120 ms; by id, 8 ms and 0.5 ms). An error text search reads
// the executions_error trigram index and sorts its few matches.
func (f *ExecFilter) filtered() bool {
	states := f.states()
	onlySucceeded := len(states) == 1 && states[0] == domain.ExecSucceeded
	return f.JobID != nil || (len(states) > 0 && !onlySucceeded) || f.Namespace != "" || f.Error != ""
}

func (f *ExecFilter) states() []domain.ExecState {
	states := slices.Clone(f.States)
	if f.State != "" && !slices.Contains(states, f.State) {
		states = append(states, f.State)
	}
	slices.Sort(states)
	return states
}

// endedStates selects the executions the partial executions_namespace
// index holds (migration 17).
const endedStates = "state IN ('succeeded', 'failed', 'dead', 'cancelled')"

// handlerKey is the handler queue an execution goes to: its handler's
// type, or a custom handler's name (from the row, or its job spec); per
// row, for grouping (a filter uses handlerIs).
var handlerKey = "(SELECT " + handlerKeyOf("h") +
	" FROM (SELECT COALESCE(executions.handler, (SELECT sp.handler FROM job_specs sp WHERE sp.id = executions.spec_id))) AS x(h))"

// handlerKeyOf is the handler queue of the handler JSON h.
func handlerKeyOf(h string) string {
	return "CASE WHEN " + h + "->>'type' = 'custom' THEN " + h + "->>'name' ELSE " + h + "->>'type' END"
}

// handlerIs is the condition that an execution goes to the handler queue
// q (a parameter): its handler's type, or a custom handler's name, from
// the row or else its job spec. The specs of q are found once, as an
// array (an InitPlan): as a subquery (IN) each day partition's scan built
// its own hash of them, 60 ms apiece.
func handlerIs(q string) string {
	return "(CASE WHEN executions.handler IS NOT NULL THEN " + handlerKeyOf("executions.handler") + " = " + q +
		" ELSE spec_id = ANY ((SELECT array_agg(sp.id) FROM job_specs sp WHERE " + handlerKeyOf("sp.handler") + " = " + q + ")::uuid[]) END)"
}

// where is f's conditions (the cursor's but for count; the states' but
// with withoutStates), with their arguments added by arg.
func (f *ExecFilter) where(arg func(any) string, withCursor, withoutStates bool) ([]string, error) {
	var where []string
	add := func(cond string) { where = append(where, cond) }
	if f.JobID != nil {
		add("job_id = " + arg(*f.JobID))
	}
	if states := f.states(); len(states) > 0 && !withoutStates {
		lits := make([]string, len(states))
		for i, st := range states {
			if !slices.Contains(domain.ExecStates, st) {
				return nil, fmt.Errorf("unknown state %q", st)
			}
			// Literals, not parameters: the planner can use the partial
			// executions_state index only for states it can see.
			lits[i] = "'" + string(st) + "'"
		}
		add("state IN (" + strings.Join(lits, ", ") + ")")
	}
	if f.Namespace != "" {
		add("namespace = " + arg(f.Namespace))
	}
	if f.JobPrefix != "" {
		add("job_name LIKE " + arg(likePrefix(f.JobPrefix)))
	}
	if f.Handler != "" {
		add(handlerIs(arg(f.Handler)))
	}
	if f.Since != nil {
		add("scheduled_for >= " + arg(f.Since.UTC()))
	}
	if f.Until != nil {
		add("scheduled_for < " + arg(f.Until.UTC()))
	}
	if f.StartedBefore != nil {
		add("started_at < " + arg(f.StartedBefore.UTC()))
	}
	if f.Error != "" {
		// error <> '' is what the partial trigram index holds.
		add("error <> ''")
		add("error ILIKE " + arg("%"+strings.TrimSuffix(likePrefix(f.Error), "%")+"%"))
	}
	if f.Manual != nil {
		add("manual = " + arg(*f.Manual))
	}
	if f.Backfill != nil {
		add("backfill = " + arg(*f.Backfill))
	}
	if withCursor && f.Cursor != "" {
		var c uuid.UUID
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, err
		}
		t, id := arg(domain.ExecutionTime(c)), arg(c)
		if f.filtered() {
			add("scheduled_for <= " + t)
			add("(scheduled_for, id) < (" + t + ", " + id + ")")
		} else {
			add("scheduled_for <= " + t)
			add("id < " + id)
		}
	}
	return where, nil
}

// ListExecutions lists executions matching f newest first (by scheduled
// time, then id), one page at a time. It returns the cursor of the next
// page, "" after the last one; executions created meanwhile never shift
// a later page (they are newer than the cursor, or of an older time the
// listing has not reached). An unknown cursor fails with ErrBadCursor.
//
// An execution id begins with its scheduled time in milliseconds (see
// ExecutionID), so id order is (scheduled_for, id) order; without a
// filter (or listing succeeded executions) the listing walks the primary
// key backwards, with one it walks the (job_id, scheduled_for) or the
// partial (state, scheduled_for) index, or scans the day partitions
// between Since and Until.
func (s *Store) ListExecutions(ctx context.Context, f ExecFilter) ([]*model.Execution, string, error) {
	limit := pageSize(f.Limit)
	var execs []*model.Execution
	for _, g := range f.windows(time.Now()) {
		page, err := s.listExecutions(ctx, g, limit+1-len(execs))
		if err != nil {
			return nil, "", err
		}
		if execs = append(execs, page...); len(execs) > limit {
			break
		}
	}
	next := ""
	if len(execs) > limit {
		execs = execs[:limit]
		next = encodeCursor(execs[limit-1].ID)
	}
	return execs, next, nil
}

// Windows of a job's listing (ExecFilter.windows), back from its newest
// end.
var jobWindows = []time.Duration{2 * 24 * time.Hour, 16 * 24 * time.Hour}

// windows splits a listing of one job's executions without a lower time
// bound into time windows, newest first, read in turn until a page is
// full: the newest two days (and any later), the 14 days before, then
// the rest. Each reads only its windows' day partitions, and the planner
// prunes the others; one statement over every day partition (30 days of
// history and 7 days ahead) spent more time planning and opening each
// partition's index (4 ms, 50 ms on a new connection) than reading the
// job's page, which usually lies in the newest days. Other listings are
// one window.
func (f ExecFilter) windows(now time.Time) []ExecFilter {
	if f.JobID == nil || f.Since != nil {
		return []ExecFilter{f}
	}
	top := now
	if f.Until != nil {
		top = *f.Until
	}
	if f.Cursor != "" {
		var c uuid.UUID
		if decodeCursor(f.Cursor, &c) == nil {
			top = domain.ExecutionTime(c)
		}
	}
	var out []ExecFilter
	hi := f.Until
	for _, back := range jobWindows {
		lo := top.Add(-back)
		g := f
		g.Since, g.Until = &lo, hi
		out = append(out, g)
		hi = &lo
	}
	g := f
	g.Until = hi
	return append(out, g)
}

// listExecutions reads up to limit executions matching f, in one
// statement.
func (s *Store) listExecutions(ctx context.Context, f ExecFilter, limit int) ([]*model.Execution, error) {
	var args sqlArgs
	arg := args.add
	states := f.states()
	var split []string // each branch's state condition
	switch {
	case f.filtered() && len(states) > 1:
		// One ordered branch per state, each reading at most a page from
		// the (state, scheduled_for) index, then merged: with IN (…) the
		// planner would read and sort every row of those states in the
		// range (11,000 rows for "failed or dead since 24 h" at a million
		// executions a day, 76 ms with a cold cache) to return 50.
		for _, st := range states {
			if !slices.Contains(domain.ExecStates, st) {
				return nil, fmt.Errorf("store: list executions: unknown state %q", st)
			}
			split = append(split, "state = '"+string(st)+"'")
		}
	case f.Namespace != "" && len(states) == 0:
		// The ended executions from the partial executions_namespace
		// index, the others from the state index, merged: without a
		// state the planner can use neither, and walked every execution
		// of the range newest first (200 ms for a namespace's first page
		// of a day).
		split = []string{endedStates, "state IN ('queued', 'running')"}
	}
	where, err := f.where(arg, true, len(split) > 0)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	var sql string
	switch {
	case len(split) > 0:
		lim := arg(limit)
		branches := make([]string, len(split))
		for i, cond := range split {
			branches[i] = "(SELECT " + execRead + " FROM executions WHERE " + strings.Join(append(slices.Clone(where), cond), " AND ") +
				" ORDER BY scheduled_for DESC, id DESC LIMIT " + lim + ")"
		}
		sql = "SELECT * FROM (" + strings.Join(branches, " UNION ALL ") + ") x ORDER BY scheduled_for DESC, id DESC LIMIT " + lim
	case f.filtered():
		sql = "SELECT " + execRead + " FROM executions"
		if len(where) > 0 {
			sql += " WHERE " + strings.Join(where, " AND ")
		}
		sql += " ORDER BY scheduled_for DESC, id DESC LIMIT " + arg(limit)
	default:
		sql = "SELECT " + execRead + " FROM executions"
		if len(where) > 0 {
			sql += " WHERE " + strings.Join(where, " AND ")
		}
		sql += " ORDER BY id DESC LIMIT " + arg(limit)
	}

	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Execution, error) { return scanExecution(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	return execs, nil
}

// CountExecutions counts the executions matching f (its cursor and limit
// aside).
func (s *Store) CountExecutions(ctx context.Context, f ExecFilter) (int64, error) {
	var args sqlArgs
	arg := args.add
	handler := f.Handler
	f.Handler = "" // counted in two parts, below
	where, err := f.where(arg, false, false)
	if err != nil {
		return 0, fmt.Errorf("store: count executions: %w", err)
	}
	count := func(more ...string) string {
		sql := "SELECT count(*) FROM executions"
		if w := append(slices.Clone(where), more...); len(w) > 0 {
			sql += " WHERE " + strings.Join(w, " AND ")
		}
		return sql
	}
	sql := count()
	if handler != "" {
		// The executions that name their handler, plus those of the specs
		// that do, as a semi-join: one hash of the specs for the whole
		// scan (handlerIs tests an array per row: 43,000 specs times 5.5
		// million rows did not end).
		q := arg(handler)
		sql = "SELECT (" + count("executions.handler IS NOT NULL", handlerKeyOf("executions.handler")+" = "+q) + ") + (" +
			count("executions.handler IS NULL", "spec_id IN (SELECT sp.id FROM job_specs sp WHERE "+handlerKeyOf("sp.handler")+" = "+q+")") + ")"
	}
	var n int64
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count executions: %w", err)
	}
	return n, nil
}
