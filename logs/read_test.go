package logs

import (
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/store/model"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, p := range []Position{{}, {1, 2, 3}, {7, 1 << 20, 1 << 40}} {
		got, err := ParsePosition(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, bad := range []string{"", "1.2", "1.2.3.4", "a.b.c", "-1.0.0", "1.-2.0", "1.2.-3", "99999999999.1.1"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) took it", bad)
		}
	}
}

func c(attempt, seq int, offset int64, young bool, texts ...string) model.LogChunk {
	ch := model.LogChunk{Attempt: attempt, Seq: seq, Stream: "stdout", Offset: offset, Young: young}
	for _, t := range texts {
		ch.Lines = append(ch.Lines, model.LogLine{At: time.Unix(0, 0), Text: t})
		ch.Bytes += len(t)
	}
	return ch
}

// Assemble shows a gap where a chunk does not begin where the one before
// it ended, waits at a young hole (a chunk may be on its way) but reads
// past an old one, starts each attempt afresh, and ends an attempt at its
// end chunk.
func TestAssemble(t *testing.T) {
	end := c(1, 4, 30, false)
	end.End = true
	chunks := []model.LogChunk{c(1, 1, 0, false, "one\ntwo\n"), c(1, 2, 18, false, "three\n"), end, c(2, 1, 0, false, "again\n")}
	out, held := Assemble(chunks, Position{}, true, "", true)
	if held {
		t.Fatal("held without a young hole")
	}
	var b strings.Builder
	var entries []Entry
	for _, ch := range out {
		entries = append(entries, ch.Entries...)
	}
	Text(&b, entries, 0)
	want := "one\ntwo\n[tock: 10 bytes not kept]\nthree\n[tock: 6 bytes not kept]\n=== attempt 2 ===\nagain\n"
	if b.String() != want {
		t.Errorf("text %q, want %q", b.String(), want)
	}
	if last := out[len(out)-1].After; last != (Position{2, 1, 6}) {
		t.Errorf("after %v, want 2.1.6", last)
	}
	if !entries[len(entries)-2].End {
		t.Errorf("entries %+v: attempt 1 does not end", entries)
	}

	// A young chunk after a hole waits; an old one does not.
	young := []model.LogChunk{c(1, 1, 0, false, "a\n"), c(1, 3, 4, true, "c\n")}
	out, held = Assemble(young, Position{}, true, "", true)
	if !held || len(out) != 1 || out[0].After != (Position{1, 1, 2}) {
		t.Errorf("young hole: %+v held %v; want chunk 1 only, held", out, held)
	}
	young[1].Young = false
	if out, held = Assemble(young, Position{}, true, "", true); held || len(out) != 2 {
		t.Errorf("old hole: %d chunks held %v; want both", len(out), held)
	}
	// Reading on from a position: the hole is before the first chunk.
	if out, held = Assemble(young[1:], Position{1, 1, 2}, true, "", true); held || out[0].Entries[0].GapBytes != 2 {
		t.Errorf("from 1.1.2: %+v held %v; want a gap of 2 bytes, then c", out, held)
	}
	// A search keeps the lines that contain it, any case, and no gap.
	out, _ = Assemble(chunks, Position{}, false, "TW", false)
	if len(out[0].Entries) != 1 || out[0].Entries[0].Text != "two\n" || len(out[1].Entries) != 0 {
		t.Errorf("search: %+v", out)
	}
}

// A page read does not wait at a young hole before its first chunk (its
// caller would ask again at once): it shows the gap.
func TestAssemblePageDoesNotWaitAtItsStart(t *testing.T) {
	young := []model.LogChunk{c(1, 3, 4, true, "c\n")}
	out, held := Assemble(young, Position{1, 1, 2}, true, "", false)
	if held || len(out) != 1 || out[0].Entries[0].GapBytes != 2 {
		t.Errorf("page from 1.1.2: %+v held %v; want a gap of 2, then c", out, held)
	}
	if _, held := Assemble(young, Position{1, 1, 2}, true, "", true); !held {
		t.Error("a follow did not wait at the young hole")
	}
}
