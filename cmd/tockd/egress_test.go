package main

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
)

// tockd dev calls a developer's local targets, but never tock's own
// etcd, NATS, PostgreSQL or API: a job naming one of them is refused when
// it is created (400, handler.url), and a job that reaches one by a
// redirect fails for good, saying why.
func TestDevRefusesTocksOwnAddresses(t *testing.T) {
	e := newEnv(t)
	base := e.startNodeWith(t, "dev", func(c *Config) {
		c.HTTPAllow = nil // dev's own rules only
		devHTTPPolicy(c, e.etcd)
	})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "local ok")
	}))
	defer target.Close()

	local := runOnce(t, base, map[string]any{"name": "local",
		"handler": map[string]any{"type": "http", "url": target.URL + "/hook"}})

	etcd := strings.TrimPrefix(e.etcd.Endpoint(), "http://")
	for what, addr := range map[string]string{
		"etcd":       etcd,
		"etcd peer":  "127.0.0.1:" + strconv.Itoa(e.etcd.PeerPort),
		"NATS":       strings.TrimPrefix(e.nats.URL(), "nats://"),
		"PostgreSQL": hostPort(e.pg, defaultPostgresPort),
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

	redirected := runOnce(t, base, map[string]any{"name": "redirected", "retry": map[string]any{"max_attempts": 3},
		"handler": map[string]any{"type": "http", "url": target.URL + "/?to=" + url.QueryEscape(e.etcd.Endpoint()+"/v3/kv/range")}})
	x := waitState(t, base, redirected, "dead", 20*time.Second)
	if want := "refused: " + etcd + " is tock's own etcd"; x.Attempts != 1 || !strings.Contains(x.Error, want) {
		t.Errorf("redirected to etcd: %d attempts, error %q; want 1 attempt refused with %q", x.Attempts, x.Error, want)
	}
	if x := waitState(t, base, local, "succeeded", 20*time.Second); x.Output != "local ok" {
		t.Errorf("local target: output %q", x.Output)
	}
}
