package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Execution logs (issue 38): what an attempt prints, in ordered chunks.
//
// An executor may publish, for each attempt, log chunks to LogStream: a
// JSON array of LogChunk on LogSubject (chunks of several attempts may
// share a message), with a Nats-Msg-Id unique to the message and the same
// on its retried publish. Each chunk names its execution, attempt and
// dispatch (as events do), its sequence number within the attempt (1, 2,
// ..., over all of the attempt's streams, so that interleaved stdout and
// stderr keep their order), a stream name and its lines, each with the
// time it was written. The recorder role stores each (execution, attempt,
// seq) once: a redelivered or re-published chunk is a no-op, and a chunk
// that arrives before an earlier one is read back in sequence order.
//
// Sending no chunk at all is valid: an executor that never logs, or that
// predates logs, keeps working unchanged. docs/wire-protocol.md describes
// the format for executors in other languages.
const (
	// LogStream holds log chunks on their way to the recorder.
	LogStream = "TOCK_LOGS"
	// LogSubject carries a JSON array of LogChunk. LogSubjectPrefix + ">"
	// is the stream's subject space.
	LogSubjectPrefix = "tock.logs."
	LogSubject       = LogSubjectPrefix + "batch"
	// LogRecorderConsumer is the recorder role's durable consumer of
	// LogStream.
	LogRecorderConsumer = "tock_log_recorder"
	// LogMaxAge and LogMaxBytes bound LogStream: chunks the recorder has
	// not read after LogMaxAge are dropped; once LogMaxBytes wait, new
	// publishes are refused (executors count what they could not send
	// as a gap in the log), never stored chunks dropped.
	LogMaxAge   = 24 * time.Hour
	LogMaxBytes = 1 << 30
	// MaxLogLineBytes is the longest line piece: a longer line is cut
	// into pieces of at most this, each but the last marked Split.
	MaxLogLineBytes = 64 << 10
	// MaxLogMessageBytes bounds one message on LogSubject (NATS's default
	// max_payload is 1 MiB).
	MaxLogMessageBytes = 512 << 10
)

// LogStdout and LogStderr are the usual stream names; any other name of
// up to 64 letters, digits, '-', '_' or '.' is valid too.
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
)

// LogChunk is one ordered piece of an attempt's log.
type LogChunk struct {
	ExecutionID  string    `json:"execution_id"`
	ScheduledFor time.Time `json:"scheduled_for"`
	Attempt      int       `json:"attempt"`
	Dispatch     int       `json:"dispatch,omitempty"`
	// Namespace is the execution's (Execution.Namespace): a chunk whose
	// namespace is not its execution's is dropped.
	Namespace string `json:"namespace"`
	// Seq numbers the attempt's chunks from 1, over all its streams.
	Seq    int       `json:"seq"`
	Stream string    `json:"stream"`
	Lines  []LogLine `json:"lines"`
	// Offset is how many bytes the attempt wrote before this chunk, over
	// all its streams, those it could not send included (its buffer was
	// full, or its cap policy cut them): a reader shows the difference
	// from the end of the chunk before as a gap of that many bytes.
	Offset int64 `json:"offset"`
	// TrimFrom and TrimBefore, if TrimBefore is set, say that the
	// attempt's chunks lying wholly in [TrimFrom, TrimBefore) are cut:
	// the head-and-tail cap policy (domain.LogHeadTail) keeps the head
	// and the last chunks of about half the cap, and the recorder
	// deletes what the tail window has left behind.
	TrimFrom   int64 `json:"trim_from,omitempty"`
	TrimBefore int64 `json:"trim_before,omitempty"`
	// End marks the attempt's last chunk: nothing follows it. Its Offset
	// plus its bytes is everything the attempt wrote, so bytes cut after
	// the last line kept (a cap) show as a gap before the end. An end
	// chunk may have no lines. An attempt whose executor died sends none:
	// its log ends where the chunks stop.
	End bool `json:"end,omitempty"`
}

// LogLine is one line, several lines written together (at At), or a
// piece of one: Text ends with "\n" unless the line goes on in the next
// piece (a flush in the middle of a line, or a line longer than
// MaxLogLineBytes, whose pieces but the last are marked Split). The concatenation of an attempt's pieces of a stream, in
// sequence order, is exactly what it wrote to that stream (invalid UTF-8
// replaced by U+FFFD).
type LogLine struct {
	At    time.Time `json:"at"`
	Text  string    `json:"text"`
	Split bool      `json:"split,omitempty"`
}

