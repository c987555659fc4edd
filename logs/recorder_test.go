package logs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitFor = 15 * time.Second

var _ Store = (*store.Store)(nil)

// newExecution creates a job in namespace ns and runs it by hand: an
// execution the recorder knows.
func newExecution(t *testing.T, st *store.Store, ns string) *model.Execution {
	t.Helper()
	ctx := context.Background()
	j := &model.Job{Namespace: ns, Name: "logs-" + uuid.NewString()[:8],
		Schedule: schedule.Spec{Cron: "0 0 0 1 1 *", Timezone: "UTC"},
		Handler:  domain.Handler{Type: domain.HandlerCustom, Name: "w"}, State: domain.JobPaused}
	if err := st.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateManualExecution(ctx, j.ID, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// wchunk is attempt's chunk seq of e, at offset, with lines texts.
func wchunk(e *model.Execution, attempt, seq int, offset int64, texts ...string) wire.LogChunk {
	c := wire.LogChunk{ExecutionID: e.ID.String(), ScheduledFor: e.ScheduledFor, Namespace: e.Namespace,
		Attempt: attempt, Seq: seq, Stream: wire.LogStdout, Offset: offset}
	for _, t := range texts {
		c.Lines = append(c.Lines, wire.LogLine{At: time.Now().UTC(), Text: t})
	}
	return c
}

// The recorder against what a careless or hostile executor may send:
// bad UTF-8, a NUL byte, a line of 200 KiB, chunks out of order, a gap,
// a duplicate, chunks of an unknown execution and of another
// namespace's, an invalid chunk, a message that is no JSON. It stores
// each good chunk once, cleaned and cut, nothing of the others, counts
// every outcome, and goes on recording after all of it.
func TestRecorderStoresNothingWrong(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := storetest.New(t, 8)
	n := testenv.NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := NewRecorder(Config{JS: js, Store: st, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	pctx, pcancel := context.WithTimeout(ctx, waitFor)
	defer pcancel()
	if err := wire.EnsureLogStream(pctx, js, 1); err != nil {
		t.Fatal(err)
	}
	publish := func(data []byte) {
		t.Helper()
		if _, err := js.Publish(pctx, wire.LogSubject, data, jetstream.WithMsgID(uuid.NewString())); err != nil {
			t.Fatal(err)
		}
	}
	publishChunks := func(cs ...wire.LogChunk) {
		t.Helper()
		data, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		publish(data)
	}

	e := newExecution(t, st, "default")
	other := newExecution(t, st, "team-b")
	long := strings.Repeat("é", 100<<10) + "\n" // 200 KiB
	c3 := wchunk(e, 1, 3, 0, "after a gap\n")
	bad := wchunk(e, 1, 1, 0, "bad \xff byte and a \x00 nul\n", long)
	c3.Offset = int64(len(wire.CleanLogText(bad.Lines[0].Text))+len(long)) + 100 // 100 bytes lost
	foreign := wchunk(other, 1, 1, 0, "mine\n")
	foreign.Namespace = "default" // claims another namespace
	unknown := wchunk(e, 1, 1, 0, "who?\n")
	unknown.ExecutionID = uuid.NewString()
	invalid := wchunk(e, 0, 1, 0, "attempt 0\n")
	publishChunks(c3, foreign, unknown, invalid)
	publishChunks(bad)
	publishChunks(bad) // a duplicate, in another message
	publish([]byte("not json at all {"))
	end := wchunk(e, 1, 4, c3.Offset+int64(len("after a gap\n")))
	end.End = true
	publishChunks(end)

	var got []model.LogChunk
	testenv.WaitFor(t, waitFor, "the good chunks stored", func() bool {
		got, err = st.ListLogChunks(ctx, store.LogFilter{ExecutionID: e.ID, ScheduledFor: e.ScheduledFor})
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 3 && testutil.ToFloat64(r.chunks.WithLabelValues(OutcomeUndecodable)) == 1 &&
			testutil.ToFloat64(r.chunks.WithLabelValues(model.LogDuplicate)) == 1
	})
	var text strings.Builder
	for _, c := range got {
		for _, l := range c.Lines {
			if len(l.Text) > wire.MaxLogLineBytes {
				t.Errorf("a stored line of %d bytes", len(l.Text))
			}
			text.WriteString(l.Text)
		}
	}
	want := "bad \uFFFD byte and a \uFFFD nul\n" + long + "after a gap\n"
	if text.String() != want {
		t.Errorf("stored text of %d bytes, want %d; begins %q", text.Len(), len(want), text.String()[:40])
	}
	entries, held := Assemble(got, Position{}, true, "", true)
	if held {
		t.Error("held at the hole before chunk 3, read without LogFilter.Young")
	}
	var gap int64
	for _, ch := range entries {
		for _, en := range ch.Entries {
			gap += en.GapBytes
		}
	}
	if gap != 100 {
		t.Errorf("gaps of %d bytes, want 100", gap)
	}
	if others, _ := st.ListLogChunks(ctx, store.LogFilter{ExecutionID: other.ID, ScheduledFor: other.ScheduledFor}); len(others) != 0 {
		t.Errorf("%d chunks stored for the execution another namespace claimed", len(others))
	}
	for outcome, want := range map[string]float64{model.LogStored: 3, model.LogDuplicate: 1, model.LogForeign: 1,
		model.LogUnknown: 1, OutcomeInvalid: 1, OutcomeUndecodable: 1} {
		if got := testutil.ToFloat64(r.chunks.WithLabelValues(outcome)); got != want {
			t.Errorf("tock_log_chunks_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}

	// And it goes on.
	e2 := newExecution(t, st, "default")
	publishChunks(wchunk(e2, 1, 1, 0, "still here\n"))
	testenv.WaitFor(t, waitFor, "a chunk after the bad input", func() bool {
		cs, _ := st.ListLogChunks(ctx, store.LogFilter{ExecutionID: e2.ID, ScheduledFor: e2.ScheduledFor})
		return len(cs) == 1
	})
}
