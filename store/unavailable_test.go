package store

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnavailable: a node starting while no Postgres server can be used
// (down, starting, read-only during a failover) waits for one; a server
// that refuses it (wrong password, no such database) fails the start.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P03", Message: "the database system is not yet accepting connections"}, true},
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}, true},
		{fmt.Errorf("store: migrate: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "28P01", Message: "password authentication failed"}, false},
		{&pgconn.PgError{Code: "3D000", Message: `database "tock" does not exist`}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{errors.New("--postgres-url: cannot parse"), false},
	} {
		if got := Unavailable(fmt.Errorf("store: ping: %w", tc.err)); got != tc.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
