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

// lockApplySets serialises the applies of one set (the key's second half
// is the set's hash): two applies of a set never interleave, and a plan
// read beside an apply sees it whole or not at all.
const lockApplySets int32 = 0x746f636b // "tock", with hashtext(namespace/name)

// ApplySetTx is one transaction over an apply set (ApplySet): it reads
// the set and the jobs it concerns and, when opened to write, changes them
// together; nothing of it is visible to others until ApplySet commits.
type ApplySetTx struct {
	s         *Store
	tx        pgx.Tx
	namespace string
	name      string
	write     bool
}

// ApplySet runs fn in one transaction over the apply set name of
// namespace. To write, the transaction first takes the set's lock (one
// apply of a set at a time) and Jobs locks the rows it reads; fn's error
// rolls everything back and is returned as it is. Without write the
// transaction is read only.
func (s *Store) ApplySet(ctx context.Context, namespace, name string, write bool, fn func(ctx context.Context, a *ApplySetTx) error) error {
	if err := s.needBuckets(); err != nil {
		return fmt.Errorf("store: apply set %s/%s: %w", namespace, name, err)
	}
	opts := pgx.TxOptions{}
	if !write {
		opts.AccessMode = pgx.ReadOnly
	}
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		if write {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", lockApplySets, namespace+"/"+name); err != nil {
				return fmt.Errorf("store: lock apply set %s/%s: %w", namespace, name, err)
			}
		}
		return fn(ctx, &ApplySetTx{s: s, tx: tx, namespace: namespace, name: name, write: write})
	})
}

// Set reads the set's record; a set never applied has Revision 0.
func (a *ApplySetTx) Set(ctx context.Context) (model.ApplySet, error) {
	set := model.ApplySet{Namespace: a.namespace, Name: a.name}
	var commit *string
	err := a.tx.QueryRow(ctx, `SELECT revision, lock, commit_id, applied_at, applied_by FROM applysets
		WHERE namespace = $1 AND name = $2`, a.namespace, a.name).Scan(&set.Revision, &set.Lock, &commit, &set.AppliedAt, &set.AppliedBy)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return set, nil
	case err != nil:
		return set, fmt.Errorf("store: read apply set %s/%s: %w", a.namespace, a.name, err)
	}
	if commit != nil {
		set.Commit = *commit
	}
	set.AppliedAt = set.AppliedAt.UTC()
	return set, nil
}

