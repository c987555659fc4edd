package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// JobFilter selects jobs for ListJobs and CountJobsMatching. The zero
// value lists every job. Every filter is answered from an index of
// job_names (migration 37) or, with a next-run range, of jobs by next run
// (jobs_due, widened by migration 39); see docs/postgres.md.
type JobFilter struct {
	// Namespace limits the list to one namespace; "" lists all.
	Namespace string
	// State limits the list to jobs in this state; "" lists all.
	State domain.JobState
	// Handler limits the list to jobs of this handler queue: http, nats,
	// or a custom handler's name (domain.Handler.Queue); "" lists all.
	Handler string
	// NamePrefix limits the list to names starting with it.
	NamePrefix string
	// Selector limits the list to jobs whose labels match it.
	Selector domain.Selector
	// NextRunAfter and NextRunBefore, when not zero, limit the list to
	// jobs whose next run is at or after NextRunAfter and before
	// NextRunBefore. Only active jobs have a next run. With either, the
	// list comes soonest first: in (next run, namespace, name) order.
	NextRunAfter, NextRunBefore time.Time
	// Limit is the page size: 50 when 0, at most 500.
	Limit int
	// Cursor continues a listing where the page that returned it ended;
	// "" starts at the beginning. CountJobsMatching ignores it.
	Cursor string
}

// JobCountCap is the most jobs CountJobsMatching counts: past it, a
// count says only "at least JobCountCap", so that a count costs at most
// that many rows whatever the namespace holds.
const JobCountCap = 1000

// namedProbe is how many active jobs the filters of a next-run search
// other than the range (namespace, name prefix, handler, selector) may
// match in job_names for the search to probe each of their jobs rows
// (~10 µs each) rather than walk the jobs due in the range in order.
const namedProbe = 5000

// ListJobs lists jobs matching f in (namespace, name) order, or with a
// next-run range in (next run, namespace, name) order, one page at a
// time. It returns the cursor of the next page, "" after the last one.
// An unknown cursor fails with ErrBadCursor.
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]*model.Job, string, error) {
	limit := pageSize(f.Limit)
	q, err := s.searchJobs(ctx, f, true)
	if err != nil {
		return nil, "", fmt.Errorf("store: list jobs: %w", err)
	}
	if q.none {
		return nil, "", nil
	}
	if q.names {
		jobs, next, err := s.listNamed(ctx, q, limit)
		if err != nil {
			return nil, "", fmt.Errorf("store: list jobs: %w", err)
		}
		return jobs, next, nil
	}
	// A literal LIMIT: a generic plan prices a parameter's as a tenth of
	// the rows, and chose a plan 200 times slower (1.4 s at 10,000,000).
	sql := "SELECT " + jobRead("j") + q.from + " ORDER BY " + q.order + " LIMIT " + strconv.Itoa(limit+1)
	var jobs []*model.Job
	err = s.runSearch(ctx, q, sql, func(rows pgx.Rows) (err error) {
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Job, error) { return scanJob(r) })
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: list jobs: %w", err)
	}
	next := ""
	if len(jobs) > limit {
		jobs = jobs[:limit]
		last := jobs[limit-1]
		if q.byNextRun {
			// Only active jobs are listed by next run: they have one.
			next = encodeCursor([3]string{last.NextRunAt.UTC().Format(time.RFC3339Nano), last.Namespace, last.Name})
		} else {
			next = encodeCursor([2]string{last.Namespace, last.Name})
		}
	}
	return jobs, next, nil
}

