// Package storetest gives tests a real, migrated store on a database of
// their own.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
)

// New opens a store on a fresh database (dropped when the test ends),
// migrated and initialised with buckets buckets.
func New(t testing.TB, buckets int) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(ctx, buckets); err != nil {
		t.Fatal(err)
	}
	return st
}

// Record records events with RecordEvents and fails t on any error,
// whole or per event.
func Record(t testing.TB, st *store.Store, evs ...store.AttemptEvent) {
	t.Helper()
	res, err := st.RecordEvents(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("event %d (%+v): %v", i, evs[i], r)
		}
	}
}
