package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Notifications of CreateJobBatch. A scanner loads the jobs due within its
// look-ahead (a few seconds) and then reads only jobs coming due after
// what it has loaded, so a new job due sooner than that must be announced
// or it waits for the next full scan. notifyHorizon is well beyond any
// look-ahead; jobs due later are found by the ordinary scans.
const (
	notifyHorizon = time.Minute
	// notifyEach is how many due-soon jobs of a batch are announced one by
	// one (the scanner reads each at once, as after CreateJob); a batch
	// with more asks the scanners for one full scan instead, which costs
	// them one query whatever the batch's size.
	notifyEach = 32
	// fullScanPayload on JobsChannel makes every scanner re-read the whole
	// look-ahead of its buckets on its next scan (within its scan
	// interval, a second by default).
	fullScanPayload = "*"
)

// CreateJobBatch stores new jobs in one transaction and says, job by job,
// which were stored: errs[i] is nil when jobs[i] was stored, or says why
// it was not, and the others are stored all the same. A job whose
// (namespace, name) or id is taken, by a stored job, by a job another
// transaction is storing at the same time, or by an earlier job of the
// same call, gets an error wrapping ErrConflict; a job CreateJob would
// refuse before touching the database (ErrInvalidJob: no name, an active
// job without a next run, …) gets that error. Each job is prepared as CreateJob prepares it (id, bucket,
// defaults, millisecond times); CreatedAt and UpdatedAt are the
// transaction's time and are set on the stored jobs only.
//
// The returned error is for the call as a whole (the database failed):
// then nothing was stored.
//
// Unlike CopyJobs it tells the scanners about jobs due within
// notifyHorizon, so they fire on time: one by one when there are few, as
// CreateJob does, or with one full-scan request on JobsChannel, in which
// case they may fire up to a scan interval (a second) late.
func (s *Store) CreateJobBatch(ctx context.Context, jobs []*model.Job) ([]error, error) {
	if err := s.needBuckets(); err != nil {
		return nil, fmt.Errorf("store: create job batch: %w", err)
	}
	errs, todo := s.prepareBatch(jobs)
	if len(todo) == 0 {
		return errs, nil
	}
	// Names go in (namespace, name) order, the primary key's: its index
	// is appended to rather than split all over, and two batches that
	// share names lock them in the same order, so they wait for each
	// other instead of deadlocking.
	slices.SortFunc(todo, func(a, b int) int {
		return cmp.Or(cmp.Compare(jobs[a].Namespace, jobs[b].Namespace), cmp.Compare(jobs[a].Name, jobs[b].Name))
	})
	var (
		created  time.Time
		inserted map[uuid.UUID]bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if inserted, created, err = insertNames(ctx, tx, jobs, todo); err != nil || len(inserted) == 0 {
			return err
		}
		stored := make([]*model.Job, 0, len(inserted))
		for _, i := range todo {
			if inserted[jobs[i].ID] {
				stored = append(stored, jobs[i])
			}
		}
		slices.SortStableFunc(stored, func(a, b *model.Job) int { return cmp.Compare(a.Bucket, b.Bucket) })
		if err := copyJobs(ctx, tx, stored, created); err != nil {
			return conflictOr(err)
		}
		return notifyBatch(ctx, tx, stored, created.Add(notifyHorizon))
	})
	if err != nil {
		return nil, fmt.Errorf("store: create job batch of %d: %w", len(todo), err)
	}
	created = created.UTC()
	for _, i := range todo {
		j := jobs[i]
		if !inserted[j.ID] {
			errs[i] = fmt.Errorf("store: create job %s/%s: %w", j.Namespace, j.Name, ErrConflict)
			continue
		}
		j.CreatedAt, j.UpdatedAt, j.Version, j.Revision = created, created, 0, 1
	}
	return errs, nil
}

