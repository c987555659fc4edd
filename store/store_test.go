package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

const testBuckets = 16

// newStore opens a migrated, initialised store on a fresh database.
func newStore(t testing.TB) *Store { return newStoreWith(t, testBuckets) }

// newStoreWith is newStore with a cluster of buckets buckets.
func newStoreWith(t testing.TB, buckets int) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, testenv.PostgresFrom(t, testSchema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if n, err := s.Init(ctx, buckets); err != nil || n != buckets {
		t.Fatalf("Init = %d, %v; want %d", n, err, buckets)
	}
	return s
}

// testSchema is storetest.Schema, which this package's own tests cannot
// import: newStore's databases are copies of a template migrated once.
var testSchema = testenv.Schema{Migrations: Migrations(), Migrate: func(ctx context.Context, url string) error {
	s, err := Open(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}}

// idInBucket is a new job id that falls in bucket b.
func idInBucket(b int) uuid.UUID {
	for {
		id := uuid.Must(uuid.NewV7())
		if domain.BucketOf(id, testBuckets) == b {
			return id
		}
	}
}

// testJob is a job due at next (nil: not scheduled), not yet stored.
// testJob is an active job due at next; nil is a run a year ahead, which
// no test reaches (the store creates no active job without a next run).
func testJob(name string, next *time.Time) *model.Job {
	if next == nil {
		next = ptr(baseTime().Add(365 * 24 * time.Hour))
	}
	return &model.Job{
		Name:      name,
		Schedule:  schedule.Spec{Cron: "*/5 * * * * *", Timezone: "Europe/Berlin"},
		Handler:   domain.Handler{Type: domain.HandlerHTTP, URL: "http://example.test/hook", Headers: map[string]string{"X-A": "b"}},
		Payload:   json.RawMessage(`{"n": 1}`),
		NextRunAt: next,
		Retry:     domain.RetryPolicy{MaxAttempts: 3, InitialBackoff: "1s"},
		Timeout:   1500 * time.Millisecond,
	}
}

// setState gives stored job id a state and next run the store does not
// create (a paused job that kept a stale next run, say) straight in its
// row, so that a test can check what readers make of it.
func setState(t testing.TB, s *Store, id uuid.UUID, state domain.JobState, next *time.Time) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), "UPDATE jobs SET state = $2, next_run_at = $3 WHERE id = $1",
		id, state, next); err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t testing.TB, s *Store, j *model.Job) *model.Job {
	t.Helper()
	if err := s.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// baseTime is a second near now, so that rows land in daily partitions.
func baseTime() time.Time { return time.Now().UTC().Truncate(time.Second) }

func ptr[T any](v T) *T { return &v }

func count(t testing.TB, s *Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.Postgres(t)
	// Three nodes starting at once on an empty database.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			s, err := Open(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				errs <- err
				return
			}
			_, err = s.Init(ctx, testBuckets)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	files, _ := filepath.Glob("migrations/*.sql")
	if n := count(t, s, "SELECT count(*) FROM goose_db_version WHERE version_id > 0"); n != len(files) || n == 0 {
		t.Fatalf("%d migrations recorded, want %d (one per file, once)", n, len(files))
	}
	// Init keeps the first N and creates nothing twice.
	n, err := s.Init(ctx, 64)
	if err != nil || n != testBuckets || s.Buckets() != testBuckets {
		t.Fatalf("Init(64) = %d, %v (Buckets %d); want stored %d", n, err, s.Buckets(), testBuckets)
	}
	if n := count(t, s, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'jobs'::regclass"); n != testBuckets {
		t.Fatalf("%d jobs partitions, want %d", n, testBuckets)
	}
}

func TestJobCRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	next := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	j := testJob("nightly", &next)
	mustCreate(t, s, j)
	if j.ID == uuid.Nil || j.ID.Version() != 7 || j.Namespace != "default" || j.State != domain.JobActive {
		t.Fatalf("defaults not filled: %+v", j)
	}
	if j.Bucket != domain.BucketOf(j.ID, testBuckets) || j.CreatedAt.IsZero() || j.CreatedAt.Location() != time.UTC {
		t.Fatalf("bucket or created_at wrong: %+v", j)
	}
	got, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextRunAt.Equal(next.Truncate(time.Millisecond)) || got.NextRunAt.Location() != time.UTC {
		t.Fatalf("next_run_at %v, want %v in UTC to the ms", got.NextRunAt, next)
	}
	if got.Name != "nightly" || got.Schedule != j.Schedule || got.Handler.URL != j.Handler.URL ||
		got.Handler.Headers["X-A"] != "b" || got.Retry != j.Retry || got.Timeout != j.Timeout ||
		string(got.Payload) != `{"n": 1}` || got.LastRunAt != nil || !got.CreatedAt.Equal(j.CreatedAt) {
		t.Fatalf("got %+v, want %+v", got, j)
	}

	// Pause: update state and clear next_run_at.
	got.State, got.NextRunAt, got.Payload = domain.JobPaused, nil, nil
	before := got.UpdatedAt
	if err := s.UpdateJob(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt.Before(before) {
		t.Fatalf("updated_at went back: %v < %v", got.UpdatedAt, before)
	}
	again, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.State != domain.JobPaused || again.NextRunAt != nil || again.Payload != nil || !again.UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("after update: %+v", again)
	}
	if err := s.UpdateJob(ctx, &model.Job{ID: uuid.Must(uuid.NewV7()), State: domain.JobActive}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing job: %v, want ErrNotFound", err)
	}

	if _, err := s.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetJob(ctx, j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteJob(ctx, j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	// The name is free again.
	mustCreate(t, s, testJob("nightly", nil))
}

func TestCreateJobConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	mustCreate(t, s, testJob("report", nil))
	err := s.CreateJob(ctx, testJob("report", nil))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate name: %v, want ErrConflict", err)
	}
	other := testJob("report", nil)
	other.Namespace = "billing"
	mustCreate(t, s, other)
	dupID := testJob("another", nil)
	dupID.ID = other.ID
	if err := s.CreateJob(ctx, dupID); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate id: %v, want ErrConflict", err)
	}
	if n := count(t, s, "SELECT count(*) FROM jobs"); n != 2 {
		t.Fatalf("%d jobs stored, want 2", n)
	}
}

func TestJobPartitionRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	for b := range testBuckets {
		j := testJob(fmt.Sprintf("job-%d", b), nil)
		j.ID = idInBucket(b)
		mustCreate(t, s, j)
		var table string
		if err := s.Pool().QueryRow(ctx, "SELECT tableoid::regclass::text FROM jobs WHERE id = $1", j.ID).Scan(&table); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("jobs_b%03d", b); table != want || j.Bucket != b {
			t.Fatalf("job in bucket %d (stored %d) is in %s, want %s", b, j.Bucket, table, want)
		}
	}
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	// 23 jobs in "default" and 5 in "ops", some paused; one name with LIKE
	// metacharacters.
	var want []string
	for i := range 23 {
		j := testJob(fmt.Sprintf("etl-%02d", i), nil)
		if i%4 == 0 {
			j.State, j.NextRunAt = domain.JobPaused, nil
		}
		mustCreate(t, s, j)
		want = append(want, "default/"+j.Name)
	}
	for i := range 5 {
		j := testJob(fmt.Sprintf("backup_%d", i), nil)
		j.Namespace = "ops"
		mustCreate(t, s, j)
		want = append(want, "ops/"+j.Name)
	}
	mustCreate(t, s, &model.Job{Namespace: "ops", Name: "backupz", Handler: domain.Handler{Type: "nats", Subject: "x"},
		NextRunAt: ptr(baseTime().Add(time.Hour))})
	want = append(want, "ops/backupz")

	list := func(f JobFilter) []string {
		t.Helper()
		var names []string
		for page := 0; ; page++ {
			jobs, next, err := s.ListJobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) > f.Limit && f.Limit > 0 {
				t.Fatalf("page of %d, limit %d", len(jobs), f.Limit)
			}
			for _, j := range jobs {
				names = append(names, j.Namespace+"/"+j.Name)
			}
			if next == "" {
				return names
			}
			if page > 100 {
				t.Fatal("endless pagination")
			}
			f.Cursor = next
		}
	}
	if got := list(JobFilter{Limit: 7}); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("all jobs in pages of 7:\n got %v\nwant %v", got, want)
	}
	if got := list(JobFilter{}); len(got) != len(want) {
		t.Fatalf("default page: %d jobs, want %d", len(got), len(want))
	}
	if got := list(JobFilter{State: domain.JobPaused, Limit: 2}); strings.Join(got, " ") !=
		"default/etl-00 default/etl-04 default/etl-08 default/etl-12 default/etl-16 default/etl-20" {
		t.Fatalf("paused: %v", got)
	}
	if got := list(JobFilter{Namespace: "default", NamePrefix: "etl-1", Limit: 3}); len(got) != 10 || got[0] != "default/etl-10" {
		t.Fatalf("prefix etl-1: %v", got)
	}
	// "_" is literal, not a wildcard.
	if got := list(JobFilter{NamePrefix: "backup_"}); len(got) != 5 {
		t.Fatalf("prefix backup_ across namespaces: %v", got)
	}
	if got := list(JobFilter{Namespace: "ops", State: domain.JobActive, Limit: 4}); len(got) != 6 {
		t.Fatalf("ops active: %v", got)
	}
	if _, _, err := s.ListJobs(ctx, JobFilter{Cursor: "not a cursor!"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v, want ErrBadCursor", err)
	}

	// The name prefix is an index range scan, with or without namespace.
	for _, c := range []struct{ sql, index string }{
		{"SELECT * FROM job_names n WHERE n.namespace = 'default' AND n.name LIKE 'etl-1%'", "job_names_pkey"},
		{"SELECT * FROM job_names n WHERE n.name LIKE 'etl-1%'", "job_names_name"},
	} {
		plan := explain(t, s, "SET LOCAL enable_seqscan = off", c.sql)
		if !strings.Contains(plan, c.index) || !strings.Contains(plan, "Index Cond") {
			t.Errorf("%s does not range-scan %s:\n%s", c.sql, c.index, plan)
		}
	}
}

