package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// DefaultResealBatch is ResealSecrets' batch size when it is given 0.
const DefaultResealBatch = 500

// ResealSecrets calls reseal on every stored handler with secret headers
// — those of job specs, which executions run, and of jobs — and writes
// back those it says it changed, batch rows per transaction, in key
// order, so that it can run on a live cluster (tockd secrets reencrypt).
// A job rewritten gets a new version, so that a change made concurrently
// from an older read is redone (store.ErrStale) rather than write the
// old values back. A spec keeps its id: its content address no longer
// matches, which only means a job saved with the new values gets a spec
// of its own. A row reseal fails on is left alone and reported.
//
// Executions hold no handler of their own since job specs exist
// (migration 7; every job has had a spec since), and secret headers came
// after them: the executions table holds no secret.
func (s *Store) ResealSecrets(ctx context.Context, batch int, reseal func(h *domain.Handler) (bool, error)) (model.ResealResult, error) {
	if batch <= 0 {
		batch = DefaultResealBatch
	}
	var res model.ResealResult
	var last uuid.UUID
	for {
		n, next, err := s.resealSpecs(ctx, last, batch, reseal, &res)
		if err != nil {
			return res, fmt.Errorf("store: reseal job specs: %w", err)
		}
		if n < batch {
			break
		}
		last = next
	}
	lastBucket, last := -1, uuid.Nil
	for {
		n, nextBucket, next, err := s.resealJobs(ctx, lastBucket, last, batch, reseal, &res)
		if err != nil {
			return res, fmt.Errorf("store: reseal jobs: %w", err)
		}
		if n < batch {
			break
		}
		lastBucket, last = nextBucket, next
	}
	return res, nil
}

// resealSpecs does one batch of job specs after id after; it returns
// how many rows it read and the last one's id.
func (s *Store) resealSpecs(ctx context.Context, after uuid.UUID, batch int, reseal func(*domain.Handler) (bool, error), res *model.ResealResult) (int, uuid.UUID, error) {
	n, last := 0, after
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id, handler FROM job_specs
			WHERE id > $1 AND handler ? 'secret_headers'
			ORDER BY id LIMIT $2`, after, batch)
		if err != nil {
			return err
		}
		var (
			ids      []uuid.UUID
			handlers [][]byte
		)
		var h domain.Handler
		_, err = pgx.ForEachRow(rows, []any{&last, &h}, func() error {
			n++
			if b, ok := resealOne(&h, "job_specs", last, reseal, res); ok {
				ids, handlers = append(ids, last), append(handlers, b)
			}
			h = domain.Handler{}
			return nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE job_specs sp SET handler = u.handler
			FROM unnest($1::uuid[], $2::jsonb[]) AS u(id, handler)
			WHERE sp.id = u.id`, ids, handlers)
		res.Specs += tag.RowsAffected()
		return err
	})
	return n, last, err
}

// resealJobs does one batch of jobs after (bucket, id), their rows
// locked; it returns how many rows it read and the last one's key.
func (s *Store) resealJobs(ctx context.Context, afterBucket int, after uuid.UUID, batch int, reseal func(*domain.Handler) (bool, error), res *model.ResealResult) (int, int, uuid.UUID, error) {
	n, lastBucket, last := 0, afterBucket, after
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT bucket, id, handler FROM jobs
			WHERE (bucket, id) > ($1, $2) AND handler ? 'secret_headers'
			ORDER BY bucket, id LIMIT $3
			FOR UPDATE`, afterBucket, after, batch)
		if err != nil {
			return err
		}
		var (
			buckets  []int
			ids      []uuid.UUID
			handlers [][]byte
		)
		var h domain.Handler
		_, err = pgx.ForEachRow(rows, []any{&lastBucket, &last, &h}, func() error {
			n++
			if b, ok := resealOne(&h, "jobs", last, reseal, res); ok {
				buckets, ids, handlers = append(buckets, lastBucket), append(ids, last), append(handlers, b)
			}
			h = domain.Handler{}
			return nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE jobs j SET handler = u.handler, version = j.version + 1
			FROM unnest($1::int[], $2::uuid[], $3::jsonb[]) AS u(bucket, id, handler)
			WHERE j.bucket = u.bucket AND j.id = u.id`, buckets, ids, handlers)
		res.Jobs += tag.RowsAffected()
		return err
	})
	return n, lastBucket, last, err
}

// resealOne reseals h, the handler of row id of table, and returns its
// new JSON if it changed; a failure is recorded in res.
func resealOne(h *domain.Handler, table string, id uuid.UUID, reseal func(*domain.Handler) (bool, error), res *model.ResealResult) ([]byte, bool) {
	res.Seen++
	changed, err := reseal(h)
	if err == nil && changed {
		b, merr := json.Marshal(h)
		if merr == nil {
			return b, true
		}
		err = merr
	}
	if err != nil {
		res.Failed = append(res.Failed, model.ResealFailure{Table: table, ID: id, Err: err})
	}
	return nil, false
}
