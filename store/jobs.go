package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// ErrBadCursor: a list cursor that this store did not hand out.
var ErrBadCursor = errors.New("invalid cursor")

// Page sizes of ListJobs and ListExecutions.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// jobColumns are the jobs columns scanJob reads (see jobRead), in its
// order.
const jobColumns = "id, bucket, namespace, name, schedule, handler, payload, state, " +
	"next_run_at, last_run_at, retry, timeout_ms, created_at, updated_at, version, priority, spec_id, labels, description, " +
	"policy, runs, paused_next_run_at, skip_before, depends, chains, revision, applyset, applied_hash"

// jobRead is the select list scanJob reads: jobColumns of the jobs row
// named alias, and the job's last success. That comes from a scalar
// subquery rather than a join, so that every plan reads it with one probe
// of job_successes' key per job returned, after a listing's LIMIT.
func jobRead(alias string) string {
	return prefixed(alias+".", jobColumns) +
		", (SELECT s.last_success_at FROM job_successes s WHERE s.job_id = " + alias + ".id)" +
		", " + alias + ".applyset IS NOT NULL AND EXISTS (SELECT 1 FROM applysets a WHERE a.namespace = " + alias +
		".namespace AND a.name = " + alias + ".applyset AND a.lock)"
}

// nowMS is the transaction's time at the millisecond precision the store
// keeps.
const nowMS = "date_trunc('milliseconds', now())"

// CreateJob stores a new job. It fills in j.ID (a UUIDv7) when zero,
// j.Bucket, j.CreatedAt and j.UpdatedAt, and defaults j.Namespace to
// "default", j.State to active and j.Priority to normal. Times are kept
// in UTC to the millisecond. A job whose (namespace, name) is taken, or
// whose id exists, is rejected with ErrConflict. A job that makes no
// sense is rejected with ErrInvalidJob before the database is asked: no
// name, an unknown priority or state, a negative timeout, an active job
// without a next run, or a paused or completed one with a next run.
//
// An active job due within notifyHorizon is announced on JobsChannel
// once it is committed, so that a scanner loads it at once; a later one
// is found by the scanners' ordinary scans.
//
// Concurrent calls are stored together, in one transaction per group
// (see jobs_combine.go); each still gets its own outcome.
func (s *Store) CreateJob(ctx context.Context, j *model.Job) error {
	if err := s.needBuckets(); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	if j.Depends != nil {
		return s.createDependent(ctx, j)
	}
	return s.createJob(ctx, j)
}