// explain is the text EXPLAIN of sql, after setup in the same transaction.
func explain(t testing.TB, s *Store, setup, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if setup != "" {
		if _, err := tx.Exec(ctx, setup); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDueJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := baseTime()
	mk := func(name string, bucket int, next time.Time, state domain.JobState) *model.Job {
		j := testJob(name, &next)
		j.ID = idInBucket(bucket)
		mustCreate(t, s, j)
		if state != domain.JobActive {
			setState(t, s, j.ID, state, &next)
		}
		return j
	}
	due3 := mk("due-3", 3, now.Add(-2*time.Second), domain.JobActive)
	due5 := mk("due-5", 5, now.Add(-5*time.Second), domain.JobActive)
	mk("other-bucket", 4, now.Add(-time.Second), domain.JobActive)
	mk("paused", 3, now.Add(-time.Second), domain.JobPaused)
	mk("future", 5, now.Add(time.Minute), domain.JobActive)
	mustCreate(t, s, &model.Job{ID: idInBucket(3), Name: "unscheduled", Handler: domain.Handler{Type: "http"}, State: domain.JobCompleted})

	jobs, err := s.dueJobs(ctx, []int{3, 5}, now, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != due5.ID || jobs[1].ID != due3.ID {
		t.Fatalf("due jobs %v, want due-5 then due-3", names(jobs))
	}
	if jobs, _ := s.dueJobs(ctx, []int{3, 5}, now, 1); len(jobs) != 1 || jobs[0].ID != due5.ID {
		t.Fatalf("limit 1: %v", names(jobs))
	}
	if jobs, _ := s.dueJobs(ctx, []int{3, 5}, now.Add(time.Hour), 10); len(jobs) != 3 {
		t.Fatalf("until +1h: %v", names(jobs))
	}

	// The incremental form: only what became due after a point.
	if due, _ := s.ListDueJobs(ctx, []int{3, 5}, now, now.Add(time.Hour), 10); len(due) != 1 || due[0].Schedule.Cron != "*/5 * * * * *" ||
		due[0].Schedule.Timezone != "Europe/Berlin" || !due[0].NextRunAt.After(now) {
		t.Fatalf("after now until +1h: %+v, want only the future job, with its schedule", due)
	}
	if due, _ := s.ListDueJobs(ctx, []int{3, 5}, time.Time{}, now, 10); len(due) != 2 {
		t.Fatalf("no lower bound until now: %+v, want the 2 due jobs", due)
	}

	plan := explain(t, s, "", dueSQL, []int{3, 5}, now.Add(-time.Minute), now, 10)
	for b := range testBuckets {
		p := fmt.Sprintf("jobs_b%03d", b)
		if scanned := strings.Contains(plan, p); scanned != (b == 3 || b == 5) {
			t.Errorf("partition %s scanned=%v:\n%s", p, scanned, plan)
		}
	}
}

func names(jobs []*model.Job) []string {
	var n []string
	for _, j := range jobs {
		n = append(n, j.Name)
	}
	return n
}

// claim records node as the owner of buckets at epoch and returns the
// epochs map Fire takes.
func claim(t testing.TB, s *Store, node string, epoch int64, buckets ...int) map[int]int64 {
	t.Helper()
	epochs := map[int]int64{}
	for _, b := range buckets {
		if err := s.ClaimBucket(context.Background(), b, node, epoch); err != nil {
			t.Fatal(err)
		}
		epochs[b] = epoch
	}
	return epochs
}

func TestFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	t1 := t0.Add(5 * time.Second)
	j := mustCreate(t, s, testJob("every-5s", &t0))
	epochs := claim(t, s, "n1", 7, j.Bucket)

	res, err := s.Fire(ctx, "n1", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: &t1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Executions) != 1 || res.Skipped != 0 || len(res.Fenced) != 0 {
		t.Fatalf("first fire: %+v", res)
	}
	e := res.Executions[0]
	if e.ID != domain.ExecutionID(j.ID, t0) || e.JobID != j.ID || e.Bucket != j.Bucket || e.Namespace != "default" ||
		e.JobName != "every-5s" || !e.ScheduledFor.Equal(t0) || e.Manual || e.State != domain.ExecQueued ||
		e.Handler.URL != j.Handler.URL || string(e.Payload) != `{"n": 1}` || e.Retry != j.Retry ||
		e.Timeout != j.Timeout || e.DispatchedAt != nil || e.CreatedAt.IsZero() || e.FiredBy != "n1" {
		t.Fatalf("execution %+v", e)
	}
	got, _ := s.GetJob(ctx, j.ID)
	if !got.NextRunAt.Equal(t1) || !got.LastRunAt.Equal(t0) || got.State != domain.JobActive {
		t.Fatalf("job after fire: next %v last %v state %s", got.NextRunAt, got.LastRunAt, got.State)
	}
	// A firing is no change of the job's: its version moves, its revision
	// (the API's ETag) does not.
	if got.Version == j.Version || got.Revision != 1 || j.Revision != 1 {
		t.Fatalf("after a firing: version %d (was %d), revision %d (was %d); want the version moved, revision 1", got.Version, j.Version,
			got.Revision, j.Revision)
	}
	// The same firing again (a retry, another node): nothing new.
	res, err = s.Fire(ctx, "n1", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: &t1}})
	if err != nil || len(res.Executions) != 0 || res.Skipped != 1 {
		t.Fatalf("second fire: %+v, %v", res, err)
	}
	// The same (job, time) twice in one batch.
	t2 := t1.Add(5 * time.Second)
	f := Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t1, Next: &t2}
	res, err = s.Fire(ctx, "n1", epochs, []Firing{f, f})
	if err != nil || len(res.Executions) != 1 || res.Skipped != 1 {
		t.Fatalf("duplicate in batch: %+v, %v", res, err)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1", j.ID); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
	// A paused job does not fire.
	got, _ = s.GetJob(ctx, j.ID)
	got.State = domain.JobPaused
	if err := s.UpdateJob(ctx, got); err != nil {
		t.Fatal(err)
	}
	res, _ = s.Fire(ctx, "n1", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t2, Next: ptr(t2.Add(time.Second))}})
	if len(res.Executions) != 0 || res.Skipped != 1 {
		t.Fatalf("paused job fired: %+v", res)
	}
}

func TestFireOneShotCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	at := baseTime()
	j := testJob("once", &at)
	j.Schedule = schedule.Spec{At: &at}
	mustCreate(t, s, j)
	res, err := s.Fire(ctx, "n1", claim(t, s, "n1", 1, j.Bucket), []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v, %v", res, err)
	}
	got, _ := s.GetJob(ctx, j.ID)
	if got.State != domain.JobCompleted || got.NextRunAt != nil || !got.LastRunAt.Equal(at) {
		t.Fatalf("one-shot after firing: state %s next %v last %v", got.State, got.NextRunAt, got.LastRunAt)
	}
}

func TestFireConcurrentExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	var firings []Firing
	buckets := map[int]bool{}
	for i := range 40 {
		j := mustCreate(t, s, testJob(fmt.Sprintf("j%d", i), &t0))
		firings = append(firings, Firing{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: ptr(t0.Add(time.Minute))})
		buckets[j.Bucket] = true
	}
	epochs := map[int]int64{}
	for b := range buckets {
		claim(t, s, "n1", 3, b)
		epochs[b] = 3
	}
	// Two goroutines fire the same batch, one in reverse order.
	reversed := make([]Firing, len(firings))
	for i, f := range firings {
		reversed[len(firings)-1-i] = f
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted int
		skipped  int
	)
	for round := range 5 {
		for _, batch := range [][]Firing{firings, reversed, firings} {
			wg.Go(func() {
				res, err := s.Fire(ctx, "n1", epochs, batch)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inserted += len(res.Executions)
				skipped += res.Skipped
				mu.Unlock()
			})
		}
		wg.Wait()
		if round == 0 && inserted != len(firings) {
			t.Fatalf("round 0: %d executions inserted, want %d (skipped %d)", inserted, len(firings), skipped)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM executions"); n != len(firings) || inserted != len(firings) {
		t.Fatalf("%d executions stored, %d reported, want %d", n, inserted, len(firings))
	}
}

func TestFireFencedByNewerEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	a := testJob("a", &t0)
	a.ID = idInBucket(2)
	b := testJob("b", &t0)
	b.ID = idInBucket(9)
	mustCreate(t, s, a)
	mustCreate(t, s, b)
	old := claim(t, s, "old", 10, 2, 9)
	// "new" takes bucket 2 over at a later epoch; old still believes it owns it.
	claim(t, s, "new", 11, 2)
	if err := s.ClaimBucket(ctx, 2, "old", 10); !errors.Is(err, ErrFenced) {
		t.Fatalf("reclaim at an older epoch: %v, want ErrFenced", err)
	}
	res, err := s.Fire(ctx, "old", old, []Firing{
		{JobID: a.ID, Bucket: 2, ScheduledFor: t0, Next: ptr(t0.Add(time.Second))},
		{JobID: b.ID, Bucket: 9, ScheduledFor: t0, Next: ptr(t0.Add(time.Second))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Fenced) != "[2]" || len(res.Executions) != 1 || res.Executions[0].JobID != b.ID {
		t.Fatalf("stale epoch: %+v", res)
	}
	if got, _ := s.GetJob(ctx, a.ID); !got.NextRunAt.Equal(t0) || got.LastRunAt != nil {
		t.Fatalf("fenced job changed: %+v", got)
	}
	if n := count(t, s, "SELECT count(*) FROM executions WHERE job_id = $1", a.ID); n != 0 {
		t.Fatalf("fenced bucket got %d executions", n)
	}
	// Unclaimed buckets and buckets missing from epochs are fenced too.
	c := testJob("c", &t0)
	c.ID = idInBucket(5)
	mustCreate(t, s, c)
	res, _ = s.Fire(ctx, "new", map[int]int64{5: 11}, []Firing{{JobID: c.ID, Bucket: 5, ScheduledFor: t0}})
	if fmt.Sprint(res.Fenced) != "[5]" || len(res.Executions) != 0 {
		t.Fatalf("unclaimed bucket: %+v", res)
	}
	res, _ = s.Fire(ctx, "new", map[int]int64{}, []Firing{{JobID: a.ID, Bucket: 2, ScheduledFor: t0}})
	if fmt.Sprint(res.Fenced) != "[2]" || len(res.Executions) != 0 {
		t.Fatalf("bucket missing from epochs: %+v", res)
	}
	// The new owner fires.
	res, _ = s.Fire(ctx, "new", map[int]int64{2: 11}, []Firing{{JobID: a.ID, Bucket: 2, ScheduledFor: t0, Next: ptr(t0.Add(time.Second))}})
	if len(res.Fenced) != 0 || len(res.Executions) != 1 {
		t.Fatalf("new owner: %+v", res)
	}
}

// A claim waits for a firing transaction in flight in its bucket, so the
// deposed owner cannot commit a firing after the claim.
func TestClaimWaitsForFiringInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	claim(t, s, "old", 1, 4)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT epoch FROM bucket_owners WHERE bucket = 4 FOR SHARE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ClaimBucket(ctx, 4, "new", 2) }()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, s, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%bucket_owners%'") == 0 {
		select {
		case err := <-done:
			t.Fatalf("claim returned (%v) while a firing held the bucket", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("claim never waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestExecutionsUniquePerJobAndTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	job, at := uuid.Must(uuid.NewV7()), baseTime()
	insert := `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, state, handler)
		VALUES ($1, $2, 0, 'default', 'x', $3, 'queued', '{}')`
	if _, err := s.Pool().Exec(ctx, insert, uuid.New(), job, at); err != nil {
		t.Fatal(err)
	}
	_, err := s.Pool().Exec(ctx, insert, uuid.New(), job, at)
	if !isUniqueViolation(err) {
		t.Fatalf("second execution for the same job and time: %v, want a unique violation", err)
	}
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	next := baseTime().Add(time.Hour)
	j := mustCreate(t, s, testJob("manual", &next))
	// Paused, with a next run kept (rows from before the store refused
	// such jobs): a manual run works in any state, and avoids next_run_at.
	setState(t, s, j.ID, domain.JobPaused, &next)
	at := baseTime().Add(123456 * time.Microsecond)

	e1, err := s.CreateManualExecution(ctx, j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if !e1.Manual || e1.State != domain.ExecQueued || !e1.ScheduledFor.Equal(at.Truncate(time.Millisecond)) ||
		e1.ID != domain.ExecutionID(j.ID, e1.ScheduledFor) || e1.DispatchedAt != nil || e1.Handler.URL != j.Handler.URL {
		t.Fatalf("manual execution %+v", e1)
	}
	e2, err := s.CreateManualExecution(ctx, j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if !e2.ScheduledFor.Equal(e1.ScheduledFor.Add(time.Millisecond)) {
		t.Fatalf("second run at the same time scheduled for %v, want 1 ms after %v", e2.ScheduledFor, e1.ScheduledFor)
	}
	// The job's next scheduled time is kept free for its scheduled run.
	e3, err := s.CreateManualExecution(ctx, j.ID, next)
	if err != nil || !e3.ScheduledFor.Equal(next.Add(time.Millisecond)) {
		t.Fatalf("run at next_run_at: %v, %v", e3, err)
	}
	if _, err := s.CreateManualExecution(ctx, uuid.Must(uuid.NewV7()), at); !errors.Is(err, ErrNotFound) {
		t.Fatalf("run of a missing job: %v, want ErrNotFound", err)
	}
}

func TestOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	a, b := testJob("a", &t0), testJob("b", &t0)
	a.ID, b.ID = idInBucket(1), idInBucket(2)
	mustCreate(t, s, a)
	mustCreate(t, s, b)
	epochs := claim(t, s, "n", 1, 1, 2)
	res, err := s.Fire(ctx, "n", epochs, []Firing{
		{JobID: a.ID, Bucket: 1, ScheduledFor: t0, Next: ptr(t0.Add(time.Second))},
		{JobID: b.ID, Bucket: 2, ScheduledFor: t0, Next: ptr(t0.Add(time.Second))},
	})
	if err != nil || len(res.Executions) != 2 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	manual, err := s.CreateManualExecution(ctx, a.ID, t0.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Hour)
	out, err := s.ListUndispatchedExecutions(ctx, []int{1}, 10, soon)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].ID != manual.ID || out[1].JobID != a.ID {
		t.Fatalf("outbox of bucket 1: %v", out)
	}
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: out[0].ID}, {ID: out[1].ID}, {ID: uuid.New()}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if out, _ = s.ListUndispatchedExecutions(ctx, []int{1, 2}, 10, soon); len(out) != 1 || out[0].JobID != b.ID {
		t.Fatalf("outbox after dispatch: %v", out)
	}
	// An executor starting it proves it was delivered, ack or not.
	if err := s.attemptStarted(ctx, out[0].ID, 1, "x", t0); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.ListUndispatchedExecutions(ctx, []int{1, 2}, 10, soon); len(out) != 0 {
		t.Fatalf("outbox after start: %v", out)
	}
	e, _ := s.GetExecution(ctx, manual.ID)
	if e.DispatchedAt == nil {
		t.Fatal("dispatched_at not set")
	}
	first := *e.DispatchedAt
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: manual.ID}}, baseTime().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.GetExecution(ctx, manual.ID); !e.DispatchedAt.Equal(first) {
		t.Fatalf("dispatched_at moved from %v to %v", first, e.DispatchedAt)
	}
	// The dispatcher's ack time is what is recorded, when given.
	x := fired(t, s)
	acked := baseTime().Add(1234 * time.Millisecond)
	if err := s.MarkExecutionsDispatched(ctx, []model.Dispatched{{ID: x.ID}}, acked); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.GetExecution(ctx, x.ID); e.DispatchedAt == nil || !e.DispatchedAt.Equal(acked) {
		t.Fatalf("dispatched_at = %v, want the ack time %v", e.DispatchedAt, acked)
	}
}

