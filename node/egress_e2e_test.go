package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
)

// tockd dev calls a developer's local targets, but never tock's own
// etcd, NATS, PostgreSQL or API: a job naming one of them is refused when
// it is created (400, handler.url), and a job that reaches one by a
// redirect fails for good, saying why.
func TestDevRefusesTocksOwnAddresses(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	n := e.StartWith(t, "dev", func(c *node.Config) {
		c.HTTPAllow = nil // dev's own rules only
		node.DevHTTPPolicy(c, e.Etcd.PeerPort)
	})
	base := n.URL
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "local ok")
	}))
	defer target.Close()

	local := n.RunOnce(t, map[string]any{"name": "local",
		"handler": map[string]any{"type": "http", "url": target.URL + "/hook"}})

	etcd := strings.TrimPrefix(e.Etcd.Endpoint(), "http://")
	pg, err := url.Parse(e.PG)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Port() == "" {
		pg.Host += ":5432" // PostgreSQL's default port, as tockd takes it
	}
	for what, addr := range map[string]string{
		"etcd":       etcd,
		"etcd peer":  "127.0.0.1:" + strconv.Itoa(e.Etcd.PeerPort),
		"NATS":       strings.TrimPrefix(e.NATS.URL(), "nats://"),
		"PostgreSQL": pg.Host,
		"API":        strings.TrimPrefix(base, "http://"),
	} {
		body, _ := json.Marshal(map[string]any{"name": "own-" + strings.ReplaceAll(what, " ", "-"), "schedule": map[string]any{"in": "1h"},
			"handler": map[string]any{"type": "http", "url": "http://" + addr + "/v3/kv/range"}})
		resp, err := http.Post(base+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		problem, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(problem, []byte(`"handler.url"`)) ||
			!bytes.Contains(problem, []byte("is tock's own")) {
			t.Errorf("job calling %s (%s): %d %s, want a 400 refusing handler.url as tock's own", what, addr, resp.StatusCode, problem)
		}
	}

	redirected := n.RunOnce(t, map[string]any{"name": "redirected", "retry": map[string]any{"max_attempts": 3},
		"handler": map[string]any{"type": "http", "url": target.URL + "/?to=" + url.QueryEscape(e.Etcd.Endpoint()+"/v3/kv/range")}})
	x := n.WaitState(t, redirected, "dead", 20*time.Second)
	if want := "refused: " + etcd + " is tock's own etcd"; x.Attempts != 1 || !strings.Contains(nodetest.Str(x.Error), want) {
		t.Errorf("redirected to etcd: %d attempts, error %q; want 1 attempt refused with %q", x.Attempts, nodetest.Str(x.Error), want)
	}
	if x := n.WaitState(t, local, "succeeded", 20*time.Second); nodetest.Str(x.Output) != "local ok" {
		t.Errorf("local target: output %q", nodetest.Str(x.Output))
	}
}
