package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// spec is a job spec (job_specs) decoded: what an execution runs.
type spec struct {
	handler domain.Handler
	payload json.RawMessage
	retry   domain.RetryPolicy
	timeout int64 // ms
}

// specCache keeps job specs decoded by id. A spec row never changes (its
// id is a hash of its content), so a cached spec is never stale; the
// cache only bounds its size, starting over when full. Firing fills
// its executions from it rather than returning and decoding each one's
// handler, payload and retry policy (thousands of executions share a
// few specs). Safe for concurrent use.
type specCache struct {
	mu sync.Mutex
	m  map[uuid.UUID]*spec
}

const specCacheSize = 50_000

// fill sets the handler, payload, retry policy and timeout of the
// executions whose spec ids are given (specs[i] for execs[i]; nil where
// the execution carries its own copy), reading the specs not cached in
// one query through q.
func (c *specCache) fill(ctx context.Context, q pgx.Tx, execs []*model.Execution, specs []*uuid.UUID) error {
	var missing []uuid.UUID
	c.mu.Lock()
	for _, id := range specs {
		if id != nil && c.m[*id] == nil && !slices.Contains(missing, *id) {
			missing = append(missing, *id)
		}
	}
	c.mu.Unlock()
	if len(missing) > 0 {
		rows, err := q.Query(ctx, `SELECT id, handler, payload, retry, timeout_ms FROM job_specs WHERE id = ANY($1)`, missing)
		if err != nil {
			return fmt.Errorf("read job specs: %w", err)
		}
		loaded := map[uuid.UUID]*spec{}
		var (
			id uuid.UUID
			sp spec
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &sp.handler, &sp.payload, &sp.retry, &sp.timeout}, func() error {
			s := sp
			loaded[id] = &s
			sp = spec{}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read job specs: %w", err)
		}
		c.mu.Lock()
		if c.m == nil || len(c.m)+len(loaded) > specCacheSize {
			c.m = make(map[uuid.UUID]*spec, len(loaded))
		}
		for id, sp := range loaded {
			c.m[id] = sp
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range specs {
		if id == nil {
			continue
		}
		sp := c.m[*id]
		if sp == nil {
			return fmt.Errorf("execution %s: job spec %s: %w", execs[i].ID, *id, ErrNotFound)
		}
		e := execs[i]
		e.Handler, e.Payload, e.Retry, e.Timeout = sp.handler, sp.payload, sp.retry, msDuration(sp.timeout)
	}
	return nil
}

// rawUUID is id as the [16]byte pgx decodes a uuid column into
// directly. Scanned as a uuid.UUID, which implements sql.Scanner, each
// one was formatted as text and parsed back (4 % of tockd's CPU in the
// hot path's profile, issue 20).
func rawUUID(id *uuid.UUID) *[16]byte { return (*[16]byte)(id) }

// nullUUID scans a nullable uuid column into id: the zero UUID for NULL.
func nullUUID(id *uuid.UUID) pgtype.UUIDScanner { return nullUUIDScan{id} }

type nullUUIDScan struct{ id *uuid.UUID }

func (n nullUUIDScan) ScanUUID(v pgtype.UUID) error {
	*n.id = uuid.Nil
	if v.Valid {
		*n.id = v.Bytes
	}
	return nil
}
