package logs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// HoleWait is how long a reader waits for a chunk missing between two
// stored ones of an attempt (chunks of one attempt can be recorded out of
// order: the recorder writes batches side by side) before it reads on
// and shows the hole as a gap. store.ListLogChunks marks chunks
// recorded more recently than this (model.LogChunk.Young).
const HoleWait = 5 * time.Second

// Position is where a read of a log stopped: after chunk Seq of attempt
// Attempt, whose text ended at byte End of the attempt's log. The zero
// Position is the start of the log; {Attempt: n} the start of attempt n.
type Position struct {
	Attempt, Seq int
	End          int64
}

// String is the position as the API writes it (a page's next, an
// event's id): "attempt.seq.end".
func (p Position) String() string {
	return strconv.Itoa(p.Attempt) + "." + strconv.Itoa(p.Seq) + "." + strconv.FormatInt(p.End, 10)
}

// ParsePosition reads a Position's String.
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Position{}, errors.New("want attempt.seq.end, as a page's next or an event's id")
	}
	a, err1 := strconv.Atoi(parts[0])
	q, err2 := strconv.Atoi(parts[1])
	e, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || a < 0 || q < 0 || e < 0 || a > 1<<30 || q > 1<<30 {
		return Position{}, fmt.Errorf("want attempt.seq.end, three numbers from 0, as a page's next or an event's id")
	}
	return Position{a, q, e}, nil
}

// Entry is one entry of a log as a reader gets it: a line (or a piece of
// one), a gap, or the end of an attempt's log.
type Entry struct {
	Attempt, Seq int
	Stream       string
	At           time.Time
	Text         string
	Split        bool
	// GapBytes, on an entry without text: bytes the attempt wrote here
	// that were not kept.
	GapBytes int64
	// End: the attempt's log ends here.
	End bool
}

// Chunk is the entries of one stored chunk and the position after it.
type Chunk struct {
	Entries []Entry
	After   Position
}

// Assemble turns chunks, listed in (attempt, seq) order after from,
// into entries: a gap entry before a chunk that does not begin where the
// one before it ended (when gaps is set: not for a read of one stream or
// a search, whose chunks are not contiguous), then its lines (those
// containing search, if set, in any case), then an end entry if it is
// its attempt's last. It stops before a chunk that follows a missing
// one while that chunk is young (see HoleWait): the missing one may be
// on its way. held reports that it stopped so. A page read (wait false)
// stops so only after a chunk it returns, never at its first: its
// caller would ask again at once; a follow (wait true) waits there too.
func Assemble(chunks []model.LogChunk, from Position, gaps bool, search string, wait bool) (out []Chunk, held bool) {
	pos := from
	needle := strings.ToLower(search)
	for i := range chunks {
		c := &chunks[i]
		expectSeq, expectEnd := 1, int64(0)
		if c.Attempt == pos.Attempt {
			expectSeq, expectEnd = pos.Seq+1, pos.End
		}
		if gaps && c.Seq != expectSeq && c.Young && (wait || len(out) > 0) {
			return out, true
		}
		var ch Chunk
		if gaps && c.Offset > expectEnd {
			ch.Entries = append(ch.Entries, Entry{Attempt: c.Attempt, Seq: c.Seq, Stream: c.Stream, At: c.At, GapBytes: c.Offset - expectEnd})
		}
		for _, l := range c.Lines {
			if needle == "" {
				ch.Entries = append(ch.Entries, Entry{Attempt: c.Attempt, Seq: c.Seq, Stream: c.Stream, At: l.At, Text: l.Text, Split: l.Split})
				continue
			}
			// An entry may hold several lines written together: a search
			// keeps the lines that match.
			for line := range strings.SplitAfterSeq(l.Text, "\n") {
				if line != "" && strings.Contains(strings.ToLower(line), needle) {
					ch.Entries = append(ch.Entries, Entry{Attempt: c.Attempt, Seq: c.Seq, Stream: c.Stream, At: l.At, Text: line,
						Split: l.Split && !strings.HasSuffix(line, "\n")})
				}
			}
		}
		if c.End {
			ch.Entries = append(ch.Entries, Entry{Attempt: c.Attempt, Seq: c.Seq, Stream: c.Stream, At: c.At, End: true})
		}
		pos = Position{c.Attempt, c.Seq, c.Offset + int64(c.Bytes)}
		ch.After = pos
		out = append(out, ch)
	}
	return out, false
}

// Text writes entries as plain text: lines as they were written, a gap
// as "[tock: N bytes not kept]" on a line of its own, and, when several
// attempts are read, "=== attempt N ===" before each attempt after the
// first one seen (prev is the attempt of the text before these entries;
// 0 at the start).
func Text(b *strings.Builder, entries []Entry, prev int) int {
	for _, e := range entries {
		if e.Attempt != prev {
			if prev != 0 {
				fmt.Fprintf(b, "=== attempt %d ===\n", e.Attempt)
			}
			prev = e.Attempt
		}
		switch {
		case e.GapBytes > 0:
			if t := b.String(); t != "" && t[len(t)-1] != '\n' {
				b.WriteByte('\n')
			}
			fmt.Fprintf(b, "[tock: %d bytes not kept]\n", e.GapBytes)
		case e.Text != "":
			b.WriteString(e.Text)
		}
	}
	return prev
}