// createOne stores one job in one statement.
func (s *Store) createOne(ctx context.Context, j *model.Job) error {
	if err := s.needBuckets(); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	if err := s.prepare(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}

	if err := specOf(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	err := insertJob(ctx, s.pool, j)
	if err == nil {
		j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
		if j.State == domain.JobActive && j.NextRunAt != nil && j.NextRunAt.Before(j.CreatedAt.Add(notifyHorizon)) {
			s.notifyCommitted(ctx, j.Bucket, j.ID)
		}
		return nil
	}
	return fmt.Errorf("store: create job %s/%s: %w", j.Namespace, j.Name, err)
}

// insertJobSQL stores one job in one statement, so one round trip (and,
// alone, one implicit transaction): the name is claimed, and the job
// inserted only if the claim succeeded, with its spec and its last
// success's row. The name's row carries the job's state, handler queue
// and labels, which ListJobs searches (migration 37).
const insertJobSQL = `
	WITH spec AS (
		INSERT INTO job_specs (id, handler, payload, retry, timeout_ms) VALUES ($14, $6, $7, $11, $12)
		ON CONFLICT DO NOTHING
	), name AS (
		INSERT INTO job_names (namespace, name, job_id, bucket, state, handler, labels) VALUES ($3, $4, $1, $2, $8, $20, $15)
		ON CONFLICT DO NOTHING
		RETURNING job_id
	), success AS (
		INSERT INTO job_successes (job_id) SELECT job_id FROM name
	)
	INSERT INTO jobs (id, bucket, namespace, name, schedule, handler, payload, state,
		next_run_at, last_run_at, retry, timeout_ms, priority, created_at, updated_at, spec_id, labels, description,
		policy, paused_next_run_at, depends)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, ` + nowMS + `, ` + nowMS + `, $14, $15, $16, $17, $18, $19
	FROM name
	RETURNING created_at, updated_at, revision`

// insertJob runs insertJobSQL for prepared job j (its spec id set)
// through q, filling in its creation times; a name or id taken is
// ErrConflict.
func insertJob(ctx context.Context, q querier, j *model.Job) error {
	err := q.QueryRow(ctx, insertJobSQL,
		pgUUID(j.ID), j.Bucket, j.Namespace, j.Name, j.Schedule, j.Handler, nullJSON(j.Payload), j.State,
		j.NextRunAt, j.LastRunAt, j.Retry, j.Timeout.Milliseconds(), j.Priority, pgUUID(*j.SpecID),
		nullLabels(j.Labels), nullText(j.Description), j.Policy, msPtr(j.PausedNextRunAt), j.Depends, j.Handler.Queue(),
	).Scan(&j.CreatedAt, &j.UpdatedAt, &j.Revision)
	if errors.Is(err, pgx.ErrNoRows) || isUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// notifyCommitted tells JobsChannel listeners that a committed job
// changed, in a transaction of its own.
//
// A transaction that sends a notification holds a database-wide lock
// from the start of its commit to its end, WAL flush included, so
// notifying transactions commit one at a time: sent from CreateJob's own
// transaction, the notification held concurrent API clients to one
// commit per disk flush (about 600 jobs a second here). This one writes
// nothing worth a flush (a notification is a hint, never replayed), so it
// commits without waiting for one and holds the lock for microseconds.
// Should the process die between the two, the job is loaded by the
// scanner's next full scan instead (within FullScanEvery scans), as after
// any missed notification; a failure is therefore only logged.
func (s *Store) notifyCommitted(ctx context.Context, bucket int, id uuid.UUID) {
	_, err := s.pool.Exec(ctx, "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)",
		JobsChannel, strconv.Itoa(bucket)+":"+id.String())
	if err != nil {
		slog.WarnContext(ctx, "store: notify job change", "job_id", id, "bucket", bucket, "err", err)
	}
}

// GetJob reads the job with this id, or fails with ErrNotFound. It reads
// only the job's own partition.
func (s *Store) GetJob(ctx context.Context, id uuid.UUID) (*model.Job, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, err)
	}
	row := s.pool.QueryRow(ctx, "SELECT "+jobRead("jobs")+" FROM jobs WHERE bucket = $1 AND id = $2",
		domain.BucketOf(id, s.buckets), id)
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, err)
	}
	return j, nil
}

// prepare fills in what a new job gets from the store, for CreateJob,
// CreateJobBatch and CopyJobs: an id (UUIDv7) if it has none, its
// bucket, the default namespace, state and priority, and millisecond
// times. It refuses, with an error wrapping ErrInvalidJob, a job that
// could not be stored as it is or would never behave: one without a name,
// of an unknown priority or state, or whose state and next run disagree
// (an active job needs a next run, or no scanner would ever fire it; a
// paused or completed one has none, or a scanner would take it for due).
func (s *Store) prepare(j *model.Job) error {
	if j.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidJob)
	}
	if j.Priority == "" {
		j.Priority = domain.PriorityNormal
	}
	if !j.Priority.Valid() {
		return fmt.Errorf("%w %q: priority %q is not one of %v", ErrInvalidJob, j.Name, j.Priority, domain.Priorities)
	}
	if j.State == "" {
		j.State = domain.JobActive
	}
	switch {
	case !slices.Contains(domain.JobStates, j.State):
		return fmt.Errorf("%w %q: state %q is not one of %v", ErrInvalidJob, j.Name, j.State, domain.JobStates)
	case j.State == domain.JobActive && j.NextRunAt == nil && (j.Depends == nil || !j.Depends.Chain):
		return fmt.Errorf("%w %q: an active job needs a next run (NextRunAt); create it paused to leave it without one", ErrInvalidJob, j.Name)
	case j.State != domain.JobActive && j.NextRunAt != nil:
		return fmt.Errorf("%w %q: a %s job has no next run, got NextRunAt %s", ErrInvalidJob, j.Name, j.State,
			j.NextRunAt.UTC().Format(time.RFC3339Nano))
	case j.Timeout < 0:
		return fmt.Errorf("%w %q: timeout %s is negative", ErrInvalidJob, j.Name, j.Timeout)
	}
	if j.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new id: %w", err)
		}
		j.ID = id
	}
	if j.Namespace == "" {
		j.Namespace = "default"
	}
	j.Bucket = domain.BucketOf(j.ID, s.buckets)
	j.NextRunAt, j.LastRunAt = msPtr(j.NextRunAt), msPtr(j.LastRunAt)
	return nil
}

