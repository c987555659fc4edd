package maintenance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// stuckStore hands out candidates and records what was rescued.
type stuckStore struct {
	mu      sync.Mutex
	cands   []model.StuckExecution
	waiting []uuid.UUID
	lost    []uuid.UUID
}

func (f *stuckStore) ListStuckExecutions(context.Context, []int, time.Time, time.Time, int) ([]model.StuckExecution, error) {
	return f.cands, nil
}

func (f *stuckStore) RequeueWaitingExecutions(_ context.Context, execs []*model.Execution, _ string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range execs {
		f.waiting = append(f.waiting, e.ID)
	}
	return len(execs), nil
}

func (f *stuckStore) RequeueSilentExecutions(_ context.Context, ids []uuid.UUID, _ time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, ids...)
	return len(ids), nil
}

// The rescuer moves on only the candidates JetStream no longer knows: a
// candidate whose message is still in the exec stream (its own, or its
// batch's) waits, and so does one an event in the event stream is about
// (the recorder has not written it yet); a waiting one without either is
// published again, a running one taken for lost, each counted.
func TestStuckRescuerAsksJetStream(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	handler := domain.Handler{Type: domain.HandlerCustom, Name: "stuck-test"}
	since := time.Now().Add(-time.Minute)
	cand := func(state domain.ExecState, batch uuid.UUID) model.StuckExecution {
		return model.StuckExecution{Execution: &model.Execution{ID: uuid.New(), JobID: uuid.New(), State: state,
			Handler: handler, ScheduledFor: since, Batch: batch}, Since: since}
	}
	inStream := cand(domain.ExecQueued, uuid.Nil)
	inBatch := cand(domain.ExecQueued, uuid.New())
	eventPending := cand(domain.ExecQueued, uuid.Nil)
	gone := cand(domain.ExecQueued, uuid.Nil)
	goneBatch := cand(domain.ExecQueued, uuid.New())
	lost := cand(domain.ExecRunning, uuid.Nil)
	subject := wire.ExecSubject(handler.Queue(), "")

	publish := func(subject, id string, data []byte) {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set(nats.MsgIdHdr, id)
		m.Data = data
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish(subject, inStream.ID.String(), []byte(`{}`))
	publish(subject, wire.BatchMsgID(inBatch.Batch.String(), subject), []byte(`[]`))
	publish(wire.EventBatchSubject, "ev-1", []byte(`[{"type":"succeeded","execution_id":"`+eventPending.ID.String()+`"}]`))

	st := &stuckStore{cands: []model.StuckExecution{inStream, inBatch, eventPending, gone, goneBatch, lost}}
	r, err := NewStuckRescuer(StuckRescuerConfig{JS: js, Store: st, Buckets: func() []int { return []int{0} }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := []uuid.UUID{gone.ID, goneBatch.ID}
	if !sameIDs(st.waiting, want) {
		t.Errorf("published again %v, want %v (gone, goneBatch)", st.waiting, want)
	}
	if !sameIDs(st.lost, []uuid.UUID{lost.ID}) {
		t.Errorf("taken for lost %v, want %v", st.lost, lost.ID)
	}
	if w, l := testutil.ToFloat64(r.rescued.WithLabelValues("waiting")), testutil.ToFloat64(r.rescued.WithLabelValues("lost")); w != 2 || l != 1 {
		t.Errorf("tock_rescued_total waiting %v lost %v, want 2 and 1", w, l)
	}

	// More messages than it may read: the subject is left for later.
	st.waiting, st.lost = nil, nil
	r.cfg.MaxWalk = 1
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(st.waiting) != 0 || len(st.lost) != 0 {
		t.Errorf("with the exec stream read in part, rescued %v and %v; want nothing", st.waiting, st.lost)
	}
	// Its subject read whole, but more events waiting than it may read:
	// nothing either, and the pass says why.
	r.cfg.MaxWalk = 3
	for i := range 3 {
		publish(wire.EventBatchSubject, "ev-more-"+string(rune('a'+i)), []byte(`[]`))
	}
	if err := r.RunOnce(ctx); err == nil {
		t.Error("a pass that could not read the event stream whole did not say so")
	}
	if len(st.waiting) != 0 || len(st.lost) != 0 {
		t.Errorf("with the event stream read in part, rescued %v and %v; want nothing", st.waiting, st.lost)
	}
}

func sameIDs(a, b []uuid.UUID) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	cmp := func(p, q uuid.UUID) int { return slices.Compare(p[:], q[:]) }
	slices.SortFunc(x, cmp)
	slices.SortFunc(y, cmp)
	return slices.Equal(x, y)
}
