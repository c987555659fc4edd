package executor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/wire"
)

// Execution logs (issue 38): a handler writes what it prints to
// Log(ctx), LogStream(ctx, name) or the slog.Logger of Logger(ctx); the
// lines go to tock, ordered, in chunks (wire.LogChunk), live while the
// attempt runs. Writing never blocks the handler for long: each attempt
// holds at most logBufferBytes not yet acknowledged by JetStream, and
// what does not fit is dropped, counted
// (tock_executor_log_dropped_bytes_total) and shown in the log as a gap
// of that many bytes (chunk offsets, see wire.LogChunk). An attempt that
// writes nothing costs nothing.
const (
	// logFlushEvery is how often an attempt's lines written since the
	// last chunk go out (a line written is readable within about this,
	// plus the recorder's write).
	logFlushEvery = 200 * time.Millisecond
	// logChunkBytes closes a chunk early.
	logChunkBytes = 64 << 10
	// logBufferBytes is the most of one attempt's log in flight (handed
	// to the batcher, not yet acknowledged).
	logBufferBytes = 1 << 20
	// logCloseWait bounds how long an attempt's end waits for its last
	// chunks' acknowledgement before it reports the end.
	logCloseWait = 5 * time.Second
)

// ErrLogCap is the cause of an attempt's context cancelled because its log
// passed its cap under the policy domain.LogFail; the attempt fails with
// it.
var ErrLogCap = errors.New("log over its cap")

type logCtxKey struct{}

func withLog(ctx context.Context, l *attemptLog) context.Context {
	return context.WithValue(ctx, logCtxKey{}, l)
}

// Log returns the writer of the attempt's stdout log: everything written
// to it is kept with the attempt (up to its job's cap) and readable live.
// Outside an attempt's context it returns io.Discard.
func Log(ctx context.Context) io.Writer { return LogStream(ctx, wire.LogStdout) }

// LogStream is Log for a named stream (wire.LogStderr, or any name
// wire.ValidLogStream accepts; an invalid one is written as stdout).
func LogStream(ctx context.Context, stream string) io.Writer {
	l, _ := ctx.Value(logCtxKey{}).(*attemptLog)
	if l == nil {
		return io.Discard
	}
	if wire.ValidLogStream(stream) != nil {
		stream = wire.LogStdout
	}
	return streamWriter{l: l, stream: stream}
}

// Logger returns a slog.Logger whose records go, as text lines, to the
// attempt's stderr log; outside an attempt's context, a logger that
// discards. opts may be nil.
func Logger(ctx context.Context, opts *slog.HandlerOptions) *slog.Logger {
	return slog.New(LogHandler(ctx, opts))
}

// LogHandler is Logger's slog.Handler.
func LogHandler(ctx context.Context, opts *slog.HandlerOptions) slog.Handler {
	return slog.NewTextHandler(LogStream(ctx, wire.LogStderr), opts)
}

type streamWriter struct {
	l      *attemptLog
	stream string
}

func (s streamWriter) Write(p []byte) (int, error) {
	s.l.write(s.stream, p)
	return len(p), nil
}

// attemptLog is one attempt's log on its way out.
type attemptLog struct {
	w      *Worker
	d      *delivery
	policy domain.LogPolicy
	// cancel, under domain.LogFail, ends the handler's context.
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	seq    int
	offset int64 // bytes written so far, dropped ones included
	// cur is the chunk being filled (nil: none); raw the bytes of the
	// current stream's unfinished line (with an incomplete UTF-8
	// sequence at its end kept back), and rawAt when it began.
	cur       *wire.LogChunk
	curBytes  int
	raw       []byte
	rawStream string
	rawAt     time.Time
	timer     *time.Timer
	inFlight  atomic.Int64 // bytes handed to the batcher, not yet acknowledged (its callbacks take no lock)
	pending   sync.WaitGroup
	headDone  bool  // head_tail: the head is full, chunks are tail ones
	headEnd   int64 // head_tail: offset where the head ended
	tail      []tailChunk
	tailBytes int64
	overCap   bool
}

// tailChunk is a chunk sent after the head (head_tail), kept to know
// which ones the tail window has left behind.
type tailChunk struct{ offset, end int64 }

// newAttemptLog returns d's log, a part of the delivery (an attempt that
// writes nothing allocates nothing for it but its context's value).
func (w *Worker) newAttemptLog(d *delivery) *attemptLog {
	p := domain.LogPolicy{}
	if d.e.Handler.Log != nil {
		p = *d.e.Handler.Log
	}
	l := &d.logs
	l.w, l.d, l.policy = w, d, p.WithDefaults()
	return l
}

