package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// chunk is attempt's chunk seq of e, at offset, of one line text.
func chunk(e *model.Execution, attempt, seq int, offset int64, text string) model.LogChunk {
	return model.LogChunk{ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Namespace: e.Namespace, Attempt: attempt, Seq: seq,
		Stream: "stdout", Offset: offset, Bytes: len(text), At: e.ScheduledFor,
		Lines: []model.LogLine{{At: e.ScheduledFor, Text: text}}}
}

// RecordLogChunks stores a chunk once (a redelivery, or the same chunk
// twice in a batch, is a duplicate), and no chunk of an unknown
// execution, of another namespace's, or of one that ended longer ago than
// the grace; ListLogChunks reads them back in (attempt, seq) order,
// whatever order they were recorded in, by attempt, stream, search and
// position, and leaves out what a trim cut (deleted, or not yet).
func TestLogChunksStoredOnceAndReadInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	e := firedIn(t, s, 1)
	rec := func(grace time.Duration, cs ...model.LogChunk) []string {
		t.Helper()
		v, err := s.RecordLogChunks(ctx, cs, grace)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Out of order, one twice in the batch.
	got := rec(time.Minute, chunk(e, 1, 2, 6, "world\n"), chunk(e, 1, 1, 0, "hello "), chunk(e, 1, 2, 6, "world\n"))
	if want := []string{model.LogStored, model.LogStored, model.LogDuplicate}; !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	foreign := chunk(e, 1, 3, 12, "not mine\n")
	foreign.Namespace = "other"
	unknown := chunk(e, 1, 1, 0, "who?\n")
	unknown.ExecutionID = uuid.New()
	got = rec(time.Minute, chunk(e, 1, 1, 0, "hello "), foreign, unknown, chunk(e, 2, 1, 0, "again\n"))
	if want := []string{model.LogDuplicate, model.LogForeign, model.LogUnknown, model.LogStored}; !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	list := func(f LogFilter) string {
		t.Helper()
		f.ExecutionID, f.ScheduledFor = e.ID, e.ScheduledFor
		cs, err := s.ListLogChunks(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		for _, c := range cs {
			out += fmt.Sprintf("%d.%d:", c.Attempt, c.Seq)
			for _, l := range c.Lines {
				out += l.Text
			}
		}
		return out
	}
	if got, want := list(LogFilter{}), "1.1:hello 1.2:world\n2.1:again\n"; got != want {
		t.Errorf("whole log %q, want %q", got, want)
	}
	if got, want := list(LogFilter{Attempt: 2}), "2.1:again\n"; got != want {
		t.Errorf("attempt 2 %q, want %q", got, want)
	}
	if got, want := list(LogFilter{After: [2]int{1, 1}, Limit: 1}), "1.2:world\n"; got != want {
		t.Errorf("page after 1.1 %q, want %q", got, want)
	}
	if got, want := list(LogFilter{Search: "WORLD"}), "1.2:world\n"; got != want {
		t.Errorf("search %q, want %q", got, want)
	}
	if got, want := list(LogFilter{Search: "%"}), ""; got != want {
		t.Errorf("search for %% %q, want nothing (a literal, not a wildcard)", got)
	}
	if got := list(LogFilter{Stream: "stderr"}); got != "" {
		t.Errorf("stderr %q, want nothing", got)
	}

	// A trim: chunks 3 to 5 of attempt 3 are the tail; chunk 6 cuts 3
	// and 4 (offsets 10 to 30), chunk 5's is recorded after it.
	rec(time.Minute, chunk(e, 3, 1, 0, "head 1...\n"), chunk(e, 3, 2, 10, "mid 2....\n"), chunk(e, 3, 3, 20, "mid 3....\n"))
	c6 := chunk(e, 3, 5, 40, "tail 5...\n")
	c6.TrimFrom, c6.TrimBefore = 10, 30
	rec(time.Minute, c6)
	rec(time.Minute, chunk(e, 3, 4, 30, "tail 4...\n"))
	if got, want := list(LogFilter{Attempt: 3}), "3.1:head 1...\n3.4:tail 4...\n3.5:tail 5...\n"; got != want {
		t.Errorf("trimmed log %q, want %q", got, want)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM execution_logs WHERE execution_id = $1 AND attempt = 3`, e.ID).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d chunks of attempt 3 stored (%v), want 3: the trimmed ones deleted", left, err)
	}

	// A finished execution takes chunks for the grace, then none.
	now := dbNow(t, s)
	record(t, s, model.AttemptEvent{Type: domain.EventSucceeded, ID: e.ID, Attempt: 3, Executor: "x", At: now, StartedAt: &now})
	if got := rec(time.Hour, chunk(e, 3, 6, 50, "late but fine\n")); got[0] != model.LogStored {
		t.Errorf("a chunk just after the end: %v, want stored", got)
	}
	time.Sleep(20 * time.Millisecond)
	if got := rec(time.Millisecond, chunk(e, 3, 7, 64, "too late\n")); got[0] != model.LogFinished {
		t.Errorf("a chunk past the grace: %v, want %s", got, model.LogFinished)
	}
}
