package store

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// The helpers that turn Go values into statement arguments, in one
// place: sqlArgs numbers the arguments of a statement built from parts,
// the null* functions pass an empty value as SQL NULL, and pgUUID passes
// an id in pgx's native form.

// sqlArgs collects the arguments of a statement whose text is built
// from optional parts. add appends a value and returns its placeholder,
// so that each condition is written with its value:
//
//	var args sqlArgs
//	where = append(where, "namespace = "+args.add(ns))
//	rows, err := pool.Query(ctx, sql, args...)
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// nullText is s, or NULL when it is empty.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON makes an empty payload SQL NULL rather than invalid JSON.
func nullJSON(p json.RawMessage) any {
	if len(p) == 0 {
		return nil
	}
	return []byte(p)
}

// nullLabels is a job's labels as stored: NULL when it has none.
func nullLabels(l domain.Labels) any {
	if len(l) == 0 {
		return nil
	}
	return l
}

// nullTime is t at millisecond precision, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = ms(t)
	return &t
}

// pgUUID is id as pgx encodes it natively. A uuid.UUID is a
// driver.Valuer that pgx encodes through its text form, after first
// failing to encode that text in binary (and formatting an error for
// it): a third of CreateJobBatch's own CPU time, for the ids alone.
func pgUUID(id uuid.UUID) [16]byte { return id }
