package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tock-sched/tock/store/model"
)

// CopyJobs stores many new jobs at once: what CreateJob does for each
// of them, in one transaction and two COPY statements, so it costs a
// small fraction of as many CreateJob calls. Each job gets its ID (a
// UUIDv7) when zero, its Bucket, CreatedAt and UpdatedAt (the
// transaction's time, the same for all), and defaults for Namespace
// ("default"), State (active) and Priority (normal); times are kept in
// UTC to the millisecond. The caller sets NextRunAt, as for CreateJob,
// which refuses the same jobs (ErrInvalidJob): any of them stores none.
//
// It is all or nothing: if any job's (namespace, name) or id is taken,
// by a stored job or by another job of the same call, nothing is stored
// and the error wraps ErrConflict (and names the key). CreatedAt and
// UpdatedAt are set only on success.
//
// Unlike CreateJob it sends no notification on JobsChannel: scanners
// find bulk-created jobs on their next scan of their buckets, which
// comes within the scan interval (1 s by default). A job due sooner than
// that therefore fires up to that much late, once.
//
// After a load that grows the jobs table many times over, run ANALYZE
// jobs (autovacuum does, a minute or so later): until the statistics
// catch up, Postgres may keep plans made for nearly empty partitions, and
// firing a batch then compares it with every job of its buckets.
func (s *Store) CopyJobs(ctx context.Context, jobs []*model.Job) error {
	if err := s.needBuckets(); err != nil {
		return fmt.Errorf("store: create jobs: %w", err)
	}
	if len(jobs) == 0 {
		return nil
	}
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("store: create jobs: job %d is nil", i)
		}
		if err := s.prepare(j); err != nil {
			return fmt.Errorf("store: create jobs: job %d: %w", i, err)
		}
	}

	// Rows go in key order: job_names in (namespace, name), the primary
	// key's order, so its index is appended to rather than split all
	// over; jobs by bucket, so COPY routes runs of rows to one partition
	// at a time.
	byName := slices.Clone(jobs)
	slices.SortFunc(byName, func(a, b *model.Job) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	byBucket := slices.Clone(jobs)
	slices.SortStableFunc(byBucket, func(a, b *model.Job) int { return cmp.Compare(a.Bucket, b.Bucket) })

	var created time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// CreateJob stamps rows with the transaction's time; so do we.
		if err := tx.QueryRow(ctx, "SELECT "+nowMS).Scan(&created); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"job_names"},
			[]string{"namespace", "name", "job_id", "bucket", "state", "handler", "labels"},
			pgx.CopyFromSlice(len(byName), func(i int) ([]any, error) {
				j := byName[i]
				return []any{j.Namespace, j.Name, pgUUID(j.ID), j.Bucket, j.State, j.Handler.Queue(), nullLabels(j.Labels)}, nil
			}))
		if err != nil {
			return conflictOr(err)
		}
		return conflictOr(copyJobs(ctx, tx, byBucket, created))
	})
	if err != nil {
		return fmt.Errorf("store: create %d jobs: %w", len(jobs), err)
	}
	created = created.UTC()
	for _, j := range jobs {
		j.CreatedAt, j.UpdatedAt, j.Version, j.Revision = created, created, 0, 1
	}
	return nil
}

// copyJobs writes the jobs rows of prepared jobs (sorted by bucket, so
// that COPY routes runs of rows to one partition at a time), stamped
// created.
func copyJobs(ctx context.Context, tx pgx.Tx, byBucket []*model.Job, created time.Time) error {
	if err := writeSpecs(ctx, tx, byBucket); err != nil {
		return err
	}
	if len(byBucket) <= maxInsertedJobs {
		return insertJobs(ctx, tx, byBucket, created)
	}
	if err := insertSuccessRows(ctx, tx, byBucket); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
		[]string{"id", "bucket", "namespace", "name", "schedule", "handler", "payload", "state",
			"next_run_at", "last_run_at", "retry", "timeout_ms", "priority", "created_at", "updated_at", "spec_id",
			"labels", "description", "policy"},
		pgx.CopyFromSlice(len(byBucket), func(i int) ([]any, error) {
			j := byBucket[i]
			return []any{pgUUID(j.ID), j.Bucket, j.Namespace, j.Name, j.Schedule, j.Handler, nullJSON(j.Payload), j.State,
				j.NextRunAt, j.LastRunAt, j.Retry, j.Timeout.Milliseconds(), j.Priority, created, created, pgUUID(*j.SpecID),
				nullLabels(j.Labels), nullText(j.Description), j.Policy}, nil
		}))
	return err
}