// UpdateJob writes j's Schedule, Handler, Payload, Retry, Timeout,
// Priority, State, NextRunAt, Labels and Description to the stored job with j's id (namespace
// and name cannot change; an empty Priority keeps the stored one), bumps
// its UpdatedAt and Version, and refreshes j from the stored row. Pausing and resuming are updates of State (and NextRunAt).
//
// The write happens only if the stored Version is still j.Version, the
// one read: if anything (a firing, another update) changed the job since,
// it fails with ErrStale and the caller reads the job again. It fails
// with ErrNotFound when there is no such job.
func (s *Store) UpdateJob(ctx context.Context, j *model.Job) error {
	if err := s.needBuckets(); err != nil {
		return fmt.Errorf("store: update job %s: %w", j.ID, err)
	}
	if j.Priority != "" && !j.Priority.Valid() {
		return fmt.Errorf("store: update job %s: priority %q is not one of %v", j.ID, j.Priority, domain.Priorities)
	}
	var got *model.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		got, err = s.updateJob(ctx, tx, j)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: update job %s: %w", j.ID, err)
	}
	*j = *got
	return nil
}

// updateJob is UpdateJob's write in tx; it returns the stored job.
func (s *Store) updateJob(ctx context.Context, tx pgx.Tx, j *model.Job) (*model.Job, error) {
	bucket := domain.BucketOf(j.ID, s.buckets)
	if err := writeSpecs(ctx, tx, []*model.Job{j}); err != nil {
		return nil, err
	}
	row := tx.QueryRow(ctx, `
		UPDATE jobs SET schedule = $3, handler = $4, payload = $5, retry = $6, timeout_ms = $7,
			state = $8, next_run_at = $9, priority = COALESCE(NULLIF($11, ''), priority),
			updated_at = `+nowMS+`, version = version + 1, revision = revision + 1, spec_id = $12, labels = $13, description = $14,
			policy = $15, paused_next_run_at = $16, skip_before = $17, depends = $18
		WHERE bucket = $1 AND id = $2 AND version = $10
		RETURNING `+jobRead("jobs"),
		bucket, j.ID, j.Schedule, j.Handler, nullJSON(j.Payload), j.Retry, j.Timeout.Milliseconds(),
		j.State, msPtr(j.NextRunAt), j.Version, j.Priority, j.SpecID, nullLabels(j.Labels), nullText(j.Description),
		j.Policy, msPtr(j.PausedNextRunAt), msPtr(j.SkipBefore), j.Depends)
	got, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM jobs WHERE bucket = $1 AND id = $2)",
			bucket, j.ID).Scan(&exists); err != nil {
			return nil, err
		}
		if exists {
			return nil, ErrStale
		}
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := s.writeEdges(ctx, tx, got); err != nil {
		return nil, err
	}
	return got, notifyJob(ctx, tx, bucket, j.ID)
}

// DeleteJob deletes the job with this id and returns its namespace, or
// fails with ErrNotFound. Its executions stay: they carry a snapshot of
// what they run. Its last success goes with it, and its own dependency
// edges. A job that other jobs depend on is not deleted: that fails with
// a *DependentsError naming them (see DeleteJobUnlinking).
func (s *Store) DeleteJob(ctx context.Context, id uuid.UUID) (namespace string, err error) {
	namespace, _, err = s.deleteJob(ctx, id, false, 0)
	return namespace, err
}

// DeleteJobAtRevision deletes the job with this id as DeleteJob (or, with
// unlink, DeleteJobUnlinking) does, only while its revision is still
// revision (0: any); else it fails with ErrRevision.
func (s *Store) DeleteJobAtRevision(ctx context.Context, id uuid.UUID, revision int64, unlink bool) (namespace string, unlinked []model.JobRef, err error) {
	return s.deleteJob(ctx, id, unlink, revision)
}

// DeleteJobUnlinking deletes the job with this id as DeleteJob does, and
// when other jobs depend on it, first removes it from their dependencies
// (their versions change); it returns them.
func (s *Store) DeleteJobUnlinking(ctx context.Context, id uuid.UUID) (namespace string, unlinked []model.JobRef, err error) {
	return s.deleteJob(ctx, id, true, 0)
}