// fired is one fresh queued execution.
func fired(t testing.TB, s *Store) *model.Execution {
	t.Helper()
	at := baseTime()
	j := mustCreate(t, s, testJob("job-"+uuid.NewString(), &at))
	res, err := s.Fire(context.Background(), "n", claim(t, s, "n", 1, j.Bucket),
		[]Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: at, Next: ptr(at.Add(time.Hour))}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	return res.Executions[0]
}

func TestAttemptTransitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	type ev struct {
		typ     string // started, succeeded, failed, final
		attempt int
	}
	cases := []struct {
		name     string
		events   []ev
		state    domain.ExecState
		attempts int
		finished bool
	}{
		{"start", []ev{{"started", 1}}, domain.ExecRunning, 1, false},
		{"success", []ev{{"started", 1}, {"succeeded", 1}}, domain.ExecSucceeded, 1, true},
		{"retry then success", []ev{{"started", 1}, {"failed", 1}, {"started", 2}, {"succeeded", 2}}, domain.ExecSucceeded, 2, true},
		{"failed awaiting retry", []ev{{"started", 1}, {"failed", 1}}, domain.ExecFailed, 1, false},
		{"dead", []ev{{"started", 1}, {"failed", 1}, {"started", 2}, {"final", 2}}, domain.ExecDead, 2, true},
		{"duplicates", []ev{{"started", 1}, {"started", 1}, {"succeeded", 1}, {"succeeded", 1}, {"started", 1}}, domain.ExecSucceeded, 1, true},
		{"finish before start", []ev{{"succeeded", 1}, {"started", 1}}, domain.ExecSucceeded, 1, true},
		{"failure before start", []ev{{"failed", 1}, {"started", 1}}, domain.ExecFailed, 1, false},
		{"late failure of a retried attempt", []ev{{"started", 1}, {"started", 2}, {"failed", 1}}, domain.ExecRunning, 2, false},
		{"late start of an old attempt", []ev{{"started", 2}, {"started", 1}}, domain.ExecRunning, 2, false},
		{"terminal stays", []ev{{"started", 1}, {"final", 1}, {"started", 2}, {"succeeded", 2}}, domain.ExecDead, 2, true},
		{"first report of an end wins", []ev{{"started", 1}, {"failed", 1}, {"final", 1}, {"succeeded", 1}}, domain.ExecFailed, 1, false},
		{"late success of an older attempt", []ev{{"started", 1}, {"started", 2}, {"succeeded", 1}, {"final", 2}}, domain.ExecSucceeded, 2, true},
	}
	for _, c := range cases {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batched=%v", c.name, batched), func(t *testing.T) {
				e := fired(t, s)
				at := baseTime()
				var evs []model.AttemptEvent
				for i, ev := range c.events {
					x := model.AttemptEvent{ID: e.ID, Attempt: ev.attempt, Executor: fmt.Sprintf("x%d", ev.attempt),
						At: at.Add(time.Duration(i) * time.Second), Type: domain.EventStarted}
					switch ev.typ {
					case "succeeded":
						x.Type, x.Output = domain.EventSucceeded, "ok"
					case "failed":
						x.Type, x.Error = domain.EventFailed, "boom"
					case "final":
						x.Type, x.Final, x.Error = domain.EventFailed, true, "gave up"
					}
					evs = append(evs, x)
				}
				if batched {
					// All events in one pipelined transaction, plus one for an
					// execution that does not exist.
					ghost := model.AttemptEvent{ID: domain.ExecutionID(uuid.New(), at), Attempt: 1, Executor: "x", At: at, Type: domain.EventStarted}
					res, err := s.RecordAttemptEvents(ctx, append(evs, ghost))
					if err != nil {
						t.Fatal(err)
					}
					for i, r := range res[:len(evs)] {
						if r != nil {
							t.Fatalf("event %d: %v", i, r)
						}
					}
					if !errors.Is(res[len(evs)], ErrNotFound) {
						t.Fatalf("event for a missing execution: %v, want ErrNotFound", res[len(evs)])
					}
				}
				for i, x := range evs {
					if batched {
						break
					}
					var err error
					if x.Type == domain.EventStarted {
						err = s.attemptStarted(ctx, x.ID, x.Attempt, x.Executor, x.At)
					} else {
						err = s.attemptFinished(ctx, x.ID, x.Attempt, x.Executor, x.At, x.Outcome(), x.Final, x.Error, x.Output)
					}
					if err != nil {
						t.Fatalf("event %d %v: %v", i, c.events[i], err)
					}
				}
				got, err := s.GetExecution(ctx, e.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != c.state || got.Attempts != c.attempts || (got.FinishedAt != nil) != c.finished {
					t.Fatalf("state %s attempts %d finished %v; want %s %d %v",
						got.State, got.Attempts, got.FinishedAt, c.state, c.attempts, c.finished)
				}
				if len(got.AttemptList) != c.attempts {
					t.Fatalf("%d attempts recorded, want %d", len(got.AttemptList), c.attempts)
				}
			})
		}
	}
	if err := s.attemptStarted(ctx, domain.ExecutionID(uuid.New(), baseTime()), 1, "x", baseTime()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown execution: %v, want ErrNotFound", err)
	}
}

func TestGetExecutionWithAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	e := fired(t, s)
	t0 := baseTime()
	long := strings.Repeat("é", domain.MaxOutputBytes) // 2 bytes each
	steps := []func() error{
		func() error { return s.attemptStarted(ctx, e.ID, 1, "exec-a", t0) },
		func() error {
			return s.attemptFinished(ctx, e.ID, 1, "exec-a", t0.Add(time.Second), domain.OutcomeFailed, false, "bad\x00gateway", "")
		},
		func() error { return s.attemptStarted(ctx, e.ID, 2, "exec-b", t0.Add(3*time.Second)) },
		func() error {
			return s.attemptFinished(ctx, e.ID, 2, "exec-b", t0.Add(4*time.Second), domain.OutcomeSucceeded, false, "", long)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != domain.ExecSucceeded || got.Attempts != 2 || got.ExecutorID != "exec-b" || !got.StartedAt.Equal(t0) ||
		!got.FinishedAt.Equal(t0.Add(4*time.Second)) || got.Error != "" || len(got.Output) > domain.MaxOutputBytes ||
		!strings.HasPrefix(long, got.Output) {
		t.Fatalf("execution %+v", got)
	}
	a := got.AttemptList
	if len(a) != 2 || a[0].Number != 1 || a[0].ExecutorID != "exec-a" || a[0].Outcome != domain.OutcomeFailed ||
		a[0].Error != "badgateway" || !a[0].StartedAt.Equal(t0) || !a[0].FinishedAt.Equal(t0.Add(time.Second)) ||
		a[1].Number != 2 || a[1].Outcome != domain.OutcomeSucceeded || a[1].Output != got.Output {
		t.Fatalf("attempts %+v", a)
	}
	if _, err := s.GetExecution(ctx, domain.ExecutionID(uuid.New(), t0)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing execution: %v, want ErrNotFound", err)
	}
}

func TestListExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime().Add(-time.Hour)
	a, b := testJob("a", &t0), testJob("b", &t0)
	mustCreate(t, s, a)
	mustCreate(t, s, b)
	epochs := claim(t, s, "n", 1, a.Bucket, b.Bucket)
	var all []*model.Execution
	for i := range 12 {
		at := t0.Add(time.Duration(i) * time.Second)
		next := at.Add(time.Second)
		res, err := s.Fire(ctx, "n", epochs, []Firing{
			{JobID: a.ID, Bucket: a.Bucket, ScheduledFor: at, Next: &next},
			{JobID: b.ID, Bucket: b.Bucket, ScheduledFor: at, Next: &next},
		})
		if err != nil || len(res.Executions) != 2 {
			t.Fatalf("fire %d: %+v %v", i, res, err)
		}
		all = append(all, res.Executions...)
	}
	// Every third execution succeeds.
	for i, e := range all {
		if i%3 == 0 {
			if err := s.attemptFinished(ctx, e.ID, 1, "x", baseTime(), domain.OutcomeSucceeded, false, "", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(f ExecFilter) []*model.Execution {
		t.Helper()
		var out []*model.Execution
		for {
			page, next, err := s.ListExecutions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page...)
			if next == "" {
				return out
			}
			f.Cursor = next
		}
	}
	check := func(name string, got []*model.Execution, want int, keep func(*model.Execution) bool) {
		t.Helper()
		if len(got) != want {
			t.Fatalf("%s: %d executions, want %d", name, len(got), want)
		}
		for i, e := range got {
			if !keep(e) {
				t.Fatalf("%s: %s (job %s, %s) does not match", name, e.ID, e.JobName, e.State)
			}
			if i > 0 {
				p := got[i-1]
				if e.ScheduledFor.After(p.ScheduledFor) || (e.ScheduledFor.Equal(p.ScheduledFor) && e.ID.String() >= p.ID.String()) {
					t.Fatalf("%s: not newest first at %d: %v %s after %v %s", name, i, e.ScheduledFor, e.ID, p.ScheduledFor, p.ID)
				}
			}
		}
	}
	check("all", list(ExecFilter{Limit: 5}), 24, func(*model.Execution) bool { return true })
	check("succeeded", list(ExecFilter{State: domain.ExecSucceeded, Limit: 3}), 8,
		func(e *model.Execution) bool { return e.State == domain.ExecSucceeded })
	check("job a", list(ExecFilter{JobID: &a.ID, Limit: 5}), 12, func(e *model.Execution) bool { return e.JobID == a.ID })
	check("job a queued", list(ExecFilter{JobID: &a.ID, State: domain.ExecQueued, Limit: 2}), 8,
		func(e *model.Execution) bool { return e.JobID == a.ID && e.State == domain.ExecQueued })
	check("queued", list(ExecFilter{State: domain.ExecQueued, Limit: 5}), 16,
		func(e *model.Execution) bool { return e.State == domain.ExecQueued })
	if _, _, err := s.ListExecutions(ctx, ExecFilter{State: "done'; --"}); err == nil {
		t.Fatal("an unknown state listed executions")
	}
	if page, next, err := s.ListExecutions(ctx, ExecFilter{}); err != nil || len(page) != 24 || next != "" {
		t.Fatalf("one default page: %d, %q, %v", len(page), next, err)
	}
	if _, _, err := s.ListExecutions(ctx, ExecFilter{Cursor: "x"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func TestMaintainPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := baseTime()
	day := now.Truncate(24 * time.Hour)
	for _, table := range dailyTables {
		for d := -1; d <= initDaysAhead; d++ {
			name := DayPartition(table, day.AddDate(0, 0, d))
			if count(t, s, "SELECT count(*) FROM pg_class WHERE relname = $1", name) != 1 {
				t.Fatalf("Init did not create %s", name)
			}
		}
	}
	// An execution far ahead lands in the default partition...
	far := day.AddDate(0, 0, 40).Add(3 * time.Hour)
	j := mustCreate(t, s, testJob("far", &far))
	res, err := s.Fire(ctx, "n", claim(t, s, "n", 1, j.Bucket), []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: far}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	e := res.Executions[0]
	// Two attempts, so that they are rows of attempts (a single one lives
	// in the execution's row).
	if err := s.attemptStarted(ctx, e.ID, 2, "x", now); err != nil {
		t.Fatal(err)
	}
	where := func(table, idCol string) string {
		var p string
		if err := s.Pool().QueryRow(ctx, "SELECT tableoid::regclass::text FROM "+table+" WHERE "+idCol+" = $1", e.ID).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := where("executions", "id"); p != "executions_default" {
		t.Fatalf("far execution in %s", p)
	}
	// ... and moves into its day's partition when that is created, by
	// several maintainers at once.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := s.MaintainHistoryPartitions(ctx, far, 2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p, want := where("executions", "id"), DayPartition("executions", far); p != want {
		t.Fatalf("execution in %s, want %s", p, want)
	}
	if p, want := where("attempts", "execution_id"), DayPartition("attempts", far); p != want {
		t.Fatalf("attempt in %s, want %s", p, want)
	}
	if got, err := s.GetExecution(ctx, e.ID); err != nil || got.State != domain.ExecRunning || len(got.AttemptList) != 2 {
		t.Fatalf("moved execution: %+v %v", got, err)
	}
	before := count(t, s, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'executions'::regclass")
	if err := s.MaintainHistoryPartitions(ctx, far, 2); err != nil {
		t.Fatal(err)
	}
	if after := count(t, s, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'executions'::regclass"); after != before {
		t.Fatalf("second run: %d partitions, was %d", after, before)
	}
	// 1 + 8 from Init, 4 more (far-1 .. far+2), and the default.
	if before != 9+4+1 {
		t.Fatalf("%d executions partitions, want 14", before)
	}
}

func TestListenJobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(ch, payload string) { got <- ch + " " + payload }, JobsChannel, ExecChannel)
	}()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	}()
	// Wait until the listener is listening.
	deadline := time.Now().Add(10 * time.Second)
	for count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN "tock_jobs"%' AND state = 'idle'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A job due later than a minute is not announced: the next
	// notification is the one of the job due soon.
	later, soon := baseTime().Add(time.Hour), baseTime().Add(2*time.Second)
	mustCreate(t, s, testJob("later", &later))
	j := mustCreate(t, s, testJob("notified", &soon))
	want := fmt.Sprintf("%s %d:%s", JobsChannel, j.Bucket, j.ID)
	select {
	case n := <-got:
		if n != want {
			t.Fatalf("notification %q, want %q", n, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	if _, err := s.CreateManualExecution(context.Background(), j.ID, baseTime()); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != fmt.Sprintf("%s %d", ExecChannel, j.Bucket) {
			t.Fatalf("notification %q after CreateManualExecution", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after CreateManualExecution")
	}
}

// A read-modify-write that straddles a firing must not write back the old
// next run: UpdateJob refuses with ErrStale and a fresh read succeeds.
func TestUpdateJobRefusesStaleRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	t1 := t0.Add(5 * time.Second)
	j := mustCreate(t, s, testJob("stale", &t0))
	epochs := claim(t, s, "n1", 3, j.Bucket)

	read, err := s.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fire(ctx, "n1", epochs, []Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: t0, Next: &t1}}); err != nil {
		t.Fatal(err)
	}
	read.Payload = json.RawMessage(`{"n": 2}`)
	if err := s.UpdateJob(ctx, read); !errors.Is(err, ErrStale) {
		t.Fatalf("update from a read older than the firing: %v, want ErrStale", err)
	}
	fresh, _ := s.GetJob(ctx, j.ID)
	fresh.Payload = json.RawMessage(`{"n": 2}`)
	if err := s.UpdateJob(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if !fresh.NextRunAt.Equal(t1) || string(fresh.Payload) != `{"n": 2}` {
		t.Fatalf("after update: next %v payload %s, want %v and the new payload", fresh.NextRunAt, fresh.Payload, t1)
	}
	gone := &model.Job{ID: idInBucket(0)}
	if err := s.UpdateJob(ctx, gone); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing job: %v, want ErrNotFound", err)
	}
}

// An end event that carries its attempt's start records both.
func TestFinishedEventCarriesStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	e := fired(t, s)
	start := baseTime()
	end := start.Add(150 * time.Millisecond)
	res, err := s.RecordAttemptEvents(ctx, []model.AttemptEvent{{ID: e.ID, Attempt: 1, Executor: "x1", At: end,
		Type: domain.EventSucceeded, Final: true, Output: "ok", StartedAt: &start}})
	if err != nil || res[0] != nil {
		t.Fatalf("record: %v %v", err, res)
	}
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != domain.ExecSucceeded || got.StartedAt == nil || !got.StartedAt.Equal(start) || !got.FinishedAt.Equal(end) {
		t.Fatalf("execution: state %s started %v finished %v; want succeeded %v %v", got.State, got.StartedAt, got.FinishedAt, start, end)
	}
	if len(got.AttemptList) != 1 || !got.AttemptList[0].StartedAt.Equal(start) || got.AttemptList[0].Outcome != domain.OutcomeSucceeded {
		t.Fatalf("attempts: %+v", got.AttemptList)
	}
}

// A URL that says nothing of the pool gets a pool large enough for
// concurrent commits to share WAL flushes; one that does is obeyed.
func TestOpenPoolSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain := testenv.Postgres(t)
	u, err := url.Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()
	for _, tc := range []struct {
		url  string
		want int32
	}{
		{plain, defaultMaxConns},
		{u.String(), 3},
	} {
		s, err := Open(ctx, tc.url)
		if err != nil {
			t.Fatal(err)
		}
		// The scanner's connections are set apart from the same total,
		// unless the pool is too small to divide.
		main, fire, due := s.Pool().Config().MaxConns, s.firePool.Config().MaxConns, s.duePool.Config().MaxConns
		switch {
		case tc.want < minSplitConns && (s.firePool != s.Pool() || s.duePool != s.Pool() || main != tc.want):
			t.Errorf("%s: a pool of %d divided: %d + %d (firing) + %d (due read)", tc.url, tc.want, main, fire, due)
		case tc.want >= minSplitConns && (main+fire+due != tc.want || fire < 1 || due != 1 || main < 1):
			t.Errorf("%s: pools of %d + %d (firing) + %d (due read) connections, want %d in all", tc.url, main, fire, due, tc.want)
		}
		s.Close()
	}
	if defaultMaxConns < 16 {
		t.Errorf("default pool of %d connections, want at least 16", defaultMaxConns)
	}
}