// insertSuccessRows gives each new job its job_successes row, with no
// success yet: recording moves it forward with an update (migration 22).
// insertJobs does the same in its own statement.
func insertSuccessRows(ctx context.Context, tx pgx.Tx, jobs []*model.Job) error {
	ids := make([][16]byte, len(jobs))
	for i, j := range jobs {
		ids[i] = pgUUID(j.ID)
	}
	_, err := tx.Exec(ctx, "INSERT INTO job_successes (job_id) SELECT unnest($1::uuid[])", ids)
	return err
}

// conflictOr turns a unique violation into ErrConflict, keeping
// Postgres's detail, which names the key ("Key (namespace, name)=(a, b)
// already exists.").
func conflictOr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pe.Detail)
	}
	return err
}

// maxInsertedJobs is the most jobs copyJobs writes with one INSERT over
// arrays rather than COPY. A COPY into the partitioned jobs table sets up
// its routing and opens each partition it meets, which made a COPY of the
// five or so jobs of a combined CreateJob batch cost Postgres 0.86 ms;
// for tens of thousands of rows it is the cheaper way.
const maxInsertedJobs = 64

// insertJobs is copyJobs's INSERT for a few jobs.
func insertJobs(ctx context.Context, tx pgx.Tx, jobs []*model.Job, created time.Time) error {
	n := len(jobs)
	var (
		ids, specs                     = make([][16]byte, n), make([][16]byte, n)
		buckets                        = make([]int32, n)
		namespaces, names, states, pri = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		scheds, handlers, payloads, re = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		next, last                     = make([]*time.Time, n), make([]*time.Time, n)
		timeouts                       = make([]int64, n)
		labels                         = make([][]byte, n)
		descriptions                   = make([]*string, n)
		policies                       = make([][]byte, n)
	)
	for i, j := range jobs {
		var err error
		if scheds[i], err = json.Marshal(j.Schedule); err != nil {
			return fmt.Errorf("encode schedule: %w", err)
		}
		if handlers[i], err = json.Marshal(j.Handler); err != nil {
			return fmt.Errorf("encode handler: %w", err)
		}
		if re[i], err = json.Marshal(j.Retry); err != nil {
			return fmt.Errorf("encode retry: %w", err)
		}
		if len(j.Payload) > 0 {
			payloads[i] = j.Payload
		}
		if len(j.Labels) > 0 {
			if labels[i], err = json.Marshal(j.Labels); err != nil {
				return fmt.Errorf("encode labels: %w", err)
			}
		}
		descriptions[i] = nullText(j.Description)
		if j.Policy != nil {
			if policies[i], err = json.Marshal(j.Policy); err != nil {
				return fmt.Errorf("encode policy: %w", err)
			}
		}
		ids[i], specs[i], buckets[i] = pgUUID(j.ID), pgUUID(*j.SpecID), int32(j.Bucket)
		namespaces[i], names[i], states[i], pri[i] = j.Namespace, j.Name, string(j.State), string(j.Priority)
		next[i], last[i], timeouts[i] = j.NextRunAt, j.LastRunAt, j.Timeout.Milliseconds()
	}
	_, err := tx.Exec(ctx, `
		WITH success AS (
			INSERT INTO job_successes (job_id) SELECT unnest($1::uuid[])
		)
		INSERT INTO jobs (id, bucket, namespace, name, schedule, handler, payload, state,
			next_run_at, last_run_at, retry, timeout_ms, priority, created_at, updated_at, spec_id, labels, description,
			policy)
		SELECT id, bucket, namespace, name, schedule, handler, payload, state,
			next_run_at, last_run_at, retry, timeout_ms, priority, $14, $14, spec_id, labels, description, policy
		FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], $7::jsonb[], $8::text[],
			$9::timestamptz[], $10::timestamptz[], $11::jsonb[], $12::bigint[], $13::text[], $15::uuid[],
			$16::jsonb[], $17::text[], $18::jsonb[])
			AS t(id, bucket, namespace, name, schedule, handler, payload, state,
				next_run_at, last_run_at, retry, timeout_ms, priority, spec_id, labels, description, policy)`,
		ids, buckets, namespaces, names, scheds, handlers, payloads, states,
		next, last, re, timeouts, pri, created, specs, labels, descriptions, policies)
	return err
}