func (s *Store) deleteJob(ctx context.Context, id uuid.UUID, unlink bool, revision int64) (namespace string, unlinked []model.JobRef, err error) {
	if err := s.needBuckets(); err != nil {
		return "", nil, fmt.Errorf("store: delete job %s: %w", id, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		namespace, unlinked, err = s.deleteJobTx(ctx, tx, id, unlink, revision)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("store: delete job %s: %w", id, err)
	}
	return namespace, unlinked, nil
}

// deleteJobTx is deleteJob's work in tx.
func (s *Store) deleteJobTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, unlink bool, revision int64) (namespace string, unlinked []model.JobRef, err error) {
	bucket := domain.BucketOf(id, s.buckets)
	// Shared: deletes go together, but not beside a write of edges
	// that could name this job.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", lockDepends); err != nil {
		return "", nil, err
	}
	if unlink {
		var err error
		if unlinked, err = s.unlinkDependents(ctx, tx, id); err != nil {
			return "", nil, err
		}
	} else if deps, err := dependentsOf(ctx, tx, id); err != nil {
		return "", nil, err
	} else if len(deps) > 0 {
		return "", nil, &DependentsError{Dependents: deps}
	}
	// At the revision asked for, if any: else the transaction, and
	// any unlinking in it, rolls back.
	err = tx.QueryRow(ctx, "DELETE FROM jobs WHERE bucket = $1 AND id = $2 AND ($3 = 0 OR revision = $3) RETURNING namespace",
		bucket, id, revision).Scan(&namespace)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM jobs WHERE bucket = $1 AND id = $2)", bucket, id).Scan(&exists); err != nil {
			return "", nil, err
		}
		if exists {
			return "", nil, ErrRevision
		}
		return "", nil, ErrNotFound
	}
	if err != nil {
		return "", nil, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM job_names WHERE job_id = $1", id); err != nil {
		return "", nil, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM job_successes WHERE job_id = $1", id); err != nil {
		return "", nil, err
	}
	rows, err := tx.Query(ctx, "DELETE FROM job_dependencies WHERE downstream_id = $1 AND chain RETURNING upstream_id", id)
	if err != nil {
		return "", nil, err
	}
	ups, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return "", nil, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM job_dependencies WHERE downstream_id = $1", id); err != nil {
		return "", nil, err
	}
	if err := s.markChains(ctx, tx, ups); err != nil {
		return "", nil, err
	}
	return namespace, unlinked, notifyJob(ctx, tx, bucket, id)
}

// notifyJob tells JobsChannel listeners, on commit, that a job changed.
func notifyJob(ctx context.Context, tx pgx.Tx, bucket int, id uuid.UUID) error {
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", JobsChannel, strconv.Itoa(bucket)+":"+id.String())
	return err
}

// scanJob reads a row of jobRead.
func scanJob(row pgx.Row) (*model.Job, error) {
	var (
		j           model.Job
		timeoutMS   int64
		payload     []byte
		description *string
		applySet    *string
		appliedHash *string
	)
	err := row.Scan(&j.ID, &j.Bucket, &j.Namespace, &j.Name, &j.Schedule, &j.Handler, &payload,
		&j.State, &j.NextRunAt, &j.LastRunAt, &j.Retry, &timeoutMS, &j.CreatedAt, &j.UpdatedAt, &j.Version,
		&j.Priority, &j.SpecID, &j.Labels, &description, &j.Policy, &j.FiredCount, &j.PausedNextRunAt, &j.SkipBefore,
		&j.Depends, &j.Chains, &j.Revision, &applySet, &appliedHash, &j.LastSuccessAt, &j.SetLocked)
	if err != nil {
		return nil, err
	}
	if description != nil {
		j.Description = *description
	}
	if applySet != nil {
		j.ApplySet = *applySet
	}
	if appliedHash != nil {
		j.AppliedHash = *appliedHash
	}
	if payload != nil {
		j.Payload = json.RawMessage(payload)
	}
	j.Timeout = msDuration(timeoutMS)
	j.NextRunAt, j.LastRunAt = utcPtr(j.NextRunAt), utcPtr(j.LastRunAt)
	j.PausedNextRunAt, j.SkipBefore = utcPtr(j.PausedNextRunAt), utcPtr(j.SkipBefore)
	j.LastSuccessAt = utcPtr(j.LastSuccessAt)
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return &j, nil
}

// specNamespace names job spec ids (uuid.NewSHA1).
var specNamespace = uuid.MustParse("6f2b1c3e-8d4a-5b7c-9e0f-1a2b3c4d5e6f")

