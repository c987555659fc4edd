// Package storetest gives tests a real, migrated store on a database of
// their own.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Schema is tock's schema as store.Migrate builds it, for
// testenv.PostgresFrom.
var Schema = testenv.Schema{Migrations: store.Migrations(), Migrate: Migrate}

// Migrate migrates the database at url with store.Migrate, and closes
// its connections before it returns (see testenv.Schema).
func Migrate(ctx context.Context, url string) error {
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// Postgres creates a database for this test with tock's schema, migrated
// but not initialised (store.Init), and returns its URL; it is dropped
// when the test ends. It is a copy of a template migrated once per
// Postgres server and set of migrations (testenv.PostgresFrom): a test
// that needs an empty database, to migrate it itself, asks
// testenv.Postgres.
func Postgres(t testing.TB) string {
	t.Helper()
	return testenv.PostgresFrom(t, Schema)
}

// New opens a store on a fresh database (dropped when the test ends),
// migrated and initialised with buckets buckets.
func New(t testing.TB, buckets int) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Init(ctx, buckets); err != nil {
		t.Fatal(err)
	}
	return st
}

// Record records events with RecordAttemptEvents and fails t on any error,
// whole or per event.
func Record(t testing.TB, st *store.Store, evs ...model.AttemptEvent) {
	t.Helper()
	res, err := st.RecordAttemptEvents(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("event %d (%+v): %v", i, evs[i], r)
		}
	}
}