// prepareBatch checks and completes each job of a batch (prepare) and
// refuses a second job with a name or an id the batch already has. It
// returns each job's error and the indexes of the jobs to insert.
func (s *Store) prepareBatch(jobs []*model.Job) (errs []error, todo []int) {
	errs = make([]error, len(jobs))
	type key struct{ ns, name string }
	names := make(map[key]int, len(jobs))
	ids := make(map[uuid.UUID]int, len(jobs))
	todo = make([]int, 0, len(jobs))
	for i, j := range jobs {
		if j == nil {
			errs[i] = errors.New("store: nil job")
			continue
		}
		if j.Depends != nil {
			errs[i] = fmt.Errorf("store: create job %s/%s: %w: a job with dependencies is created alone (CreateJob)", j.Namespace, j.Name, ErrInvalidJob)
			continue
		}
		if err := s.prepare(j); err != nil {
			errs[i] = fmt.Errorf("store: create job: %w", err)
			continue
		}
		k := key{j.Namespace, j.Name}
		if first, ok := names[k]; ok {
			errs[i] = fmt.Errorf("store: create job %s/%s: %w: job %d of the batch has this name", j.Namespace, j.Name, ErrConflict, first)
			continue
		}
		if first, ok := ids[j.ID]; ok {
			errs[i] = fmt.Errorf("store: create job %s: %w: job %d of the batch has this id", j.ID, ErrConflict, first)
			continue
		}
		names[k], ids[j.ID] = i, i
		todo = append(todo, i)
	}
	return errs, todo
}

// insertNames inserts the names of jobs[todo] (in that order) and returns
// the ids whose name (and id) was free, and the database's time of the
// insert. A taken name (or id) is skipped, not an error; a name another
// transaction is inserting makes this one wait for its outcome.
func insertNames(ctx context.Context, tx pgx.Tx, jobs []*model.Job, todo []int) (map[uuid.UUID]bool, time.Time, error) {
	var (
		nsArg, nameArg     []string
		idArg              [][16]byte // see pgUUID
		bucketArg          []int32
		stateArg, queueArg []string
		labelArg           [][]byte
	)
	for _, i := range todo {
		j := jobs[i]
		nsArg, nameArg = append(nsArg, j.Namespace), append(nameArg, j.Name)
		idArg, bucketArg = append(idArg, pgUUID(j.ID)), append(bucketArg, int32(j.Bucket))
		stateArg, queueArg = append(stateArg, string(j.State)), append(queueArg, j.Handler.Queue())
		var l []byte
		if len(j.Labels) > 0 {
			l, _ = json.Marshal(j.Labels) // a map of strings
		}
		labelArg = append(labelArg, l)
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO job_names (namespace, name, job_id, bucket, state, handler, labels)
		SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::int[], $5::text[], $6::text[], $7::jsonb[])
		ON CONFLICT DO NOTHING
		RETURNING job_id, `+nowMS, nsArg, nameArg, idArg, bucketArg, stateArg, queueArg, labelArg)
	if err != nil {
		return nil, time.Time{}, err
	}
	inserted := make(map[uuid.UUID]bool, len(todo))
	var (
		id      [16]byte
		created time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &created}, func() error {
		inserted[uuid.UUID(id)] = true
		return nil
	}); err != nil {
		return nil, time.Time{}, err
	}
	return inserted, created, nil
}

// notifyBatch tells JobsChannel listeners, on commit, about the active
// jobs of a batch due before horizon: each one when there are at most
// notifyEach, else a full scan.
func notifyBatch(ctx context.Context, tx pgx.Tx, jobs []*model.Job, horizon time.Time) error {
	var payloads []string
	for _, j := range jobs {
		if j.State != domain.JobActive || j.NextRunAt == nil || j.NextRunAt.After(horizon) {
			continue
		}
		if len(payloads) == notifyEach {
			payloads = []string{fullScanPayload}
			break
		}
		payloads = append(payloads, strconv.Itoa(j.Bucket)+":"+j.ID.String())
	}
	if len(payloads) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", JobsChannel, payloads)
	return err
}
