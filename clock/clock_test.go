package clock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeDB is a database clock skew ahead of the local one.
type fakeDB struct {
	mu    sync.Mutex
	skew  time.Duration
	reads int
	// delay, if set, is how long read i takes before the database reads
	// its clock (the reply comes back at once).
	delay func(i int) time.Duration
	fail  func(i int) bool
}

func (f *fakeDB) read(context.Context) (time.Time, error) {
	f.mu.Lock()
	i := f.reads
	f.reads++
	f.mu.Unlock()
	if f.fail != nil && f.fail(i) {
		return time.Time{}, errors.New("down")
	}
	if f.delay != nil {
		time.Sleep(f.delay(i))
	}
	return time.Now().Add(f.skew).UTC(), nil
}

func (f *fakeDB) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func TestLocalClockUntilTheFirstSync(t *testing.T) {
	c := New((&fakeDB{skew: time.Hour}).read, Options{})
	if d := time.Since(c.Now()).Abs(); d > 50*time.Millisecond {
		t.Errorf("Now is %v off the local clock before any sync", d)
	}
	if d := time.Since(c.Passed()).Abs(); d > 50*time.Millisecond {
		t.Errorf("Passed is %v off the local clock before any sync", d)
	}
	if c.Offset() != 0 {
		t.Errorf("Offset %v before any sync, want 0", c.Offset())
	}
}

// Of several round trips the fastest sets the offset: a slow one's
// reading may have been taken anywhere in it.
func TestSyncKeepsTheFastestRoundTrip(t *testing.T) {
	skew := time.Hour + 1234*time.Millisecond
	db := &fakeDB{skew: skew, delay: func(i int) time.Duration {
		if i == 3 {
			return 0
		}
		return 40 * time.Millisecond // the reading lags the midpoint by 20 ms
	}}
	c := New(db.read, Options{})
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.count() != 5 {
		t.Errorf("%d round trips, want 5", db.count())
	}
	if d := (c.Offset() - skew).Abs(); d > 10*time.Millisecond {
		t.Errorf("offset %v, %v off the true %v", c.Offset(), d, skew)
	}
	if d := c.Now().Sub(time.Now().Add(skew)).Abs(); d > 10*time.Millisecond {
		t.Errorf("Now is %v off the database's clock", d)
	}
}

// Passed never runs ahead of the database's clock, wherever in the round
// trip the database read it: here at its very end, the worst case.
func TestPassedIsNeverAheadOfTheDatabase(t *testing.T) {
	skew := -time.Hour
	db := &fakeDB{skew: skew, delay: func(int) time.Duration { return 30 * time.Millisecond }}
	c := New(db.read, Options{Rounds: 1})
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		passed := c.Passed()
		if truth := time.Now().Add(skew); passed.After(truth) {
			t.Fatalf("Passed %v ahead of the database's clock", passed.Sub(truth))
		}
	}
	// And it is not needlessly far behind: half the round trip and 1 ms.
	if lag := time.Now().Add(skew).Sub(c.Passed()); lag > 30*time.Millisecond {
		t.Errorf("Passed lags the database's clock by %v", lag)
	}
}

// A failed round trip ends the sync; the ones before it count.
func TestSyncFailures(t *testing.T) {
	db := &fakeDB{skew: time.Minute, fail: func(i int) bool { return i == 2 }}
	c := New(db.read, Options{})
	if err := c.Sync(context.Background()); err != nil {
		t.Fatalf("two round trips succeeded, yet: %v", err)
	}
	if db.count() != 3 {
		t.Errorf("%d round trips, want 3 (stopped at the failure)", db.count())
	}
	if d := (c.Offset() - time.Minute).Abs(); d > 10*time.Millisecond {
		t.Errorf("offset %v after a partial sync, want about 1m", c.Offset())
	}

	// None succeeds: an error, and the previous offset stays.
	db.fail = func(int) bool { return true }
	if err := c.Sync(context.Background()); err == nil {
		t.Fatal("a sync without a successful round trip did not fail")
	}
	if d := (c.Offset() - time.Minute).Abs(); d > 10*time.Millisecond {
		t.Errorf("offset %v after a failed sync, want the previous one", c.Offset())
	}
}

// SyncIfDue syncs at once, then Every after a success and RetryAfter
// after a failure.
func TestSyncIfDueFollowsTheSchedule(t *testing.T) {
	ctx := context.Background()
	down := true
	db := &fakeDB{fail: func(int) bool { return down }}
	c := New(db.read, Options{Every: time.Hour, RetryAfter: time.Minute, Rounds: 1})

	if err := c.SyncIfDue(ctx); err == nil || db.count() != 1 {
		t.Fatalf("first SyncIfDue: %v after %d reads, want a failed read", err, db.count())
	}
	if d := time.Until(c.next) - time.Minute; d.Abs() > time.Second {
		t.Errorf("after a failure the next sync is due in %v, want 1m", time.Until(c.next))
	}
	if err := c.SyncIfDue(ctx); err != nil || db.count() != 1 {
		t.Fatalf("SyncIfDue before RetryAfter: %v, %d reads, want nothing done", err, db.count())
	}

	c.next = time.Now() // RetryAfter is over
	down = false
	if err := c.SyncIfDue(ctx); err != nil || db.count() != 2 {
		t.Fatalf("SyncIfDue after RetryAfter: %v, %d reads, want one good read", err, db.count())
	}
	if d := time.Until(c.next) - time.Hour; d.Abs() > time.Second {
		t.Errorf("after a success the next sync is due in %v, want 1h", time.Until(c.next))
	}
	if err := c.SyncIfDue(ctx); err != nil || db.count() != 2 {
		t.Fatalf("SyncIfDue before Every: %v, %d reads, want nothing done", err, db.count())
	}
}

// The API reads the database's clock once per Every and follows it with
// the local clock in between (formerly api's dbClock test).
func TestFreshReadsTheDatabaseOncePerInterval(t *testing.T) {
	skew := time.Hour + 1234*time.Millisecond // the database's clock is this far ahead
	db := &fakeDB{skew: skew}
	c := New(db.read, Options{Every: 10 * time.Second, Rounds: 1})
	for range 100 {
		got, err := c.Fresh(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Sub(time.Now().Add(skew)).Abs(); d > 50*time.Millisecond {
			t.Fatalf("Fresh is %v off the database's clock", d)
		}
		if got.Location() != time.UTC {
			t.Fatalf("Fresh in %v, want UTC", got.Location())
		}
	}
	if db.count() != 1 {
		t.Errorf("%d reads of the database's clock for 100 calls, want 1", db.count())
	}

	// Once the interval is over, it reads again; a failed read is an error,
	// however recently a sync failed.
	r := *c.cur.Load()
	r.at = time.Now().Add(-10 * time.Second)
	c.cur.Store(&r)
	db.fail = func(int) bool { return true }
	for range 2 {
		if _, err := c.Fresh(context.Background()); err == nil {
			t.Error("Fresh after the interval did not read the database's clock")
		}
	}
	if db.count() != 3 {
		t.Errorf("%d reads, want 3", db.count())
	}
}

func TestConcurrentUse(t *testing.T) {
	db := &fakeDB{skew: time.Second}
	c := New(db.read, Options{Every: time.Nanosecond, RetryAfter: time.Nanosecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				_ = c.SyncIfDue(ctx)
				_, _ = c.Fresh(ctx)
				if c.Passed().After(c.Now()) {
					t.Error("Passed after Now")
				}
			}
		})
	}
	wg.Wait()
}