// listNamed lists a page of search q, which reads job_names alone, in
// two statements: the page's names from job_names (planned for the
// filter's values, which choose its index), then their jobs rows by key
// (readJobsSQL). Planned for its values, that second read, a LATERAL
// probe of a partitioned table, costs ~18 ms of planning over 256
// partitions for ~3 ms of work; so it runs with a generic plan, which
// prunes partitions as it probes and is the same for every page. A job
// deleted between the two is left out of the page.
func (s *Store) listNamed(ctx context.Context, q jobSearch, limit int) ([]*model.Job, string, error) {
	sql := "SELECT n.namespace, n.name, n.bucket, n.job_id" + q.from + " ORDER BY " + q.order + " LIMIT " + q.args.add(limit+1)
	var (
		ns, name         string
		bucket           int32
		id               [16]byte
		buckets          []int32
		ids              [][16]byte
		lastNS, lastName string
		more             bool
	)
	err := s.runSearch(ctx, q, sql, func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&ns, &name, &bucket, &id}, func() error {
			if len(ids) == limit {
				more = true
				return nil
			}
			buckets, ids = append(buckets, bucket), append(ids, id)
			lastNS, lastName = ns, name
			return nil
		})
		return err
	})
	if err != nil || len(ids) == 0 {
		return nil, "", err
	}
	next := ""
	if more {
		// The page's last name, whether or not its job is still there
		// to be read.
		next = encodeCursor([2]string{lastNS, lastName})
	}
	var jobs []*model.Job
	err = s.withGenericPlan(ctx, readJobsSQL, []any{buckets, ids}, func(rows pgx.Rows) (err error) {
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Job, error) { return scanJob(r) })
		return err
	})
	return jobs, next, err
}

// runSearch runs sql, made of search q, as the search needs: a search
// by next run with a generic plan, one of job_names without sequential
// scans and planned for its values each time.
func (s *Store) runSearch(ctx context.Context, q jobSearch, sql string, read func(pgx.Rows) error) error {
	if q.byNextRun {
		return s.withGenericPlan(ctx, sql, q.args, read)
	}
	return s.withoutSeqScan(ctx, sql, q.args, read)
}

// withGenericPlan runs sql with a generic plan, which the connection
// keeps for the statement: planned for its values, a statement over
// every partition of jobs costs 15-50 ms of planning at 256 partitions
// (more than running it), one that probes partitions by bucket prunes
// them as it runs. Only for statements whose best plan does not depend
// on their values.
func (s *Store) withGenericPlan(ctx context.Context, sql string, args []any, read func(pgx.Rows) error) error {
	return s.withSettings(ctx, []string{"plan_cache_mode = force_generic_plan"}, sql, args, read)
}

// withoutSeqScan runs sql, a search of job_names, with sequential scans
// priced out, and planned for its values every time.
//
// Under a LIMIT the planner prices a sequential scan as stopping after
// the share of the table the matches are estimated to fill, as if they
// were spread evenly; job_names is stored in namespace order, so the
// matches of one namespace lie together and the scan read every
// namespace before it (a count of handler=http,tier=critical in the
// third of four namespaces: 2 s at 10,000,000 jobs, 22 ms by the
// namespace's own index). Every search it makes has an index to use.
//
// A statement the connection has run five times may get a generic plan,
// priced for no value in particular: that count then ANDed two bitmaps
// of 300,000 and 500,000 entries (210 ms) where, for its values, the
// namespace's index finds the 1,000 in 9 ms. Planning job_names costs
// about a millisecond.
func (s *Store) withoutSeqScan(ctx context.Context, sql string, args []any, read func(pgx.Rows) error) error {
	return s.withSettings(ctx, []string{"enable_seqscan = off", "plan_cache_mode = force_custom_plan"}, sql, args, read)
}

// withSettings runs sql in a transaction of its own with the planner
// settings set (SET LOCAL), and reads its rows.
func (s *Store) withSettings(ctx context.Context, settings []string, sql string, args []any, read func(pgx.Rows) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, set := range settings {
			b.Queue("SET LOCAL " + set)
		}
		b.Queue(sql, args...)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range settings {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(rows)
	})
}

// readJobsSQL reads the jobs rows of ($1 bucket, $2 id) pairs, in the
// arrays' order: one probe of the job's own partition each.
var readJobsSQL = "SELECT " + jobRead("j") + ` FROM unnest($1::int[], $2::uuid[]) WITH ORDINALITY AS u(bucket, id, i)
	JOIN LATERAL (SELECT * FROM jobs WHERE bucket = u.bucket AND id = u.id LIMIT 1) j ON true ORDER BY u.i`

