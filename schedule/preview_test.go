package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// previewRun is one expected run of a preview: its wall clock with the
// zone's offset, and its mark ("", "moved 02:30", "repeated 1").
type previewRun struct {
	local string
	mark  string
}

// markOf writes a Fire's mark the way previewRun does.
func markOf(f Fire) string {
	switch f.DST {
	case DSTMoved:
		return "moved " + f.Nominal[len("2006-01-02T"):len("2006-01-02T15:04")]
	case DSTRepeated:
		return fmt.Sprintf("repeated %d", f.Occurrence)
	}
	return string(f.DST)
}

// firingChain is the runs the firing path makes for a job created at
// from: First, then Next of each run, as the scanner passes them.
func firingChain(t *testing.T, c *Schedule, from time.Time, n int) []time.Time {
	t.Helper()
	first, err := c.First(from)
	if err != nil {
		t.Fatalf("First(%v): %v", from, err)
	}
	out := []time.Time{first}
	for c.Recurring() && len(out) < n {
		next, ok := c.Next(out[len(out)-1])
		if !ok {
			break
		}
		out = append(out, next)
	}
	return out
}

// TestPreviewDST previews the spring-forward and fall-back days of three
// zones (one with a 30-minute change) and checks that every run is the
// one firing makes, with the mark DESIGN.md "Time" implies. 2026 changes:
//
//	America/New_York     2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
//	Europe/Berlin        2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET
//	Australia/Lord_Howe  2026-10-04 02:00 +10:30 -> 02:30 +11; 2026-04-05 02:00 +11 -> 01:30 +10:30
func TestPreviewDST(t *testing.T) {
	const ny, berlin, lh = "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"
	tests := []struct {
		name, cron, tz, from string
		want                 []previewRun
	}{
		// New York, spring forward: 02:00-02:59 does not exist.
		{"NY spring fixed in the gap", "0 30 2 * * *", ny, "2026-03-07T12:00:00-05:00", []previewRun{
			{"2026-03-08T03:00:00-04:00", "moved 02:30"}, {"2026-03-09T02:30:00-04:00", ""}, {"2026-03-10T02:30:00-04:00", ""}}},
		{"NY spring fixed hour range", "0 0 1-4 * * *", ny, "2026-03-08T00:00:00-05:00", []previewRun{
			{"2026-03-08T01:00:00-05:00", ""}, {"2026-03-08T03:00:00-04:00", "moved 02:00"}, {"2026-03-08T04:00:00-04:00", ""}}},
		{"NY spring wildcard skips the gap", "0 */30 * * * *", ny, "2026-03-08T01:00:00-05:00", []previewRun{
			{"2026-03-08T01:30:00-05:00", ""}, {"2026-03-08T03:00:00-04:00", ""}, {"2026-03-08T03:30:00-04:00", ""}}},
		// New York, fall back: 01:00-01:59 happens twice.
		{"NY fall fixed first pass only", "0 30 1 * * *", ny, "2026-10-31T12:00:00-04:00", []previewRun{
			{"2026-11-01T01:30:00-04:00", "repeated 1"}, {"2026-11-02T01:30:00-05:00", ""}}},
		{"NY fall wildcard both passes", "0 */30 * * * *", ny, "2026-11-01T00:45:00-04:00", []previewRun{
			{"2026-11-01T01:00:00-04:00", "repeated 1"}, {"2026-11-01T01:30:00-04:00", "repeated 1"},
			{"2026-11-01T01:00:00-05:00", "repeated 2"}, {"2026-11-01T01:30:00-05:00", "repeated 2"},
			{"2026-11-01T02:00:00-05:00", ""}}},

		// Berlin, spring forward: 02:00-02:59 does not exist.
		{"Berlin spring fixed in the gap", "0 30 2 * * *", berlin, "2026-03-28T12:00:00+01:00", []previewRun{
			{"2026-03-29T03:00:00+02:00", "moved 02:30"}, {"2026-03-30T02:30:00+02:00", ""}}},
		{"Berlin spring fixed times sharing the gap", "0 0,30 2 * * *", berlin, "2026-03-29T00:00:00+01:00", []previewRun{
			{"2026-03-29T03:00:00+02:00", "moved 02:00"}, {"2026-03-30T02:00:00+02:00", ""}, {"2026-03-30T02:30:00+02:00", ""}}},
		{"Berlin spring wildcard hour", "0 15 * * * *", berlin, "2026-03-29T00:30:00+01:00", []previewRun{
			{"2026-03-29T01:15:00+01:00", ""}, {"2026-03-29T03:15:00+02:00", ""}, {"2026-03-29T04:15:00+02:00", ""}}},
		// Berlin, fall back: 02:00-02:59 happens twice.
		{"Berlin fall fixed", "0 30 2 * * *", berlin, "2026-10-24T12:00:00+02:00", []previewRun{
			{"2026-10-25T02:30:00+02:00", "repeated 1"}, {"2026-10-26T02:30:00+01:00", ""}}},
		{"Berlin fall @hourly", "@hourly", berlin, "2026-10-25T01:30:00+02:00", []previewRun{
			{"2026-10-25T02:00:00+02:00", "repeated 1"}, {"2026-10-25T02:00:00+01:00", "repeated 2"}, {"2026-10-25T03:00:00+01:00", ""}}},

		// Lord Howe, spring forward by half an hour: 02:00-02:29 does not exist.
		{"Lord Howe spring fixed in the gap", "0 15 2 * * *", lh, "2026-10-03T12:00:00+10:30", []previewRun{
			{"2026-10-04T02:30:00+11:00", "moved 02:15"}, {"2026-10-05T02:15:00+11:00", ""}}},
		{"Lord Howe spring fixed at the gap start", "0 0 2 * * *", lh, "2026-10-03T12:00:00+10:30", []previewRun{
			{"2026-10-04T02:30:00+11:00", "moved 02:00"}, {"2026-10-05T02:00:00+11:00", ""}}},
		{"Lord Howe spring fixed at the gap end", "0 30 2 * * *", lh, "2026-10-03T12:00:00+10:30", []previewRun{
			{"2026-10-04T02:30:00+11:00", ""}, {"2026-10-05T02:30:00+11:00", ""}}},
		{"Lord Howe spring wildcard", "0 0,30 * * * *", lh, "2026-10-04T01:00:00+10:30", []previewRun{
			{"2026-10-04T01:30:00+10:30", ""}, {"2026-10-04T02:30:00+11:00", ""}, {"2026-10-04T03:00:00+11:00", ""}}},
		// Lord Howe, fall back by half an hour: 01:30-01:59 happens twice.
		{"Lord Howe fall fixed", "0 45 1 * * *", lh, "2026-04-04T12:00:00+11:00", []previewRun{
			{"2026-04-05T01:45:00+11:00", "repeated 1"}, {"2026-04-06T01:45:00+10:30", ""}}},
		{"Lord Howe fall fixed before the repeat", "0 15 1 * * *", lh, "2026-04-04T12:00:00+11:00", []previewRun{
			{"2026-04-05T01:15:00+11:00", ""}, {"2026-04-06T01:15:00+10:30", ""}}},
		{"Lord Howe fall wildcard", "0 */15 * * * *", lh, "2026-04-05T01:20:00+11:00", []previewRun{
			{"2026-04-05T01:30:00+11:00", "repeated 1"}, {"2026-04-05T01:45:00+11:00", "repeated 1"},
			{"2026-04-05T01:30:00+10:30", "repeated 2"}, {"2026-04-05T01:45:00+10:30", "repeated 2"},
			{"2026-04-05T02:00:00+10:30", ""}}},
		{"Lord Howe fall @every", "@every 30m", lh, "2026-04-05T01:20:00+11:00", []previewRun{
			{"2026-04-05T01:30:00+11:00", "repeated 1"}, {"2026-04-05T01:30:00+10:30", "repeated 2"},
			{"2026-04-05T02:00:00+10:30", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, Spec{Cron: tt.cron, Timezone: tt.tz})
			from := mustTime(t, tt.from)
			got, err := c.Preview(from, len(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			fired := firingChain(t, c, from, len(tt.want))
			if len(got) != len(tt.want) || len(fired) != len(tt.want) {
				t.Fatalf("%d runs previewed, %d fired; want %d", len(got), len(fired), len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if !g.At.Equal(fired[i]) || g.At.Location() != time.UTC {
					t.Errorf("run %d: previewed %v, fired %v", i, g.At, fired[i])
				}
				if !g.Local.Equal(g.At) || g.Local.Location() != c.Location() {
					t.Errorf("run %d: Local %v is not At %v in %s", i, g.Local, g.At, c.Location())
				}
				if l := g.Local.Format(time.RFC3339); l != w.local || markOf(g) != w.mark {
					t.Errorf("run %d: %s %q, want %s %q", i, l, markOf(g), w.local, w.mark)
				}
				if (g.DST == "") != (g.Note == "") {
					t.Errorf("run %d: mark %q with note %q", i, g.DST, g.Note)
				}
			}
		})
	}
}

func TestPreviewNotes(t *testing.T) {
	tests := []struct {
		cron, tz, from, want string
	}{
		{"0 30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00",
			"02:30 did not exist (clocks went forward from 02:00 to 03:00); runs at the first instant after the gap"},
		{"0 30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00",
			"01:30 happens twice (clocks go back from 02:00 to 01:00); runs on the first occurrence only"},
		{"0 */30 * * * *", "Australia/Lord_Howe", "2026-04-05T01:20:00+11:00",
			"01:30 happens twice (clocks go back from 02:00 to 01:30); runs on both occurrences, this is the first"},
		{"* 30 1 * * *", "Australia/Lord_Howe", "2026-04-05T01:30:00+10:30",
			"01:30:01 happens twice (clocks went back from 02:00 to 01:30); this is the second occurrence"},
	}
	for _, tt := range tests {
		c := mustCompile(t, Spec{Cron: tt.cron, Timezone: tt.tz})
		got, err := c.Preview(mustTime(t, tt.from), 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("%q: %v, %v", tt.cron, got, err)
		}
		if got[0].Note != tt.want {
			t.Errorf("%q in %s: note %q, want %q", tt.cron, tt.tz, got[0].Note, tt.want)
		}
	}
}

func TestPreviewOneShot(t *testing.T) {
	from := mustTime(t, "2026-10-31T12:00:00Z")
	at := mustTime(t, "2026-11-01T01:30:00-05:00") // New York's second 01:30
	tests := []struct {
		name string
		spec Spec
		want string
		mark string
	}{
		{"at", Spec{At: &at, Timezone: "America/New_York"}, "2026-11-01T06:30:00Z", "repeated 2"},
		{"in", Spec{In: "90s", Timezone: "Europe/Berlin"}, "2026-10-31T12:01:30Z", ""},
		{"now", Spec{}, "2026-10-31T12:00:00Z", ""},
	}
	for _, tt := range tests {
		c := mustCompile(t, tt.spec)
		got, err := c.Preview(from, 10)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) != 1 || got[0].At.Format(time.RFC3339) != tt.want || markOf(got[0]) != tt.mark {
			t.Errorf("%s: %+v, want one run at %s %q", tt.name, got, tt.want, tt.mark)
		}
	}

	past := mustTime(t, "2026-10-01T00:00:00Z")
	_, err := mustCompile(t, Spec{At: &past}).Preview(from, 10)
	if fe, ok := err.(*FieldError); !ok || fe.Field != "schedule.at" {
		t.Errorf("a past moment: %v, want a FieldError on schedule.at", err)
	}
	early := mustTime(t, "2026-11-01T01:30:00-04:00") // its first 01:30
	if got, _ := mustCompile(t, Spec{At: &early, Timezone: "America/New_York"}).Preview(from, 1); len(got) != 1 ||
		got[0].Note != "01:30 happens twice (clocks go back from 02:00 to 01:00); this is the first occurrence" {
		t.Errorf("a one-shot in a repeated hour: %+v", got)
	}
	if got, err := mustCompile(t, Spec{Cron: "@daily"}).Preview(from, 0); got != nil || err != nil {
		t.Errorf("n = 0: %v, %v", got, err)
	}
}

// TestPreviewMatchesBruteForce checks Preview against firing and its
// marks against a slow reference that reads the wall clock from the time
// package alone, around every DST change the tests know.
func TestPreviewMatchesBruteForce(t *testing.T) {
	exprs := []string{
		"* * * * * *", "*/15 * * * * *", "0 */20 * * * *", "0 30 * * * *", "0 0 * * * *",
		"0 30 2 * * *", "0 0 2 * * *", "0 0,30 1-3 * * *", "0 0-59/7 0-4 * * *", "30 15 2,3 * * *",
		"*/20 30 1 * * *", "59 59 1 * * *", "0 15,45 * * * *", "? 0 2 * * *", "0 0-59/10 1,2 * * *",
	}
	r := rand.New(rand.NewPCG(7, 8))
	for len(exprs) < 30 {
		e := randCron(r, true)
		if !strings.HasPrefix(e, "@") {
			exprs = append(exprs, e)
		}
	}
	const window = 2 * 3600
	seen := map[DSTMark]int{}
	for _, tr := range dstTransitions(t) {
		loc := tr.Location()
		from, to := tr.Add(-window*time.Second), tr.Add(window*time.Second)
		for _, expr := range exprs {
			c := mustCompile(t, Spec{Cron: expr, Timezone: loc.String()})
			ref := newBrute(t, expr, loc)
			fired := firingChain(t, c, from, 2*window+2)
			for len(fired) > 0 && fired[len(fired)-1].After(to) {
				fired = fired[:len(fired)-1]
			}
			got, err := c.Preview(from, len(fired))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(fired) {
				t.Fatalf("%q in %s: %d previewed, %d fired", expr, loc, len(got), len(fired))
			}
			for i, f := range got {
				if !f.At.Equal(fired[i]) {
					t.Fatalf("%q in %s: run %d previewed %v, fired %v", expr, loc, i, f.At, fired[i])
				}
				if want := ref.mark(f.At.Unix()); markOf(f) != want {
					t.Errorf("%q in %s: %s marked %q, want %q", expr, loc, f.Local.Format(time.RFC3339), markOf(f), want)
				}
				seen[f.DST]++
			}
		}
	}
	if seen[DSTMoved] == 0 || seen[DSTRepeated] == 0 {
		t.Errorf("marks seen: %v; the cases exercise neither moved nor repeated runs", seen)
	}
	t.Logf("runs by mark: %v", seen)
}

// mark is the reference's mark of run u: moved when a fixed-time job's
// named wall time lies in a gap ending at u, repeated when the same wall
// clock reads u's an offset change later (first pass) or earlier (second).
func (b brute) mark(u int64) string {
	tm := time.Unix(u, 0).In(b.loc)
	_, o1 := time.Unix(u-1, 0).In(b.loc).Zone()
	_, o2 := tm.Zone()
	if !b.wall && o2 > o1 {
		for w := u + int64(o1); w < u+int64(o2); w++ {
			if wt := time.Unix(w, 0).UTC(); b.matches(wt) {
				return "moved " + wt.Format("15:04")
			}
		}
	}
	for _, k := range []int64{1800, 3600, 7200} {
		if sameWall(time.Unix(u+k, 0).In(b.loc), tm) {
			return "repeated 1"
		}
		if sameWall(time.Unix(u-k, 0).In(b.loc), tm) {
			return "repeated 2"
		}
	}
	return ""
}
