package node_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tock-sched/tock/node/nodetest"
)

// The API runs on its own pool (issue 44): after a request, the
// database has connections named tockd-api, apart from the node's
// others, so that the API's reads never wait for the connections that
// fire and record, nor hold them.
func TestAPIHasItsOwnPool(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.Start(t, "n1")
	if code := nodetest.Call(t, http.MethodGet, n.URL+"/v1/jobs?limit=5", nil, nil); code != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %d", code)
	}
	st := nodetest.OpenStore(t, e.PG)
	var api, others int
	if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE application_name = 'tockd-api'),
		count(*) FILTER (WHERE application_name <> 'tockd-api')
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&api, &others); err != nil {
		t.Fatal(err)
	}
	if api == 0 || others == 0 {
		t.Errorf("connections: %d of the API's pool, %d others; want both", api, others)
	}
}