// CountJobsMatching counts the jobs matching f (its Limit and Cursor
// aside) up to JobCountCap: it returns the count and whether it is
// exact; when not, there are at least JobCountCap.
func (s *Store) CountJobsMatching(ctx context.Context, f JobFilter) (n int, exact bool, err error) {
	f.Cursor = ""
	q, err := s.searchJobs(ctx, f, false)
	if err != nil {
		return 0, false, fmt.Errorf("store: count jobs: %w", err)
	}
	if q.none {
		return 0, true, nil
	}
	sql := "SELECT count(*) FROM (SELECT 1" + q.from + " LIMIT " + strconv.Itoa(JobCountCap+1) + ") x"
	err = s.runSearch(ctx, q, sql, func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&n}, func() error { return nil })
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: count jobs: %w", err)
	}
	if n > JobCountCap {
		return JobCountCap, false, nil
	}
	return n, true, nil
}

// jobSearch is a search of jobs: its FROM and WHERE clauses, which name
// the job's row j unless names, the ORDER BY of its pages, and its
// arguments; none when nothing can match.
type jobSearch struct {
	from, order string
	args        sqlArgs
	none        bool
	// names: the search reads job_names alone (no n.* but j.*), and
	// ListJobs reads the page's jobs rows after it (listNamed).
	names bool
	// byNextRun: its pages are in (next run, namespace, name) order.
	byNextRun bool
}

// searchJobs builds the search for f; with page, it continues from f's
// cursor. It reads jobs rows only when a next-run filter needs them.
//
// The search reads job_names, whose state, handler and labels copy the
// job's (migration 37): the planner chooses among its indexes (state or
// handler within a namespace in name order, labels by GIN, or a walk of
// the primary key in name order when the filter is common enough that a
// page is found sooner so) and the rest are filters on the rows that
// index yields. Each job's row is read from its own partition (after the
// page, listNamed; or, under a next-run filter, as the search goes) by a
// LATERAL subquery with LIMIT, which cannot be flattened into a join: as
// a plain join the planner, which prices every probe as if it touched
// all N partitions, prefers hashing the whole jobs table.
//
// A next-run range is not in job_names (it changes at every firing): a
// search with one is searchByNextRun.
func (s *Store) searchJobs(ctx context.Context, f JobFilter, page bool) (jobSearch, error) {
	if !f.NextRunAfter.IsZero() || !f.NextRunBefore.IsZero() {
		return s.searchByNextRun(ctx, f, page)
	}
	var q jobSearch
	arg := q.args.add
	var c [2]string
	if page && f.Cursor != "" {
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return q, err
		}
	}
	where := q.namedWhere(f)
	if page && f.Cursor != "" {
		switch {
		case f.Namespace == "":
			where = append(where, "(n.namespace, n.name) > ("+arg(c[0])+", "+arg(c[1])+")")
		case c[0] == f.Namespace:
			where = append(where, "n.name > "+arg(c[1]))
		case c[0] > f.Namespace:
			q.none = true
			return q, nil
		}
	}
	q.from, q.names = " FROM job_names n", true
	if len(where) > 0 {
		q.from += " WHERE " + strings.Join(where, " AND ")
	}
	q.order = "n.namespace, n.name"
	return q, nil
}

// namedWhere is the conditions on job_names n for f's namespace, name
// prefix, state, handler and selector.
func (q *jobSearch) namedWhere(f JobFilter) []string {
	arg := q.args.add
	var where []string
	if f.Namespace != "" {
		where = append(where, "n.namespace = "+arg(f.Namespace))
	}
	if f.NamePrefix != "" {
		// The column's "C" collation lets LIKE 'prefix%' use the index.
		where = append(where, "n.name LIKE "+arg(likePrefix(f.NamePrefix)))
	}
	if f.State != "" {
		where = append(where, "n.state = "+arg(string(f.State)))
	}
	if f.Handler != "" {
		where = append(where, "n.handler = "+arg(f.Handler))
	}
	return append(where, selectorSQL("n.terms", f.Selector, f.Namespace, arg)...)
}