// An execution the dispatcher cannot publish (dispatcher.Failer) is
// recorded as a final failure of its next attempt, which it never
// started: dead, with the error, and out of the outbox.
func TestUnpublishableExecutionIsDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	a := testJob("too-big", &t0)
	a.ID = idInBucket(3)
	mustCreate(t, s, a)
	manual, err := s.CreateManualExecution(ctx, a.ID, t0.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const why = "the execution's message is 2000000 bytes, more than the NATS server accepts (its max_payload)"
	res, err := s.RecordAttemptEvents(ctx, []model.AttemptEvent{{ID: manual.ID, Attempt: manual.Attempts + 1, Executor: "dispatcher",
		At: t0, Type: domain.EventFailed, Final: true, Error: why, Dispatch: manual.Dispatches}})
	if err != nil || res[0] != nil {
		t.Fatalf("record: %v %v", res, err)
	}
	e, err := s.GetExecution(ctx, manual.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != domain.ExecDead || e.Error != why || len(e.AttemptList) != 1 || e.AttemptList[0].ExecutorID != "dispatcher" {
		t.Fatalf("execution %+v", e)
	}
	if out, _ := s.ListUndispatchedExecutions(ctx, []int{3}, 10, time.Now().Add(time.Hour)); len(out) != 0 {
		t.Fatalf("still in the outbox: %v", out)
	}
}

// A cancelled attempt whose started event reaches the recorder after its
// cancelled event (a retried publish) is recorded, cancelled, once the
// cancelled event carries its start (as executors send it). Without the
// start the attempt stayed with no outcome: TestCancelRunningAndQueuedExecutions
// failed that way once in CI.
func TestCancelledAttemptBeforeItsStartEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := baseTime()
	j := testJob("cancel-order", &t0)
	j.ID = idInBucket(5)
	mustCreate(t, s, j)
	x, err := s.CreateManualExecution(ctx, j.ID, t0.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelExecution(ctx, x.ID); err != nil {
		t.Fatal(err)
	}
	start := t0.Add(time.Second)
	for _, ev := range []model.AttemptEvent{
		{ID: x.ID, Attempt: 1, Executor: "e1", At: t0.Add(2 * time.Second), Type: domain.EventCancelled, StartedAt: &start, Error: "cancelled"},
		{ID: x.ID, Attempt: 1, Executor: "e1", At: start, Type: domain.EventStarted},
	} {
		if res, err := s.RecordAttemptEvents(ctx, []model.AttemptEvent{ev}); err != nil || res[0] != nil {
			t.Fatalf("record %s: %v %v", ev.Type, res, err)
		}
	}
	e, err := s.GetExecution(ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != domain.ExecCancelled || len(e.AttemptList) != 1 || e.AttemptList[0].Outcome != domain.OutcomeCancelled ||
		!e.AttemptList[0].StartedAt.Equal(start) {
		t.Fatalf("execution %s, attempts %+v", e.State, e.AttemptList)
	}
}
