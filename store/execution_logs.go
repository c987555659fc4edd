package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/store/model"
)

// RecordLogChunks stores chunks of attempts' logs (issue 38), each
// (execution, attempt, seq) once, and says what became of each
// (model.LogStored and the others): a chunk is stored only if its
// execution exists in its namespace and had not ended more than grace
// before now. One statement inserts what passes; only when some chunk
// did not go in (a redelivery, or one refused) does a second say which
// and why. Chunks whose TrimBefore is set then delete what they cut
// (chunks stored by earlier calls; a reader hides the rest, see
// ListLogChunks).
//
// It writes only execution_logs, in key order (so that two recorders
// inserting the same chunks wait for each other in one order), and reads
// executions without a lock (store/doc.go, Lock order).
func (s *Store) RecordLogChunks(ctx context.Context, chunks []model.LogChunk, grace time.Duration) ([]string, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	verdicts := make([]string, len(chunks))
	// A chunk twice in the batch (a message delivered again while its
	// first delivery is in the same batch) goes in once.
	type key struct {
		id           uuid.UUID
		attempt, seq int
	}
	first := make(map[key]int, len(chunks))
	var todo []int
	for i := range chunks {
		c := &chunks[i]
		k := key{c.ExecutionID, c.Attempt, c.Seq}
		if _, dup := first[k]; dup {
			verdicts[i] = model.LogDuplicate
			continue
		}
		first[k] = i
		todo = append(todo, i)
	}
	n := len(todo)
	var (
		ids                   = make([]uuid.UUID, n)
		scheds, ats           = make([]time.Time, n), make([]time.Time, n)
		attempts, seqs, sizes = make([]int32, n), make([]int32, n), make([]int32, n)
		namespaces, streams   = make([]string, n), make([]string, n)
		lines                 = make([]string, n)
		offsets               = make([]int64, n)
		trimFrom, trimBefore  = make([]*int64, n), make([]*int64, n)
		ends                  = make([]bool, n)
	)
	for j, i := range todo {
		c := &chunks[i]
		ids[j], scheds[j], ats[j] = c.ExecutionID, c.ScheduledFor, c.At
		attempts[j], seqs[j], sizes[j] = int32(c.Attempt), int32(c.Seq), int32(c.Bytes)
		namespaces[j], streams[j], offsets[j], ends[j] = c.Namespace, c.Stream, c.Offset, c.End
		if c.TrimBefore > 0 {
			trimFrom[j], trimBefore[j] = &c.TrimFrom, &c.TrimBefore
		}
		ls := c.Lines
		if ls == nil {
			ls = []model.LogLine{}
		}
		b, err := json.Marshal(ls)
		if err != nil {
			return nil, fmt.Errorf("store: encode log chunk: %w", err)
		}
		lines[j] = string(b)
	}
	rows, err := s.pool.Query(ctx, `
		INSERT INTO execution_logs (execution_id, scheduled_for, attempt, seq, stream, "offset", bytes, at, lines,
			trim_from, trim_before, ends)
		SELECT c.execution_id, c.scheduled_for, c.attempt, c.seq, c.stream, c."offset", c.bytes, c.at, c.lines,
			c.trim_from, c.trim_before, c.ends
		FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::int[], $5::text[], $6::text[],
				$7::bigint[], $8::int[], $9::timestamptz[], $10::jsonb[], $11::bigint[], $12::bigint[], $13::boolean[])
			AS c(execution_id, scheduled_for, attempt, seq, namespace, stream, "offset", bytes, at, lines, trim_from, trim_before, ends)
		JOIN executions e ON e.id = c.execution_id AND e.scheduled_for = c.scheduled_for
		WHERE e.namespace = c.namespace AND (e.finished_at IS NULL OR e.finished_at >= now() - $14::bigint * interval '1 ms')
		ORDER BY c.execution_id, c.scheduled_for, c.attempt, c.seq
		ON CONFLICT DO NOTHING
		RETURNING execution_id, attempt, seq`,
		ids, scheds, attempts, seqs, namespaces, streams, offsets, sizes, ats, lines, trimFrom, trimBefore, ends,
		grace.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("store: record %d log chunks: %w", n, err)
	}
	stored := 0
	for rows.Next() {
		var k key
		var attempt, seq int32
		if err := rows.Scan(&k.id, &attempt, &seq); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: record %d log chunks: %w", n, err)
		}
		k.attempt, k.seq = int(attempt), int(seq)
		verdicts[first[k]] = model.LogStored
		stored++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: record %d log chunks: %w", n, err)
	}
	if stored < n {
		if err := s.logVerdicts(ctx, chunks, todo, verdicts, grace); err != nil {
			return nil, err
		}
	}
	if err := s.trimLogs(ctx, chunks, verdicts); err != nil {
		return verdicts, err
	}
	return verdicts, nil
}