// searchByNextRun is the search of f, which has a next-run range: active
// jobs, soonest first, in (next run, namespace, name) order, so that a
// page costs what it holds rather than what the range does. Two ways:
//
//   - when f's other filters match fewer than namedProbe active jobs in
//     job_names (a small namespace, a rare label), their jobs rows are
//     probed by key and those in range sorted;
//   - else the jobs in range are walked in order, from jobs_due
//     (next_run_at, namespace, name), merged over the partitions, the
//     namespace tested on its entries and the other filters on the rows
//     until the page is full.
//
// Either runs with a generic plan (withGenericPlan): it is the same for
// any values, and planning it for its values took 25-50 ms over 256
// partitions where the walk itself takes 5.
func (s *Store) searchByNextRun(ctx context.Context, f JobFilter, page bool) (jobSearch, error) {
	q := jobSearch{byNextRun: true}
	if f.State != "" && f.State != domain.JobActive ||
		!f.NextRunAfter.IsZero() && !f.NextRunBefore.IsZero() && !f.NextRunAfter.Before(f.NextRunBefore) {
		q.none = true
		return q, nil
	}
	var (
		c     [3]string
		after time.Time
	)
	if page && f.Cursor != "" {
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return q, err
		}
		t, err := time.Parse(time.RFC3339Nano, c[0])
		if err != nil || c[1] == "" {
			return q, fmt.Errorf("%w %q", ErrBadCursor, f.Cursor)
		}
		after = t
		if f.Namespace != "" && c[1] != f.Namespace {
			// A cursor of another namespace's listing.
			return q, fmt.Errorf("%w %q", ErrBadCursor, f.Cursor)
		}
	}
	f.State = domain.JobActive
	var (
		buckets []int32
		ids     [][16]byte
		few     bool
	)
	if f.Namespace != "" || f.NamePrefix != "" || f.Handler != "" || len(f.Selector) > 0 {
		var err error
		if buckets, ids, few, err = s.fewNamed(ctx, f); err != nil {
			return q, err
		}
	}
	if few && len(ids) == 0 {
		q.none = true
		return q, nil
	}
	arg := q.args.add
	var where []string
	if few {
		q.from = " FROM unnest(" + arg(buckets) + "::int[], " + arg(ids) + "::uuid[]) AS u(bucket, id)" +
			" JOIN LATERAL (SELECT * FROM jobs WHERE bucket = u.bucket AND id = u.id AND state = 'active'" +
			nextRunSQL("", f, arg) + " LIMIT 1) j ON true"
	} else {
		// state = 'active' as the partial indexes' own predicate.
		where = []string{"j.state = 'active'" + nextRunSQL("j.", f, arg)}
		if f.Namespace != "" {
			// In jobs_due's collation, so that it is tested on the
			// index entries (equality is the same in any).
			where = append(where, `j.namespace COLLATE "C" = `+arg(f.Namespace))
		}
		if f.NamePrefix != "" {
			where = append(where, `j.name COLLATE "C" LIKE `+arg(likePrefix(f.NamePrefix)))
		}
		if f.Handler != "" {
			where = append(where, "("+handlerKeyOf("j.handler")+") = "+arg(f.Handler))
		}
		where = append(where, selectorSQL("j.labels", f.Selector, "", arg)...)
		q.from = " FROM jobs j"
	}
	// Within a namespace the order and the cursor leave it out (it is
	// fixed); jobs_due gives either order.
	if f.Namespace != "" {
		q.order = `j.next_run_at, j.name COLLATE "C"`
		if !after.IsZero() {
			where = append(where, "j.next_run_at >= "+arg(after),
				`(j.next_run_at, j.name COLLATE "C") > (`+arg(after)+", "+arg(c[2])+")")
		}
	} else {
		q.order = `j.next_run_at, j.namespace COLLATE "C", j.name COLLATE "C"`
		if !after.IsZero() {
			where = append(where, "j.next_run_at >= "+arg(after),
				`(j.next_run_at, j.namespace COLLATE "C", j.name COLLATE "C") > (`+arg(after)+", "+arg(c[1])+", "+arg(c[2])+")")
		}
	}
	if len(where) > 0 {
		q.from += " WHERE " + strings.Join(where, " AND ")
	}
	return q, nil
}

