package schedule

import (
	"testing"
	"time"
)

func TestBetweenAndCount(t *testing.T) {
	everyMinute, err := Compile(Spec{Cron: "0 * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	from, to := at("2024-03-01T10:00:00Z"), at("2024-03-01T11:00:00Z")
	for _, c := range []struct {
		name      string
		from, to  time.Time
		n         int
		wantRuns  int
		wantMore  bool
		wantFirst time.Time
	}{
		{"whole hour, from included, to excluded", from, to, 100, 60, false, from},
		{"cut at n", from, to, 10, 10, true, from},
		{"from just after a run", from.Add(time.Millisecond), to, 100, 59, false, at("2024-03-01T10:01:00Z")},
		{"from a fraction of a millisecond after a run", from.Add(time.Microsecond), to, 100, 59, false, at("2024-03-01T10:01:00Z")},
		{"empty range", from.Add(time.Second), from.Add(2 * time.Second), 100, 0, false, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs, more := everyMinute.Between(c.from, c.to, c.n)
			if len(runs) != c.wantRuns || more != c.wantMore {
				t.Fatalf("Between: %d runs, more %v; want %d, %v", len(runs), more, c.wantRuns, c.wantMore)
			}
			if len(runs) > 0 && !runs[0].Equal(c.wantFirst) {
				t.Errorf("first run %s, want %s", runs[0], c.wantFirst)
			}
			for i := 1; i < len(runs); i++ {
				if runs[i].Sub(runs[i-1]) != time.Minute {
					t.Errorf("runs %d and %d are %s apart", i-1, i, runs[i].Sub(runs[i-1]))
				}
			}
			n, ok := everyMinute.Count(c.from, c.to, c.n)
			if n != c.wantRuns || ok == c.wantMore {
				t.Errorf("Count: %d, ok %v; want %d, %v", n, ok, c.wantRuns, !c.wantMore)
			}
		})
	}
	// The window bounds the runs, and a one-shot schedule has none.
	end := at("2024-03-01T10:09:30Z")
	windowed, err := Compile(Spec{Cron: "0 * * * * *", EndAt: &end})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := windowed.Count(from, to, 1000); n != 10 {
		t.Errorf("windowed: %d runs, want 10", n)
	}
	once, err := Compile(Spec{At: &from})
	if err != nil {
		t.Fatal(err)
	}
	if runs, more := once.Between(from.Add(-time.Hour), to, 10); len(runs) != 0 || more {
		t.Errorf("one-shot: %v %v", runs, more)
	}
}

func BenchmarkCountMillionSeconds(b *testing.B) {
	every, err := Compile(Spec{Cron: "* * * * * *"})
	if err != nil {
		b.Fatal(err)
	}
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		if n, ok := every.Count(from, from.Add(1_000_000*time.Second), 1_000_000); n != 1_000_000 || !ok {
			b.Fatal(n, ok)
		}
	}
}
