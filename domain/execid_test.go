package domain

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestExecutionIDIsStableAndCarriesTime(t *testing.T) {
	job := uuid.MustParse("0192f0c4-7a3b-7c1d-9e2f-0123456789ab")
	at := time.Date(2026, 11, 22, 9, 30, 1, 250_000_000, time.UTC)

	a, b := ExecutionID(job, at), ExecutionID(job, at)
	if a != b {
		t.Fatalf("same firing gave two ids: %s %s", a, b)
	}
	if a.Version() != 8 || a.Variant() != uuid.RFC4122 {
		t.Fatalf("id %s: version %d variant %v, want 8 and RFC 4122", a, a.Version(), a.Variant())
	}
	if got := ExecutionTime(a); !got.Equal(at) {
		t.Fatalf("ExecutionTime = %s, want %s", got, at)
	}
	if c := ExecutionID(job, at.Add(time.Second)); c == a {
		t.Fatal("different scheduled times gave the same id")
	}
	if d := ExecutionID(uuid.New(), at); d == a {
		t.Fatal("different jobs gave the same id")
	}
	if later := ExecutionID(job, at.Add(time.Millisecond)); later.String() <= a.String() {
		t.Fatalf("ids do not sort by time: %s then %s", a, later)
	}
}
