package pgha

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Restorable server rolled back to a time keeps the commits before it
// and loses those after, acknowledged as they were.
func TestRestorableRollsBack(t *testing.T) {
	r := StartRestorable(t, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, r.URL("app"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE t (n int)")
	exec("INSERT INTO t VALUES (1)")
	time.Sleep(1500 * time.Millisecond)
	to := time.Now()
	time.Sleep(1500 * time.Millisecond)
	exec("INSERT INTO t VALUES (2)")
	r.RollBack(t, to)
	conn, err := pgx.Connect(ctx, r.URL("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got []int32
	rows, _ := conn.Query(ctx, "SELECT n FROM t ORDER BY n")
	got, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 1 {
		t.Errorf("after the roll-back: rows %v, want [1] (the insert after the target lost)", got)
	}
	exec("INSERT INTO t VALUES (3)") // it takes writes
}
