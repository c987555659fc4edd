package main

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// A history day holds perDay executions in time order, one per job and
// time, each with the id the scheduler would give it, and about 1 %
// failed and 0.1 % dead (three attempts rows each); the same day comes
// out the same in every load, and today's part stops at until.
func TestHistoryDay(t *testing.T) {
	const jobs, perDay = 1000, 10_000
	g := newHistGen(jobs, 4, perDay, 16)
	g.specs = make([]uuid.UUID, jobs)
	day := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	read := func(until time.Time) (*histDay, [][]any) {
		src := g.day(day, until)
		var rows [][]any
		for src.Next() {
			v, _ := src.Values()
			rows = append(rows, v)
		}
		return src, rows
	}
	src, rows := read(day.AddDate(0, 0, 1))
	if len(rows) != perDay {
		t.Fatalf("%d executions, want %d", len(rows), perDay)
	}
	seen := map[uuid.UUID]bool{}
	states := map[string]int{}
	var last time.Time
	for _, r := range rows {
		id, job, at := r[0].(uuid.UUID), r[1].(uuid.UUID), r[5].(time.Time)
		if at.Before(last) || at.Before(day) || !at.Before(day.AddDate(0, 0, 1)) {
			t.Fatalf("%s after %s, or outside the day", at, last)
		}
		last = at
		if id != domain.ExecutionID(job, at) || seen[id] {
			t.Fatalf("execution %s of %s at %s: not its id, or twice", id, job, at)
		}
		seen[id] = true
		states[r[7].(string)]++
	}
	if f, d := states["failed"], states["dead"]; f < 50 || f > 200 || d < 2 || d > 30 || len(src.attempts) != 3*d {
		t.Errorf("%d failed, %d dead, %d attempts rows; want about 100, 10, 3 a dead one", f, d, len(src.attempts))
	}
	if _, again := read(day.AddDate(0, 0, 1)); again[perDay/2][0] != rows[perDay/2][0] || again[perDay/2][7] != rows[perDay/2][7] {
		t.Error("the same day came out differently")
	}
	// A quarter of the day, give or take the jobs' offsets.
	if _, part := read(day.Add(6 * time.Hour)); len(part) < perDay/4-20 || len(part) > perDay/4+20 || !part[len(part)-1][5].(time.Time).Before(day.Add(6*time.Hour)) {
		t.Errorf("until 06:00: %d executions, want about %d, all before", len(part), perDay/4)
	}
}

// --history-delete needs every-second jobs to measure, and its own flags
// go with it.
func TestValidateHistoryDelete(t *testing.T) {
	base := historyFlags{HistoryDays: 2, HistoryPerDay: 5_000_000, HistoryJobs: 100_000, HistoryNamespaces: 5,
		HistoryRepeat: 1, HistoryFireJobs: 100}
	for _, tc := range []struct {
		name string
		set  func(*historyFlags)
		ok   bool
	}{
		{"the full run", func(f *historyFlags) { f.HistoryDelete = true }, true},
		{"archived, batches of 1000", func(f *historyFlags) {
			f.HistoryDelete, f.HistoryArchiveDir, f.HistoryDeleteBatch = true, t.TempDir(), 1000
		}, true},
		{"no jobs firing", func(f *historyFlags) { f.HistoryDelete, f.HistoryFireJobs = true, 0 }, false},
		{"a negative batch", func(f *historyFlags) { f.HistoryDelete, f.HistoryDeleteBatch = true, -1 }, false},
		{"a pause without the delete", func(f *historyFlags) { f.HistoryDeletePause = time.Second }, false},
	} {
		c := &cli{historyFlags: base}
		tc.set(&c.historyFlags)
		if err := c.validateHistory(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
