package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 500e6, time.UTC)
	end := time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC)
	c, err := Compile(Spec{Cron: "* * * * * *", StartAt: &start, EndAt: &end})
	if err != nil {
		t.Fatal(err)
	}
	// Before the window: the first run is the first at or after start.
	first, err := c.First(start.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 1, 10, 0, 1, 0, time.UTC); !first.Equal(want) {
		t.Errorf("First before the window = %v, want %v", first, want)
	}
	var runs []time.Time
	for t0, ok := first, true; ok; t0, ok = c.Next(t0) {
		runs = append(runs, t0)
	}
	// 10:00:01 through 10:00:05: the end is inclusive.
	if len(runs) != 5 || !runs[4].Equal(end) {
		t.Errorf("runs in the window = %v, want 5 ending at %v", runs, end)
	}
	// After the window: no run, and First says so on end_at.
	_, err = c.First(end)
	if fe, ok := err.(*FieldError); !ok || fe.Field != "schedule.end_at" {
		t.Errorf("First after the window: err %v, want a FieldError on schedule.end_at", err)
	}
	// "@every" keeps its grid inside the window.
	ev, err := Compile(Spec{Cron: "@every 10s", StartAt: &start})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ev.Next(start.Add(-time.Minute)); !got.Equal(time.Date(2026, 3, 1, 10, 0, 10, 0, time.UTC)) {
		t.Errorf("@every 10s from before start_at = %v, want 10:00:10", got)
	}
}

func TestBoundsRefused(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	before := at.Add(-time.Hour)
	tests := []struct {
		spec  Spec
		field string
		want  string
	}{
		{Spec{At: &at, StartAt: &before}, "schedule.start_at", "only allowed with a cron"},
		{Spec{In: "1h", EndAt: &at}, "schedule.end_at", "only allowed with a cron"},
		{Spec{At: &at, MaxRuns: 3}, "schedule.max_runs", "only allowed with a cron"},
		{Spec{Cron: "@hourly", MaxRuns: -1}, "schedule.max_runs", "at least 1"},
		{Spec{Cron: "@hourly", StartAt: &at, EndAt: &before}, "schedule.end_at", "before start_at"},
		{Spec{Cron: "@hourly", Jitter: "soon"}, "schedule.jitter", "invalid duration"},
		{Spec{Cron: "@hourly", Jitter: "0s"}, "schedule.jitter", "at least 1ms"},
		{Spec{Cron: "@hourly", Jitter: "25h"}, "schedule.jitter", "longer than"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.spec)
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != tt.field || !strings.Contains(fe.Message, tt.want) {
			t.Errorf("Compile(%+v) = %v, want a FieldError on %s saying %q", tt.spec, err, tt.field, tt.want)
		}
	}
	// The cache checks what Compile checks, whatever it holds.
	var cache Cache
	if _, err := cache.Compile(Spec{Cron: "@hourly", MaxRuns: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Compile(Spec{Cron: "@hourly", MaxRuns: -2}); err == nil {
		t.Error("cache.Compile accepted max_runs -2 after compiling the same cron with 2")
	}
}

func TestJitterOffset(t *testing.T) {
	c, err := Compile(Spec{Cron: "@every 1s", Jitter: "30s"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	var sum time.Duration
	const n = 10000
	for i := 0; i < n; i++ {
		key := [16]byte{byte(i), byte(i >> 8), 7}
		off := c.Offset(key, t0)
		if off < 0 || off >= 30*time.Second || off%time.Millisecond != 0 {
			t.Fatalf("offset %v out of [0, 30s) or not whole milliseconds", off)
		}
		if again := c.Offset(key, t0); again != off {
			t.Fatalf("offset not deterministic: %v then %v", off, again)
		}
		seen[off] = true
		sum += off
	}
	// Spread: many distinct offsets, mean near the middle.
	if len(seen) < n/2 {
		t.Errorf("only %d distinct offsets of %d jobs", len(seen), n)
	}
	if mean := sum / n; mean < 13*time.Second || mean > 17*time.Second {
		t.Errorf("mean offset %v, want about 15s", mean)
	}
	// Another time of the same job gets its own offset.
	key := [16]byte{1}
	differ := false
	for i := 1; i < 10 && !differ; i++ {
		differ = c.Offset(key, t0.Add(time.Duration(i)*time.Second)) != c.Offset(key, t0)
	}
	if !differ {
		t.Error("a job's offset is the same at every time")
	}
	if none, _ := Compile(Spec{Cron: "@hourly"}); none.Offset(key, t0) != 0 {
		t.Error("offset without jitter is not 0")
	}
}
