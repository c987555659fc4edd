package wire_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/wire"
)

func TestIncarnationChangesOnlyWhenTheStreamIsNew(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := wire.NewIncarnationWatch(js, wire.EventStream)
	if _, _, err := w.Check(ctx); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Check before the stream exists: %v, want ErrStreamNotFound", err)
	}
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	first, isNew, err := w.Check(ctx)
	if err != nil || isNew {
		t.Fatalf("first Check: %+v new=%v %v", first, isNew, err)
	}
	if first.Age < 0 || first.Age > 10*time.Second {
		t.Fatalf("a stream created just now is %s old", first.Age)
	}
	check := func(what string, want bool) {
		t.Helper()
		var inc wire.Incarnation
		testenv.WaitFor(t, 10*time.Second, "the stream after "+what, func() bool {
			inc, isNew, err = w.Check(ctx)
			return err == nil
		})
		if isNew != want {
			t.Fatalf("after %s: new incarnation %v, want %v (created %s, first %s)", what, isNew, want, inc.Created, first.Created)
		}
	}

	// Messages, a purge and a server restart on the same store: the same
	// incarnation.
	if _, err := js.Publish(ctx, wire.EventSubjectPrefix+"started", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, wire.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	check("a purge", false)
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	check("a restart", false)

	// Deleted and created again, or the server's store lost: new.
	if err := js.DeleteStream(ctx, wire.EventStream); err != nil {
		t.Fatal(err)
	}
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	check("delete and create", true)
	srv.Stop()
	srv.Dir = t.TempDir()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the streams on the empty server", func() bool { return wire.EnsureStreams(ctx, js) == nil })
	check("a restart on an empty store", true)
	check("nothing", false)
}