// fewNamed reads the jobs (bucket, id) that f's filters other than its
// next-run range match in job_names, planned for their values, and
// reports whether they are fewer than namedProbe: it reads at most that
// many entries of job_names' indexes.
func (s *Store) fewNamed(ctx context.Context, f JobFilter) (buckets []int32, ids [][16]byte, few bool, err error) {
	probe := namedProbe
	if s.namedProbe > 0 {
		probe = s.namedProbe
	}
	var q jobSearch
	where := q.namedWhere(f)
	var bucket int32
	var id [16]byte
	sql := "SELECT n.bucket, n.job_id FROM job_names n WHERE " + strings.Join(where, " AND ") + " LIMIT " + strconv.Itoa(probe)
	err = s.runSearch(ctx, q, sql, func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&bucket, &id}, func() error {
			buckets, ids = append(buckets, bucket), append(ids, id)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("named jobs: %w", err)
	}
	return buckets, ids, len(ids) < probe, nil
}

// nextRunSQL is the condition (" AND ...") on the next run of the jobs
// row whose columns are prefixed with p, for f's range; "" for none.
func nextRunSQL(p string, f JobFilter, arg func(any) string) string {
	var b strings.Builder
	if !f.NextRunAfter.IsZero() {
		b.WriteString(" AND " + p + "next_run_at >= " + arg(f.NextRunAfter))
	}
	if !f.NextRunBefore.IsZero() {
		b.WriteString(" AND " + p + "next_run_at < " + arg(f.NextRunBefore))
	}
	return b.String()
}

// selectorSQL is the conditions that the labels column col must meet to
// match sel, with its values passed through arg. A job without labels
// has NULL labels: it matches !=, !key and notin, nothing else. The
// positive requirements (=, exists, in) can be answered by a GIN index of
// col; the negative ones are filters on the rows others yield. With ns,
// col is job_names.terms (migration 37), whose "/ns" key holds the
// namespace: every containment test names it too, so that the index
// finds that namespace's jobs with the label, and the planner estimates
// how many there are.
func selectorSQL(col string, sel domain.Selector, ns string, arg func(any) string) []string {
	var conds []string
	contains := func(k, v string) string {
		doc := domain.Labels{k: v}
		if ns != "" {
			doc[nsTerm] = ns
		}
		return col + " @> " + arg(doc) + "::jsonb"
	}
	anyOf := func(r domain.Requirement) string {
		alts := make([]string, len(r.Values))
		for i, v := range r.Values {
			alts[i] = contains(r.Key, v)
		}
		return "(" + strings.Join(alts, " OR ") + ")"
	}
	// The key=value requirements are one containment test of a document
	// with all of them (a key required twice with different values
	// aside): the planner estimates the conjunction as one, rather than
	// multiplying two GIN conditions' estimates, which at 10,000,000 jobs
	// made it AND two large bitmaps and sort (475 ms) where a state's
	// index found the page in 1 ms.
	eq := domain.Labels{}
	for _, r := range sel {
		if r.Op != domain.OpEquals {
			continue
		}
		if v, ok := eq[r.Key]; ok && v != r.Value {
			conds = append(conds, contains(r.Key, r.Value))
			continue
		}
		eq[r.Key] = r.Value
	}
	if len(eq) > 0 {
		if ns != "" {
			eq[nsTerm] = ns
		}
		conds = append(conds, col+" @> "+arg(eq)+"::jsonb")
	}
	for _, r := range sel {
		switch r.Op {
		case domain.OpEquals:
		case domain.OpNotEquals:
			conds = append(conds, "NOT coalesce("+contains(r.Key, r.Value)+", false)")
		case domain.OpExists:
			conds = append(conds, col+" ? "+arg(r.Key))
		case domain.OpNotExists:
			conds = append(conds, "NOT coalesce("+col+" ? "+arg(r.Key)+", false)")
		case domain.OpIn:
			conds = append(conds, anyOf(r))
		case domain.OpNotIn:
			conds = append(conds, "NOT coalesce("+anyOf(r)+", false)")
		}
	}
	return conds
}

// nsTerm is the key of the namespace in job_names.terms: no label key
// can be "/ns" (a prefix before its slash is required).
const nsTerm = "/ns"

// andSQL is conds as a continuation of a WHERE clause: " AND " before
// each.
func andSQL(conds []string) string {
	var b strings.Builder
	for _, c := range conds {
		b.WriteString(" AND " + c)
	}
	return b.String()
}