// write takes p for stream: the unfinished line it ends becomes an
// entry with the time it began, the whole lines written together one
// entry (or a few, each at most MaxLogLineBytes) with this write's time,
// and what follows the last newline waits for its end (or the next
// flush).
func (l *attemptLog) write(stream string, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(p) == 0 {
		if l.closed {
			l.w.m.logDroppedBytes.WithLabelValues("late").Add(float64(len(p)))
		}
		return
	}
	now := l.w.now().UTC()
	if stream != l.rawStream && len(l.raw) > 0 {
		l.takeRaw(true) // the other stream's unfinished line, as a piece
	}
	l.rawStream = stream
	if l.timer == nil {
		l.timer = time.AfterFunc(logFlushEvery, l.tick)
	}
	if len(l.raw) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.raw = append(l.raw, p...)
			for len(l.raw) > wire.MaxLogLineBytes {
				l.takeLong()
			}
			return
		}
		l.raw = append(l.raw, p[:i+1]...)
		p = p[i+1:]
		l.emitText(l.raw, l.rawAt)
		l.raw = l.raw[:0]
	}
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		l.emitText(p[:i+1], now)
		p = p[i+1:]
	}
	if len(p) > 0 {
		l.raw, l.rawAt = append(l.raw, p...), now
		for len(l.raw) > wire.MaxLogLineBytes {
			l.takeLong()
		}
	}
}

// emitText adds whole lines written at at, in pieces of at most
// MaxLogLineBytes cut after a newline where there is one (a line longer
// than that is cut anywhere, its pieces marked Split).
func (l *attemptLog) emitText(b []byte, at time.Time) {
	for len(b) > wire.MaxLogLineBytes {
		cut, split := bytes.LastIndexByte(b[:wire.MaxLogLineBytes], '\n')+1, false
		if cut == 0 {
			cut, split = wire.MaxLogLineBytes, true
			for cut > 0 && !utf8.RuneStart(b[cut]) {
				cut--
			}
		}
		l.emit(b[:cut], at, split)
		b = b[cut:]
	}
	if len(b) > 0 {
		l.emit(b, at, false)
	}
}

// takeLong cuts a piece of about MaxLogLineBytes, marked Split, off the
// front of the unfinished line.
func (l *attemptLog) takeLong() {
	cut := wire.MaxLogLineBytes
	for cut > 0 && !utf8.RuneStart(l.raw[cut]) {
		cut--
	}
	l.emit(l.raw[:cut], l.rawAt, true)
	l.raw = append(l.raw[:0], l.raw[cut:]...)
}

// takeRaw adds the unfinished line (all of it, or at a flush all but an
// incomplete UTF-8 sequence at its end) as a piece.
func (l *attemptLog) takeRaw(flush bool) {
	n := len(l.raw)
	if flush {
		// Keep back the start of a character whose other bytes have not
		// been written yet.
		for k := 1; k < utf8.UTFMax && k <= n; k++ {
			if utf8.RuneStart(l.raw[n-k]) {
				if !utf8.FullRune(l.raw[n-k:]) {
					n -= k
				}
				break
			}
		}
	}
	if n == 0 {
		return
	}
	l.emit(l.raw[:n], l.rawAt, false)
	l.raw = append(l.raw[:0], l.raw[n:]...)
}

// emit adds raw, written at at, as one entry, its invalid UTF-8 and NULs
// replaced; if the replacement made it longer than MaxLogLineBytes, as
// several, all but the last marked Split (and the last too if split is
// set).
func (l *attemptLog) emit(raw []byte, at time.Time, split bool) {
	text := wire.CleanLogText(string(raw))
	for len(text) > wire.MaxLogLineBytes {
		cut := wire.MaxLogLineBytes
		for !utf8.RuneStart(text[cut]) {
			cut--
		}
		l.add(wire.LogLine{At: at, Text: text[:cut], Split: true})
		text = text[cut:]
	}
	l.add(wire.LogLine{At: at, Text: text, Split: split})
}

