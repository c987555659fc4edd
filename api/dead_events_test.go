package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store/model"
)

// GET /v1/dead-events lists the events the recorder kept, newest first,
// a page at a time, by namespace; every namespace (those that named none
// too) when none is given to a key with all of them.
func TestListDeadEvents(t *testing.T) {
	e := newEnv(t)
	id := uuid.New()
	attempt := 2
	for i, ns := range []string{"team-a", "team-b", "team-a", ""} {
		ev := model.DeadEvent{Namespace: ns, Type: "started", Reason: "invalid: test " + string(rune('0'+i)),
			Event: []byte(`{"n":` + string(rune('0'+i)) + `}`)}
		if i == 0 {
			ev.ExecutionID, ev.Attempt, ev.Reason = &id, &attempt, "unknown execution"
		}
		if err := e.store.RecordDeadEvents(e.ctx, []model.DeadEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	var list models.DeadEventList
	r := e.do("GET", "/v1/dead-events?namespace=team-a&limit=1", nil)
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	r.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Event != `{"n":2}` || list.NextCursor == nil {
		t.Fatalf("first page of team-a: %+v, want its newest event and a cursor", list)
	}
	r = e.do("GET", "/v1/dead-events?namespace=team-a&limit=1&cursor="+*list.NextCursor, nil)
	r.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ExecutionId == nil || *list.Items[0].ExecutionId != id ||
		list.Items[0].Attempt == nil || *list.Items[0].Attempt != 2 || list.Items[0].Reason != "unknown execution" {
		t.Fatalf("second page of team-a: %+v, want the unknown execution's event", list)
	}
	r = e.do("GET", "/v1/dead-events", nil)
	r.decode(t, &list)
	if len(list.Items) != 4 || list.Items[0].Namespace != "" {
		t.Fatalf("every namespace: %d events, first %+v; want 4, newest (no namespace) first", len(list.Items), list.Items)
	}
	if r := e.do("GET", "/v1/dead-events?cursor=nonsense", nil); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "cursor") {
		t.Errorf("a bad cursor: %d %s, want 400 naming it", r.status, r.body)
	}
}
