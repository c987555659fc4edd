package dispatcher

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// forms says which subjects take batch messages; until known is set it
// cannot tell.
type forms struct {
	batch map[string]bool
	known atomic.Bool
}

func (f *forms) BatchForm(subject string) (bool, bool) { return f.batch[subject], f.known.Load() }

// batchOf makes n executions of one batch: bucket 1, one instant, the
// batch named by the first.
func batchOf(n int, at time.Time, handler func(i int) (domain.Handler, domain.Priority)) []*model.Execution {
	var execs []*model.Execution
	var batch uuid.UUID
	for i := range n {
		job := uuid.New()
		h, p := handler(i)
		e := &model.Execution{ID: domain.ExecutionID(job, at), JobID: job, ScheduledFor: at, JobName: "j", Namespace: "default",
			Handler: h, Priority: p, Bucket: 1, CreatedAt: at}
		if i == 0 {
			batch = e.ID
		}
		e.Batch = batch
		execs = append(execs, e)
	}
	return execs
}

func streamMsgs(t *testing.T, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, wire.ExecStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// A batch goes out as one message per subject whose consumer takes batch
// messages, named by the batch and the subject, and one message per
// execution elsewhere; handed again (the outbox after a crash, with the
// members no executor has reported on), its message is dropped by
// JetStream as a copy, whichever members it has.
func TestPublishesABatchInOneMessagePerSubject(t *testing.T) {
	ctx := context.Background()
	f := &forms{batch: map[string]bool{"tock.exec.bat.normal": true, "tock.exec.bat.high": true}}
	f.known.Store(true)
	d, js, m := runDispatcher(t, Config{BatchSize: 2, Forms: f}) // a batch is never cut by BatchSize
	at := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	execs := batchOf(6, at, func(i int) (domain.Handler, domain.Priority) {
		switch i {
		case 3:
			return domain.Handler{Type: domain.HandlerCustom, Name: "bat"}, domain.PriorityHigh
		case 4:
			return domain.Handler{Type: domain.HandlerCustom, Name: "single"}, ""
		}
		return domain.Handler{Type: domain.HandlerCustom, Name: "bat"}, ""
	})
	big := execs[5] // its own body is too large for a batch
	big.Payload = json.RawMessage(`"` + stringOf('x', wire.MaxBatchMemberBytes) + `"`)
	d.Dispatch(ctx, execs)
	testenv.WaitFor(t, 10*time.Second, "the publish position past the batch", func() bool { return m.reached(1, at) })

	msgs := streamMsgs(t, js)
	bySubject := map[string][]*jetstream.RawStreamMsg{}
	for _, msg := range msgs {
		bySubject[msg.Subject] = append(bySubject[msg.Subject], msg)
	}
	if len(msgs) != 4 || len(bySubject["tock.exec.bat.normal"]) != 2 || len(bySubject["tock.exec.bat.high"]) != 1 ||
		len(bySubject["tock.exec.single.normal"]) != 1 {
		t.Fatalf("published %d messages by subject %v, want a batch on bat.normal and bat.high, the large one and single's alone", len(msgs), bySubject)
	}
	for _, msg := range bySubject["tock.exec.bat.normal"] {
		if !wire.IsBatch(msg.Header) {
			if id := msg.Header.Get(jetstream.MsgIDHeader); id != big.ID.String() {
				t.Errorf("single message on bat.normal has id %q, want the large member's %s", id, big.ID)
			}
			continue
		}
		members, err := wire.DecodeBatch(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 3 || msg.Header.Get(wire.HeaderBatch) != "3" {
			t.Fatalf("batch on bat.normal has %d members (header %q), want 3", len(members), msg.Header.Get(wire.HeaderBatch))
		}
		if id := msg.Header.Get(jetstream.MsgIDHeader); id != wire.BatchMsgID(execs[0].ID.String(), "tock.exec.bat.normal") {
			t.Errorf("batch message id %q", id)
		}
		for i, raw := range members {
			var x wire.Execution
			if err := json.Unmarshal(raw, &x); err != nil {
				t.Fatal(err)
			}
			if x.ExecutionID != execs[i].ID.String() || x.Dispatch != 0 || x.AttemptBase != 0 {
				t.Errorf("member %d = %+v, want execution %s, dispatch 0", i, x, execs[i].ID)
			}
		}
	}
	if h := bySubject["tock.exec.single.normal"][0].Header; wire.IsBatch(h) || h.Get(jetstream.MsgIDHeader) != execs[4].ID.String() {
		t.Errorf("single's message %v, want one execution under its own id", h)
	}

	// The backlog watch counts bat.normal's messages as two executions
	// each (a batch of 3 and a large member alone), single's as one.
	if got := d.ExecutionsPerMessage("tock.exec.bat.normal"); got <= 1 || got >= 3 {
		t.Errorf("executions per message on bat.normal = %v, want between the batch's 3 and the lone member's 1", got)
	}
	if got := d.ExecutionsPerMessage("tock.exec.single.normal"); got != 1 {
		t.Errorf("executions per message on single.normal = %v, want 1", got)
	}

	// Handed again with fewer members: dropped by JetStream.
	d.Dispatch(ctx, execs[1:3])
	testenv.WaitFor(t, 10*time.Second, "the re-dispatch done", func() bool { return d.busy() == 0 })
	if n := len(streamMsgs(t, js)); n != 4 {
		t.Fatalf("after the batch was handed again the stream holds %d messages, want 4", n)
	}
}

// While the forms are not known a batch waits: publishing it one
// execution per message now, and as one message after a crash, would
// deliver its members twice.
func TestBatchWaitsForTheForms(t *testing.T) {
	ctx := context.Background()
	f := &forms{batch: map[string]bool{"tock.exec.bat.normal": true}}
	d, js, m := runDispatcher(t, Config{Forms: f})
	at := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	execs := batchOf(3, at, func(int) (domain.Handler, domain.Priority) {
		return domain.Handler{Type: domain.HandlerCustom, Name: "bat"}, ""
	})
	d.Dispatch(ctx, execs)
	time.Sleep(300 * time.Millisecond)
	if n := len(streamMsgs(t, js)); n != 0 || m.reached(1, at) {
		t.Fatalf("%d messages published before the forms were known", n)
	}
	f.known.Store(true)
	testenv.WaitFor(t, 10*time.Second, "the publish position past the batch", func() bool { return m.reached(1, at) })
	msgs := streamMsgs(t, js)
	if len(msgs) != 1 || msgs[0].Header.Get(wire.HeaderBatch) != "3" {
		t.Fatalf("published %d messages, want one batch of 3", len(msgs))
	}
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