// Bytes is the size of the chunk's text.
func (c *LogChunk) Bytes() int {
	n := 0
	for _, l := range c.Lines {
		n += len(l.Text)
	}
	return n
}

// CleanLogText is s as a log keeps it: invalid UTF-8 and NUL bytes
// (which Postgres cannot store) replaced by U+FFFD.
func CleanLogText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Normalize makes the chunk's lines what a log keeps, whoever sent
// them: text cleaned (CleanLogText), a line longer than MaxLogLineBytes
// cut into pieces marked Split, empty lines left out.
func (c *LogChunk) Normalize() {
	var out []LogLine
	changed := false
	for i, l := range c.Lines {
		t := CleanLogText(l.Text)
		if t == l.Text && len(t) <= MaxLogLineBytes && t != "" && !changed {
			continue
		}
		if !changed {
			out, changed = append(out, c.Lines[:i]...), true
		}
		for len(t) > MaxLogLineBytes {
			cut := MaxLogLineBytes
			for !utf8.RuneStart(t[cut]) {
				cut--
			}
			out = append(out, LogLine{At: l.At, Text: t[:cut], Split: true})
			t = t[cut:]
		}
		if t != "" {
			out = append(out, LogLine{At: l.At, Text: t, Split: l.Split})
		}
	}
	if changed {
		c.Lines = out
	}
}

// Validate checks the chunk's shape: an execution id, an attempt and a
// sequence number from 1, a valid stream name, at least one line, lines
// as Normalize leaves them. It does not look at whether the execution
// exists (the recorder does).
func (c *LogChunk) Validate() error {
	if _, err := uuid.Parse(c.ExecutionID); err != nil {
		return fmt.Errorf("execution_id %q: not a UUID", c.ExecutionID)
	}
	switch {
	case c.ScheduledFor.IsZero():
		return errors.New("scheduled_for missing")
	case c.Attempt < 1:
		return fmt.Errorf("attempt %d: want 1 or more", c.Attempt)
	case c.Seq < 1:
		return fmt.Errorf("seq %d: want 1 or more", c.Seq)
	case c.Dispatch < 0:
		return fmt.Errorf("dispatch %d: want 0 or more", c.Dispatch)
	case c.Offset < 0:
		return fmt.Errorf("offset %d: want 0 or more", c.Offset)
	case c.TrimBefore != 0 && (c.TrimFrom < 0 || c.TrimBefore < c.TrimFrom || c.TrimBefore > c.Offset):
		return fmt.Errorf("trim [%d, %d): want 0 <= trim_from <= trim_before <= offset %d", c.TrimFrom, c.TrimBefore, c.Offset)
	case c.Namespace == "":
		return errors.New("namespace missing")
	}
	if err := ValidLogStream(c.Stream); err != nil {
		return err
	}
	if len(c.Lines) == 0 && !c.End {
		return errors.New("no lines (only an end chunk may have none)")
	}
	for i, l := range c.Lines {
		if l.Text == "" {
			return fmt.Errorf("line %d: empty", i)
		}
		if len(l.Text) > MaxLogLineBytes {
			return fmt.Errorf("line %d: %d bytes, more than %d", i, len(l.Text), MaxLogLineBytes)
		}
		if l.At.IsZero() {
			return fmt.Errorf("line %d: at missing", i)
		}
		if CleanLogText(l.Text) != l.Text {
			return fmt.Errorf("line %d: not valid UTF-8, or a NUL byte", i)
		}
	}
	return nil
}

// ValidLogStream checks a stream name: 1 to 64 letters, digits, '-', '_'
// or '.'.
func ValidLogStream(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("stream %q: want 1 to 64 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("stream %q: only letters, digits, '-', '_' and '.'", s)
		}
	}
	return nil
}

// LogChunkKey names a chunk: "<execution_id>:<attempt>:<seq>".
func (c *LogChunk) Key() string {
	return c.ExecutionID + ":" + strconv.Itoa(c.Attempt) + ":" + strconv.Itoa(c.Seq)
}