// logVerdicts says why the chunks of todo that did not go in did not:
// their execution is unknown, another namespace's, ended too long ago, or
// the chunk was there already.
func (s *Store) logVerdicts(ctx context.Context, chunks []model.LogChunk, todo []int, verdicts []string, grace time.Duration) error {
	var (
		idx        []int32
		ids        []uuid.UUID
		scheds     []time.Time
		namespaces []string
	)
	for _, i := range todo {
		if verdicts[i] == "" {
			c := &chunks[i]
			idx, ids, scheds, namespaces = append(idx, int32(i)), append(ids, c.ExecutionID), append(scheds, c.ScheduledFor), append(namespaces, c.Namespace)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT c.i, CASE
			WHEN e.id IS NULL THEN '`+model.LogUnknown+`'
			WHEN e.namespace <> c.namespace THEN '`+model.LogForeign+`'
			WHEN e.finished_at < now() - $5::bigint * interval '1 ms' THEN '`+model.LogFinished+`'
			ELSE '`+model.LogDuplicate+`' END
		FROM unnest($1::int[], $2::uuid[], $3::timestamptz[], $4::text[]) AS c(i, execution_id, scheduled_for, namespace)
		LEFT JOIN executions e ON e.id = c.execution_id AND e.scheduled_for = c.scheduled_for`,
		idx, ids, scheds, namespaces, grace.Milliseconds())
	if err != nil {
		return fmt.Errorf("store: log chunks not stored: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int32
		var v string
		if err := rows.Scan(&i, &v); err != nil {
			return fmt.Errorf("store: log chunks not stored: %w", err)
		}
		verdicts[i] = v
	}
	return rows.Err()
}

// trimLogs deletes the chunks that the stored chunks' trims cut.
func (s *Store) trimLogs(ctx context.Context, chunks []model.LogChunk, verdicts []string) error {
	var (
		ids                 []uuid.UUID
		scheds              []time.Time
		attempts            []int32
		trimFrom, trimUntil []int64
	)
	for i := range chunks {
		c := &chunks[i]
		if verdicts[i] != model.LogStored || c.TrimBefore <= 0 {
			continue
		}
		ids, scheds, attempts = append(ids, c.ExecutionID), append(scheds, c.ScheduledFor), append(attempts, int32(c.Attempt))
		trimFrom, trimUntil = append(trimFrom, c.TrimFrom), append(trimUntil, c.TrimBefore)
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM execution_logs l
		USING unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::bigint[], $5::bigint[]) AS t(execution_id, scheduled_for, attempt, f, b)
		WHERE l.execution_id = t.execution_id AND l.scheduled_for = t.scheduled_for AND l.attempt = t.attempt
			AND l."offset" >= t.f AND l."offset" + l.bytes <= t.b AND NOT l.ends`,
		ids, scheds, attempts, trimFrom, trimUntil)
	if err != nil {
		return fmt.Errorf("store: trim %d logs: %w", len(ids), err)
	}
	return nil
}

// LogFilter selects an execution's log chunks for ListLogChunks.
type LogFilter struct {
	ExecutionID  uuid.UUID
	ScheduledFor time.Time
	// Attempt, if not 0, is the only attempt read.
	Attempt int
	// Stream, if set, is the only stream read.
	Stream string
	// After reads the chunks after (attempt, seq) = After (zero: from the
	// first).
	After [2]int
	// Search, if set, keeps the chunks with a line containing it (any
	// case); the caller picks the lines.
	Search string
	Limit  int
	// Young marks the chunks recorded less than this ago.
	Young time.Duration
}

// ListLogChunks lists an execution's log chunks in (attempt, seq) order,
// those that a later chunk's trim cut (chunks not yet deleted) left out.
func (s *Store) ListLogChunks(ctx context.Context, f LogFilter) ([]model.LogChunk, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	q := `WITH t AS (
			SELECT attempt, min(trim_from) AS f, max(trim_before) AS b FROM execution_logs
			WHERE execution_id = $1 AND scheduled_for = $2 AND trim_before IS NOT NULL AND ($3 = 0 OR attempt = $3)
			GROUP BY attempt)
		SELECT l.attempt, l.seq, l.stream, l."offset", l.bytes, l.at, l.lines, l.ends,
			l.recorded_at > now() - $9::bigint * interval '1 ms'
		FROM execution_logs l LEFT JOIN t ON t.attempt = l.attempt
		WHERE l.execution_id = $1 AND l.scheduled_for = $2 AND ($3 = 0 OR l.attempt = $3)
			AND (l.attempt, l.seq) > ($4, $5)
			AND ($6 = '' OR l.stream = $6)
			AND NOT (t.b IS NOT NULL AND l."offset" >= t.f AND l."offset" + l.bytes <= t.b AND NOT l.ends)
			AND ($7 = '' OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.lines) x WHERE x->>'text' ILIKE $7))
		ORDER BY l.attempt, l.seq
		LIMIT $8`
	search := ""
	if f.Search != "" {
		search = "%" + likeEscape(f.Search) + "%"
	}
	rows, err := s.pool.Query(ctx, q, f.ExecutionID, f.ScheduledFor, f.Attempt, f.After[0], f.After[1], f.Stream, search, limit, f.Young.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("store: log of execution %s: %w", f.ExecutionID, err)
	}
	defer rows.Close()
	var out []model.LogChunk
	for rows.Next() {
		c := model.LogChunk{ExecutionID: f.ExecutionID, ScheduledFor: f.ScheduledFor}
		var lines []byte
		if err := rows.Scan(&c.Attempt, &c.Seq, &c.Stream, &c.Offset, &c.Bytes, &c.At, &lines, &c.End, &c.Young); err != nil {
			return nil, fmt.Errorf("store: log of execution %s: %w", f.ExecutionID, err)
		}
		if err := json.Unmarshal(lines, &c.Lines); err != nil {
			return nil, fmt.Errorf("store: log of execution %s: chunk %d.%d: %w", f.ExecutionID, c.Attempt, c.Seq, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: log of execution %s: %w", f.ExecutionID, err)
	}
	return out, nil
}

// likeEscape escapes LIKE's wildcards (and its escape character) in s.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
