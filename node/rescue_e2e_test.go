package node_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// Postgres loses its last seconds (an asynchronous standby promoted, a
// restore): here, the recordings of two finished executions, undone in
// place. One goes back to queued (its start and end lost), one to running
// (its end lost, its start kept). Their messages were acknowledged and
// their events written, so neither JetStream nor the recorder will move
// them again: the rescue must. Within its bounds (3 s here) the queued one
// is published again (same attempt, next dispatch), and the executor that
// ran it answers from its journal (it is not run again); the running one
// is taken for lost and runs again as attempt 2 (at-least-once, the lost
// commit's price). Both succeed and carry a note saying what tock did. A third execution, of a custom handler no executor serves, waits
// with its message in JetStream for as long as it must: it is never
// rescued.
func TestRescueAfterPostgresLostRecordings(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n1 := e.StartWith(t, "n1", func(c *node.Config) {
		c.RescueWaitAfter, c.RescueSilentAfter = 3*time.Second, 3*time.Second
	})
	var (
		mu   sync.Mutex
		hits = map[string]int{}
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		_, _ = io.WriteString(w, "done")
	}))
	defer target.Close()
	hitsOf := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[path]
	}

	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	job := func(name string, handler map[string]any) uuid.UUID {
		return n1.CreateJob(t, map[string]any{"name": name, "schedule": map[string]any{"at": at},
			"retry": map[string]any{"max_attempts": 3}, "handler": handler}).Id
	}
	queued := job("lost-start", map[string]any{"type": "http", "url": target.URL + "/queued"})
	running := job("lost-end", map[string]any{"type": "http", "url": target.URL + "/running"})
	unserved := job("unserved", map[string]any{"type": "custom", "name": "nobody-serves-this"})
	one := func(id uuid.UUID) (state string, attempts int, exec uuid.UUID) {
		xs := n1.Executions(t, id)
		if len(xs) != 1 {
			return "", 0, uuid.Nil
		}
		return string(xs[0].State), xs[0].Attempts, xs[0].Id
	}
	nodetest.WaitFor(t, 30*time.Second, "both http executions succeeded", func() bool {
		s1, _, _ := one(queued)
		s2, _, _ := one(running)
		return s1 == "succeeded" && s2 == "succeeded"
	})

	pg, err := pgxpool.New(context.Background(), e.PG)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	// What Postgres held before the lost commits: the fired row, waiting
	// (first dispatch, covered by its bucket's publish position), and the
	// row whose start was recorded ten seconds ago.
	const unrecorded = `executor_id = '', output = '', error = '', finished_at = NULL,
		attempt_finished_at = NULL, attempt_outcome = '', attempt_error = NULL, attempt_output = NULL`
	if _, err := pg.Exec(context.Background(), `UPDATE executions SET state = 'queued', attempts = 0,
		started_at = NULL, dispatched_at = NULL, attempt_executor = NULL, attempt_started_at = NULL,
		attempt_heartbeat_at = NULL, `+unrecorded+` WHERE job_id = $1`, queued); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(context.Background(), `UPDATE executions SET state = 'running', attempts = 1,
		started_at = now() - interval '10 s', attempt_started_at = now() - interval '10 s',
		attempt_heartbeat_at = NULL, `+unrecorded+` WHERE job_id = $1`, running); err != nil {
		t.Fatal(err)
	}

	nodetest.WaitFor(t, 30*time.Second, "both rescued and succeeded again", func() bool {
		s1, a1, _ := one(queued)
		s2, a2, _ := one(running)
		return s1 == "succeeded" && a1 == 1 && s2 == "succeeded" && a2 == 2
	})
	if h := hitsOf("/queued"); h != 1 {
		t.Errorf("the execution whose start and end were lost ran %d times, want once: its executor answers the rescue from its journal", h)
	}
	if h := hitsOf("/running"); h != 2 {
		t.Errorf("the execution whose end was lost ran %d times, want 2", h)
	}
	_, _, qx := one(queued)
	x := n1.Execution(t, qx)
	if x.Notes == nil || len(*x.Notes) != 1 || (*x.Notes)[0].Kind != "rescued" ||
		!strings.Contains((*x.Notes)[0].Note, "no longer in JetStream") {
		t.Errorf("the rescued execution's notes: %+v, want one rescue", x.Notes)
	}
	atts := nodetest.Attempts(x)
	if len(atts) != 1 || nodetest.Str(atts[0].Outcome) != "succeeded" {
		t.Errorf("the rescued execution's attempts: %+v, want its first attempt, succeeded", atts)
	}
	_, _, rx := one(running)
	x = n1.Execution(t, rx)
	if x.Notes == nil || len(*x.Notes) != 1 || (*x.Notes)[0].Kind != "lost" {
		t.Errorf("the lost execution's notes: %+v, want one lost attempt", x.Notes)
	}
	atts = nodetest.Attempts(x)
	if len(atts) != 2 || nodetest.Str(atts[0].Outcome) != "lost" || nodetest.Str(atts[1].Outcome) != "succeeded" {
		t.Errorf("the lost execution's attempts: %+v, want lost then succeeded", atts)
	}

	// The unserved one has waited well past the bound, its message in
	// the stream: still the first dispatch, no note.
	var dispatches int
	if err := pg.QueryRow(context.Background(), "SELECT dispatches FROM executions WHERE job_id = $1",
		unserved).Scan(&dispatches); err != nil {
		t.Fatal(err)
	}
	s, _, ux := one(unserved)
	if x := n1.Execution(t, ux); s != "queued" || dispatches != 0 || x.Notes != nil {
		t.Errorf("the execution no executor serves: %s, dispatch %d, notes %+v; want queued, its first dispatch, none",
			s, dispatches, x.Notes)
	}
}
