package store

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// A key is claimed once, reports what holds it, and is free again once
// it is older than IdempotencyTTL or released; expiry deletes old keys.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	claim := func(ns, key, hash string) model.Idempotent {
		t.Helper()
		got, err := s.ClaimIdempotencyKey(ctx, ns, key, []byte(hash))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claim("a", "k", "h1"); !got.Claimed {
		t.Fatalf("a new key: %+v", got)
	}
	if got := claim("a", "k", "h1"); !got.InProgress {
		t.Errorf("while in progress: %+v", got)
	}
	if err := s.SaveIdempotencyResponse(ctx, "a", "k", 201, "application/json", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := claim("a", "k", "h1"); got.Claimed || got.Status != 201 || string(got.Response) != `{"x":1}` || got.ContentType != "application/json" {
		t.Errorf("answered: %+v", got)
	}
	if got := claim("a", "k", "h2"); !got.Mismatch || got.Response != nil {
		t.Errorf("another request: %+v", got)
	}
	if got := claim("b", "k", "h2"); !got.Claimed {
		t.Errorf("another namespace: %+v", got)
	}
	if err := s.ReleaseIdempotencyKey(ctx, "b", "k"); err != nil {
		t.Fatal(err)
	}
	if got := claim("b", "k", "h3"); !got.Claimed {
		t.Errorf("after release: %+v", got)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE namespace = 'a'"); err != nil {
		t.Fatal(err)
	}
	if got := claim("a", "k", "h2"); !got.Claimed {
		t.Errorf("an expired key: %+v", got)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE namespace = 'b'"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ExpireIdempotencyKeys(ctx, time.Now()); err != nil || n != 1 {
		t.Errorf("expire: %d, %v; want 1", n, err)
	}
}
