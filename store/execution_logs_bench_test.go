package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/store/model"
)

// BenchmarkLogShapes writes the same log — 200 chunks of 1 KiB (10 lines
// of 100 bytes) per op, the chunks of 200 executions logging 1 KiB each,
// as the log recorder gets them — in three table shapes, and reports per
// chunk the time of the write and the bytes the table and its index take
// (docs/bench.md, "Execution logs: the shape"):
//
//   - chunk: execution_logs as built, a row per chunk, its lines as jsonb
//     (RecordLogChunks, its check against executions included), one
//     entry per line; chunk-one-entry the same with the ten lines in one
//     entry, as the Go SDK sends lines written at once;
//   - chunk-text: a row per chunk, the text in one text column and the
//     lines' times and lengths in arrays;
//   - line: a row per line.
func BenchmarkLogShapes(b *testing.B) {
	const chunks, lines = 200, 10
	ctx := context.Background()
	s := newStore(b)
	e := firedIn(b, s, 1)
	line := strings.Repeat("x", 99) + "\n"
	at := time.Now().UTC()
	for _, shape := range []string{"chunk", "chunk-one-entry", "chunk-text", "line"} {
		b.Run(shape, func(b *testing.B) {
			table := map[string]string{"chunk": "execution_logs", "chunk-one-entry": "execution_logs",
				"chunk-text": "bench_log_chunks_text", "line": "bench_log_lines"}[shape]
			switch shape {
			case "chunk-text":
				if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_log_chunks_text (execution_id uuid, scheduled_for timestamptz,
					attempt int, seq int, stream text, "offset" bigint, bytes int, body text, ats bigint[], lens int[],
					PRIMARY KEY (execution_id, scheduled_for, attempt, seq))`); err != nil {
					b.Fatal(err)
				}
			case "line":
				if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_log_lines (execution_id uuid, scheduled_for timestamptz,
					attempt int, seq int, n int, stream text, at timestamptz, text text,
					PRIMARY KEY (execution_id, scheduled_for, attempt, seq, n))`); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.pool.Exec(ctx, "TRUNCATE "+table); err != nil {
				b.Fatal(err)
			}
			attempt := 0
			for b.Loop() {
				attempt++
				batch := make([]model.LogChunk, chunks)
				for i := range batch {
					c := model.LogChunk{ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Namespace: e.Namespace, Attempt: attempt,
						Seq: i + 1, Stream: "stdout", Offset: int64(i * lines * len(line)), Bytes: lines * len(line), At: at}
					if shape == "chunk-one-entry" {
						// As the Go SDK sends lines written at once.
						c.Lines = []model.LogLine{{At: at, Text: strings.Repeat(line, lines)}}
					} else {
						for range lines {
							c.Lines = append(c.Lines, model.LogLine{At: at, Text: line})
						}
					}
					batch[i] = c
				}
				var err error
				switch shape {
				case "chunk", "chunk-one-entry":
					_, err = s.RecordLogChunks(ctx, batch, time.Hour)
				case "chunk-text":
					err = benchChunkText(ctx, s, batch)
				case "line":
					err = benchLines(ctx, s, batch)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			var size int64
			if err := s.pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
				WHERE c.relname = $1 OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)`, table).Scan(&size); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks)/1000, "µs/chunk")
			b.ReportMetric(float64(size)/float64(attempt*chunks), "bytes/chunk")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func benchChunkText(ctx context.Context, s *Store, cs []model.LogChunk) error {
	var (
		ids          []uuid.UUID
		scheds       []time.Time
		atts, seqs   []int32
		offs         []int64
		sizes        []int32
		bodies, strs []string
		ats, lens    []string
	)
	for _, c := range cs {
		var body strings.Builder
		var a, l []string
		for _, ln := range c.Lines {
			body.WriteString(ln.Text)
			a = append(a, fmt.Sprint(ln.At.UnixMicro()))
			l = append(l, fmt.Sprint(len(ln.Text)))
		}
		ids, scheds, atts, seqs = append(ids, c.ExecutionID), append(scheds, c.ScheduledFor), append(atts, int32(c.Attempt)), append(seqs, int32(c.Seq))
		offs, sizes, bodies, strs = append(offs, c.Offset), append(sizes, int32(c.Bytes)), append(bodies, body.String()), append(strs, c.Stream)
		ats, lens = append(ats, "{"+strings.Join(a, ",")+"}"), append(lens, "{"+strings.Join(l, ",")+"}")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO bench_log_chunks_text
		SELECT u.i, u.s, u.a, u.q, u.st, u.o, u.b, u.body, u.ats::bigint[], u.lens::int[]
		FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::int[], $5::text[], $6::bigint[], $7::int[], $8::text[], $9::text[], $10::text[])
			AS u(i, s, a, q, st, o, b, body, ats, lens)
		ON CONFLICT DO NOTHING`, ids, scheds, atts, seqs, strs, offs, sizes, bodies, ats, lens)
	return err
}

func benchLines(ctx context.Context, s *Store, cs []model.LogChunk) error {
	var (
		ids        []uuid.UUID
		scheds     []time.Time
		atts, seqs []int32
		ns         []int32
		strs, txt  []string
		at         []time.Time
	)
	for _, c := range cs {
		for n, ln := range c.Lines {
			ids, scheds, atts, seqs = append(ids, c.ExecutionID), append(scheds, c.ScheduledFor), append(atts, int32(c.Attempt)), append(seqs, int32(c.Seq))
			ns, strs, at, txt = append(ns, int32(n)), append(strs, c.Stream), append(at, ln.At), append(txt, ln.Text)
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO bench_log_lines
		SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::int[], $5::int[], $6::text[], $7::timestamptz[], $8::text[])
		ON CONFLICT DO NOTHING`, ids, scheds, atts, seqs, ns, strs, at, txt)
	return err
}
