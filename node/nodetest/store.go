package nodetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// storeKey names a test's store of one database.
type storeKey struct {
	t  testing.TB
	pg string
}

// stores are the stores OpenStore opened, one per test and database:
// the helpers below call it on every poll of a condition, and a pool per
// call, each kept until the test ended, held enough connections to run
// Postgres out of them (max_connections) with end-to-end tests in
// parallel.
var stores sync.Map // storeKey → *store.Store

// OpenStore opens the database at pg (a cluster of Buckets buckets, if
// new), closed at cleanup: for tests that check what was stored, or set
// up what a crash leaves behind. A test gets one store per database,
// however often it calls OpenStore.
func OpenStore(t testing.TB, pg string) *store.Store {
	t.Helper()
	key := storeKey{t, pg}
	if st, ok := stores.Load(key); ok {
		return st.(*store.Store)
	}
	st, err := store.Open(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(context.Background(), Buckets); err != nil {
		st.Close()
		t.Fatal(err)
	}
	if prev, loaded := stores.LoadOrStore(key, st); loaded {
		st.Close() // another goroutine of the test opened it first
		return prev.(*store.Store)
	}
	t.Cleanup(func() {
		stores.Delete(key)
		st.Close()
	})
	return st
}

// CountExecutions counts the job's executions in the database.
func CountExecutions(t testing.TB, pg string, job uuid.UUID) int {
	t.Helper()
	var n int
	st := OpenStore(t, pg)
	if err := st.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM executions WHERE job_id = $1", job).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// FireUnpublished fires the job's next run the way its bucket's owner
// would, but publishes nothing, and returns the execution's id: what a
// node that fired and died before publishing leaves in the outbox.
func FireUnpublished(t testing.TB, pg string, job uuid.UUID) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	st := OpenStore(t, pg)
	j, err := st.GetJob(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var node string
	var epoch int64
	if err := st.Pool().QueryRow(ctx, "SELECT node, epoch FROM bucket_owners WHERE bucket = $1", j.Bucket).Scan(&node, &epoch); err != nil {
		t.Fatal(err)
	}
	next := j.NextRunAt.Add(time.Second)
	res, err := st.Fire(ctx, node, map[int]int64{j.Bucket: epoch},
		[]store.Firing{{JobID: j.ID, Bucket: j.Bucket, ScheduledFor: *j.NextRunAt, Next: &next}})
	if err != nil || len(res.Executions) != 1 {
		t.Fatalf("fire: %v %+v", err, res)
	}
	return res.Executions[0].ID
}

// NotExactlyOnce lists every (job, second) in [from, to] that has no
// execution or more than one.
func NotExactlyOnce(t testing.TB, pg string, jobs []uuid.UUID, from, to time.Time) []string {
	t.Helper()
	st := OpenStore(t, pg)
	rows, err := st.Pool().Query(context.Background(), `
		SELECT j.id, s.at, count(e.id)
		FROM unnest($1::uuid[]) AS j(id)
		CROSS JOIN generate_series($2::timestamptz, $3::timestamptz, interval '1 second') AS s(at)
		LEFT JOIN executions e ON e.job_id = j.id AND e.scheduled_for = s.at
		GROUP BY j.id, s.at
		HAVING count(e.id) <> 1
		ORDER BY s.at, j.id`, jobs, from.Truncate(time.Second), to.Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		var n int
		if err := rows.Scan(&id, &at, &n); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, fmt.Sprintf("job %s at %s: %d executions", id, at.UTC().Format("15:04:05"), n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad
}

// AssertExactlyOnce fails the test for every (job, second) in [from, to]
// that has no execution or more than one (NotExactlyOnce).
func AssertExactlyOnce(t testing.TB, pg string, jobs []uuid.UUID, from, to time.Time) {
	t.Helper()
	bad := NotExactlyOnce(t, pg, jobs, from, to)
	for i, b := range bad {
		if i == 20 {
			t.Errorf("... and %d more", len(bad)-20)
			break
		}
		t.Error(b)
	}
	if len(bad) == 0 {
		secs := int(to.Truncate(time.Second).Sub(from.Truncate(time.Second))/time.Second) + 1
		t.Logf("%d jobs × %d seconds (%s to %s): every scheduled time fired exactly once",
			len(jobs), secs, from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"))
	}
}

// MigratedStore is a new cluster's database (Buckets buckets), migrated:
// its URL, its store (closed at cleanup) and the database's clock, for
// tests of the commands that maintain it (tockd maintain, tockd archive).
func MigratedStore(t testing.TB) (string, *store.Store, time.Time) {
	t.Helper()
	pg := storetest.Postgres(t)
	ctx := context.Background()
	st, err := store.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(ctx, Buckets); err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pg, st, now
}