// add puts a line into the current chunk under the cap policy.
func (l *attemptLog) add(line wire.LogLine) {
	size := int64(len(line.Text))
	start := l.offset
	l.offset += size
	capB := l.policy.CapBytes
	switch l.policy.Policy {
	case domain.LogHead, domain.LogFail:
		if start+size > capB {
			if !l.overCap {
				l.overCap = true
				if l.policy.Policy == domain.LogFail && l.cancel != nil {
					l.cancel(fmt.Errorf("%w: more than %d bytes", ErrLogCap, capB))
				}
			}
			l.drop(size, "cap")
			return
		}
	case domain.LogHeadTail:
		if !l.headDone && start+size > capB/2 {
			l.headDone, l.headEnd = true, start
			l.closeChunk()
		}
	}
	if l.cur == nil || l.cur.Stream != l.rawStream {
		l.closeChunk()
		l.cur = &wire.LogChunk{Stream: l.rawStream, Offset: start}
	}
	l.cur.Lines = append(l.cur.Lines, line)
	l.curBytes += int(size)
	if l.curBytes >= logChunkBytes {
		l.closeChunk()
	}
}

// drop counts size bytes not sent.
func (l *attemptLog) drop(size int64, reason string) {
	l.w.m.logDroppedBytes.WithLabelValues(reason).Add(float64(size))
}

// closeChunk hands the current chunk to the batcher, or drops it if the
// attempt has too much in flight already.
func (l *attemptLog) closeChunk() {
	c := l.cur
	if c == nil {
		return
	}
	l.cur, l.curBytes = nil, 0
	size := c.Bytes()
	if size > 0 && l.inFlight.Load()+int64(size) > logBufferBytes {
		l.drop(int64(size), "buffer")
		if !c.End {
			return
		}
		// The end goes out all the same, after the gap.
		c = &wire.LogChunk{Stream: c.Stream, Offset: c.Offset + int64(size), End: true}
		size = 0
	}
	e := l.d.e
	l.seq++
	c.ExecutionID, c.ScheduledFor, c.Attempt, c.Dispatch, c.Namespace, c.Seq =
		e.ExecutionID, e.ScheduledFor, e.Attempt, e.Dispatch, e.Namespace, l.seq
	if l.headDone && c.Offset >= l.headEnd {
		// head_tail: keep the last half of the cap; chunks that fell out
		// of that window are trimmed by the recorder.
		l.tail = append(l.tail, tailChunk{c.Offset, c.Offset + int64(size)})
		l.tailBytes += int64(size)
		k := 0
		for k < len(l.tail)-1 && l.tailBytes-(l.tail[k].end-l.tail[k].offset) >= l.policy.CapBytes/2 {
			l.tailBytes -= l.tail[k].end - l.tail[k].offset
			k++
		}
		if k > 0 {
			l.tail = l.tail[k:]
			c.TrimBefore = l.tail[0].offset
			c.TrimFrom = l.headEnd
		}
	}
	l.inFlight.Add(int64(size))
	l.pending.Add(1)
	l.w.logs.send(c, func(err error) {
		l.inFlight.Add(-int64(size))
		if err != nil {
			l.drop(int64(size), "publish")
			l.d.log().Warn("could not send a log chunk; it is a gap in the log", "seq", c.Seq, "bytes", size, "err", err)
		}
		l.pending.Done()
	})
}

// tick sends what was written since the last chunk, the unfinished line
// included, and sets itself again.
func (l *attemptLog) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if len(l.raw) > 0 {
		l.takeRaw(true)
	}
	l.closeChunk()
	l.timer.Reset(logFlushEvery)
}

// close sends the rest and waits (up to logCloseWait) for every chunk's
// acknowledgement, so that the log is complete in JetStream before the
// attempt's end is reported. It reports whether the log went over its cap
// under domain.LogFail.
func (l *attemptLog) close() (overCapFail bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	if l.timer == nil { // never written
		l.closed = true
		l.mu.Unlock()
		return false
	}
	l.timer.Stop()
	if len(l.raw) > 0 {
		// Whatever is left, an incomplete character too (replaced).
		l.emit(l.raw, l.rawAt, false)
		l.raw = nil
	}
	// The end: on the last chunk if it reaches the end of what was
	// written, else on a chunk of its own there (after bytes cut).
	if l.cur == nil || l.cur.Offset+int64(l.curBytes) != l.offset {
		l.closeChunk()
		l.cur = &wire.LogChunk{Stream: cmp.Or(l.rawStream, wire.LogStdout), Offset: l.offset}
	}
	l.cur.End = true
	l.closeChunk()
	l.closed = true
	over := l.overCap && l.policy.Policy == domain.LogFail
	l.mu.Unlock()
	done := make(chan struct{})
	go func() { l.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(logCloseWait):
		l.d.log().Warn("log chunks not acknowledged in time; reporting the attempt's end without waiting")
	}
	return over
}