// Jobs reads the set's members and the jobs of its namespace called by
// names (members or not), in (bucket, id) order; to write, it locks
// them until the transaction ends, so no firing or change through the
// API gets in between. It finds them first (the members by the
// applyset index, the others by job_names), then reads them naming
// their buckets, so that only their partitions are read.
func (a *ApplySetTx) Jobs(ctx context.Context, names []string) ([]*model.Job, error) {
	rows, err := a.tx.Query(ctx, `SELECT bucket, id FROM jobs WHERE namespace = $1 AND applyset = $2
		UNION SELECT bucket, job_id FROM job_names WHERE namespace = $1 AND name = ANY($3)`, a.namespace, a.name, names)
	if err != nil {
		return nil, fmt.Errorf("store: read apply set %s/%s: %w", a.namespace, a.name, err)
	}
	var (
		buckets []int32
		ids     []uuid.UUID
		b       int32
		id      uuid.UUID
	)
	if _, err := pgx.ForEachRow(rows, []any{&b, &id}, func() error {
		buckets, ids = append(buckets, b), append(ids, id)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read apply set %s/%s: %w", a.namespace, a.name, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// An id lives in one bucket, so the two lists select exactly the
	// pairs found.
	sql := "SELECT " + jobRead("jobs") + ` FROM jobs WHERE bucket = ANY($1) AND id = ANY($2) ORDER BY bucket, id`
	if a.write {
		sql += " FOR UPDATE OF jobs"
	}
	rows, err = a.tx.Query(ctx, sql, buckets, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read apply set %s/%s: %w", a.namespace, a.name, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Job, error) { return scanJob(r) })
	if err != nil {
		return nil, fmt.Errorf("store: read apply set %s/%s: %w", a.namespace, a.name, err)
	}
	return jobs, nil
}

// JobRef names the job called name in namespace, as the transaction sees
// it (jobs it created included), or fails with ErrNotFound.
func (a *ApplySetTx) JobRef(ctx context.Context, namespace, name string) (model.JobRef, error) {
	return jobRefOf(ctx, a.tx, namespace, name)
}

// Create stores a new job as CreateJob does (j.ID may be set beforehand,
// so that other jobs of the transaction can depend on it), without its
// dependencies: WriteEdges writes them once every job exists.
func (a *ApplySetTx) Create(ctx context.Context, j *model.Job) error {
	if err := a.s.prepare(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	if err := specOf(j); err != nil {
		return fmt.Errorf("store: create job: %w", err)
	}
	if err := insertJob(ctx, a.tx, j); err != nil {
		return fmt.Errorf("store: create job %s/%s: %w", j.Namespace, j.Name, err)
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return nil
}

// Update writes j as UpdateJob does (its edges too), and refreshes j.
func (a *ApplySetTx) Update(ctx context.Context, j *model.Job) error {
	got, err := a.s.updateJob(ctx, a.tx, j)
	if err != nil {
		return fmt.Errorf("store: update job %s: %w", j.ID, err)
	}
	*j = *got
	return nil
}

// WriteEdges writes j's dependency edges (see UpdateJob): an unknown
// upstream is an *UnknownUpstreamError, a cycle a *CycleError.
func (a *ApplySetTx) WriteEdges(ctx context.Context, j *model.Job) error {
	return a.s.writeEdges(ctx, a.tx, j)
}

// Delete deletes job id as DeleteJobAtRevision does.
func (a *ApplySetTx) Delete(ctx context.Context, id uuid.UUID, revision int64) error {
	_, _, err := a.s.deleteJobTx(ctx, a.tx, id, false, revision)
	if err != nil {
		return fmt.Errorf("store: delete job %s: %w", id, err)
	}
	return nil
}

// Own makes jobs the set's members, each with its applied hash. It
// changes neither their version nor their revision: whom a job belongs
// to is not part of what it runs.
func (a *ApplySetTx) Own(ctx context.Context, jobs []*model.Job, hashes []string) error {
	ids, buckets := make([][16]byte, len(jobs)), make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], buckets[i] = pgUUID(j.ID), int32(j.Bucket)
	}
	if _, err := a.tx.Exec(ctx, `UPDATE jobs SET applyset = $1, applied_hash = t.h
		FROM unnest($2::uuid[], $3::int[], $4::text[]) AS t(id, b, h)
		WHERE jobs.bucket = t.b AND jobs.id = t.id AND jobs.namespace = $5
		  AND (jobs.applyset IS DISTINCT FROM $1 OR jobs.applied_hash IS DISTINCT FROM t.h)`,
		a.name, ids, buckets, hashes, a.namespace); err != nil {
		return fmt.Errorf("store: own jobs of apply set %s/%s: %w", a.namespace, a.name, err)
	}
	return nil
}

// Announce tells the scanners, on commit, of the jobs Create stored that
// are due within a minute, as CreateJobBatch does (Update announces its
// own).
func (a *ApplySetTx) Announce(ctx context.Context, created []*model.Job) error {
	return notifyBatch(ctx, a.tx, created, time.Now().Add(notifyHorizon))
}

// Save records an apply of the set: one more revision, its lock, commit
// and applier, at the transaction's time; it returns the new record.
func (a *ApplySetTx) Save(ctx context.Context, lock bool, commit, by string) (model.ApplySet, error) {
	set := model.ApplySet{Namespace: a.namespace, Name: a.name, Lock: lock, Commit: commit, AppliedBy: by}
	err := a.tx.QueryRow(ctx, `INSERT INTO applysets (namespace, name, revision, lock, commit_id, applied_at, applied_by)
		VALUES ($1, $2, 1, $3, $4, now(), $5)
		ON CONFLICT (namespace, name) DO UPDATE SET revision = applysets.revision + 1, lock = $3, commit_id = $4,
			applied_at = now(), applied_by = $5
		RETURNING revision, applied_at`, a.namespace, a.name, lock, nullText(commit), by).Scan(&set.Revision, &set.AppliedAt)
	if err != nil {
		return set, fmt.Errorf("store: save apply set %s/%s: %w", a.namespace, a.name, err)
	}
	set.AppliedAt = set.AppliedAt.UTC()
	return set, nil
}

// Audit writes entries to the audit trail in the transaction: they are
// there if and only if the apply is.
func (a *ApplySetTx) Audit(ctx context.Context, entries []model.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if _, err := a.tx.CopyFrom(ctx, pgx.Identifier{"audit_log"}, auditColumns, pgx.CopyFromRows(auditRows(entries))); err != nil {
		return fmt.Errorf("store: write audit: %w", err)
	}
	return nil
}

// ListApplySets lists the apply sets of namespaces (nil: all), by
// namespace and name, with how many members each has.
func (s *Store) ListApplySets(ctx context.Context, namespaces []string) ([]model.ApplySet, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.namespace, a.name, a.revision, a.lock, COALESCE(a.commit_id, ''), a.applied_at, a.applied_by,
			(SELECT count(*) FROM jobs j WHERE j.namespace = a.namespace AND j.applyset = a.name)
		FROM applysets a WHERE $1::text[] IS NULL OR a.namespace = ANY($1)
		ORDER BY a.namespace, a.name`, namespaces)
	if err != nil {
		return nil, fmt.Errorf("store: list apply sets: %w", err)
	}
	sets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.ApplySet, error) {
		var set model.ApplySet
		err := r.Scan(&set.Namespace, &set.Name, &set.Revision, &set.Lock, &set.Commit, &set.AppliedAt, &set.AppliedBy, &set.Members)
		set.AppliedAt = set.AppliedAt.UTC()
		return set, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list apply sets: %w", err)
	}
	return sets, nil
}