// specOf sets j.SpecID: the id of what j's executions run (handler,
// payload, retry policy, timeout), a hash of that content, so that equal
// specs share one job_specs row and a spec row never changes.
func specOf(j *model.Job) error {
	h, err := json.Marshal(j.Handler)
	if err != nil {
		return fmt.Errorf("encode handler: %w", err)
	}
	r, err := json.Marshal(j.Retry)
	if err != nil {
		return fmt.Errorf("encode retry policy: %w", err)
	}
	var b []byte
	for _, part := range [][]byte{h, j.Payload, r, []byte(strconv.FormatInt(j.Timeout.Milliseconds(), 10))} {
		b = strconv.AppendInt(b, int64(len(part)), 10)
		b = append(b, ':')
		b = append(b, part...)
	}
	id := uuid.NewSHA1(specNamespace, b)
	j.SpecID = &id
	return nil
}

// writeSpecs stores the specs of jobs (setting each SpecID), one row per
// distinct spec; rows that exist are left alone: a spec is immutable.
func writeSpecs(ctx context.Context, tx pgx.Tx, jobs []*model.Job) error {
	seen := map[uuid.UUID]bool{}
	var (
		ids             []uuid.UUID
		handlers, retry [][]byte
		payloads        [][]byte
		timeouts        []int64
	)
	for _, j := range jobs {
		if err := specOf(j); err != nil {
			return err
		}
		if seen[*j.SpecID] {
			continue
		}
		seen[*j.SpecID] = true
		h, _ := json.Marshal(j.Handler)
		r, _ := json.Marshal(j.Retry)
		var p []byte
		if len(j.Payload) > 0 {
			p = j.Payload
		}
		ids, handlers, retry = append(ids, *j.SpecID), append(handlers, h), append(retry, r)
		payloads, timeouts = append(payloads, p), append(timeouts, j.Timeout.Milliseconds())
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO job_specs (id, handler, payload, retry, timeout_ms)
		SELECT * FROM unnest($1::uuid[], $2::jsonb[], $3::jsonb[], $4::jsonb[], $5::bigint[])
		ON CONFLICT DO NOTHING`, ids, handlers, payloads, retry, timeouts)
	if err != nil {
		return fmt.Errorf("write job specs: %w", err)
	}
	return nil
}

// prefixed qualifies every column of a comma-separated list.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

// likePrefix is a LIKE pattern matching strings that start with p.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// pageSize applies the default and the maximum to a requested limit.
func pageSize(n int) int {
	switch {
	case n <= 0:
		return defaultLimit
	case n > maxLimit:
		return maxLimit
	}
	return n
}

// encodeCursor makes an opaque cursor of v.
func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxCursor bounds a cursor's length: the longest encodeCursor makes, of
// a job's namespace and name, is under 600 characters.
const maxCursor = 1024

// decodeCursor reads a cursor made by encodeCursor into v. Anything else
// fails with ErrBadCursor before it reaches a query: the cursor must be
// exactly what encodeCursor makes of the value it decodes to (a forged
// one is not, unless it was made the same way), and that value must hold
// no U+0000, which Postgres would refuse. Cursors are checked rather
// than signed: they only say where a page starts, in terms the client may
// see anyway, and a signing key would have to be shared by every node.
func decodeCursor(c string, v any) error {
	if len(c) > maxCursor {
		return fmt.Errorf("%w: %d characters long", ErrBadCursor, len(c))
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || json.Unmarshal(b, v) != nil || encodeCursor(v) != c || bytes.Contains(b, []byte(`\u0000`)) {
		return fmt.Errorf("%w %q", ErrBadCursor, c)
	}
	return nil
}

// GetJobNamespace is the namespace of the job with id (a job never moves);
// ErrNotFound if there is none.
func (s *Store) GetJobNamespace(ctx context.Context, id uuid.UUID) (string, error) {
	if err := s.needBuckets(); err != nil {
		return "", fmt.Errorf("store: job %s namespace: %w", id, err)
	}
	var ns string
	err := s.pool.QueryRow(ctx, `SELECT namespace FROM jobs WHERE bucket = $1 AND id = $2`,
		domain.BucketOf(id, s.buckets), id).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: job %s namespace: %w", id, err)
	}
	return ns, nil
}

// CountJobs counts the jobs of namespace, reading at most limit of
// them (a quota check needs to know only whether there are that many).
func (s *Store) CountJobs(ctx context.Context, namespace string, limit int) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM job_names WHERE namespace = $1 LIMIT $2) x`,
		namespace, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count jobs of %s: %w", namespace, err)
	}
	return n, nil
}
