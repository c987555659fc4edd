package api

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The API reads the database's clock once per clockEvery and follows it
// with the local clock in between.
func TestDBClockReadsTheDatabaseOncePerInterval(t *testing.T) {
	skew := time.Hour + 1234*time.Millisecond // the database's clock is this far ahead
	reads := 0
	c := &dbClock{read: func(context.Context) (time.Time, error) {
		reads++
		return time.Now().Add(skew), nil
	}}
	for range 100 {
		got, err := c.Now(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Sub(time.Now().Add(skew)).Abs(); d > 50*time.Millisecond {
			t.Fatalf("Now is %v off the database's clock", d)
		}
		if got.Location() != time.UTC {
			t.Fatalf("Now in %v, want UTC", got.Location())
		}
	}
	if reads != 1 {
		t.Errorf("%d reads of the database's clock for 100 calls, want 1", reads)
	}

	// Once the interval is over, it reads again; a failed read is an error.
	c.synced = time.Now().Add(-clockEvery)
	c.read = func(context.Context) (time.Time, error) { return time.Time{}, errors.New("down") }
	if _, err := c.Now(context.Background()); err == nil {
		t.Error("Now after the interval did not read the database's clock")
	}
}
