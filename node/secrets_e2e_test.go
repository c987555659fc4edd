package node_test

// Secret headers end to end: sealed by the api role, opened by the
// executor role only, shown to nobody else.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/secret"
)

// The values the end-to-end secrets test gives.
const (
	e2eSecret      = "Bearer e2e-s3cret-9c41"
	e2ePlainSecret = "plain-tok-e2e-51b0"
)

// logBuffer collects a node's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes is what was written so far.
func (b *logBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// noE2ESecret fails the test if what holds the secret header's value,
// or, with hidden, the value of the plain header named like a credential
// (which the API hides, but which is stored and sent as it is).
func noE2ESecret(t *testing.T, where string, what []byte, hidden bool) {
	t.Helper()
	values := []string{e2eSecret, "e2e-s3cret"}
	if hidden {
		values = append(values, e2ePlainSecret, "plain-tok-e2e")
	}
	for _, v := range values {
		if bytes.Contains(what, []byte(v)) {
			t.Errorf("%s shows a secret (%q)", where, v)
		}
	}
}

// writeKeys writes a key file of these lines, mode 0600, and returns its
// path.
func writeKeys(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newKey is a new key line of id.
func newKey(t *testing.T, id string) string {
	t.Helper()
	line, err := secret.GenerateKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// loadKeys reads the key file at path.
func loadKeys(t *testing.T, path string) *secret.Keyring {
	t.Helper()
	k, err := node.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// get is the body of GET url, which must answer 200.
func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// storedRows is every jobs, job_specs, executions and attempts row of the
// database, as JSON text.
func storedRows(t *testing.T, pg string) []byte {
	t.Helper()
	st := nodetest.OpenStore(t, pg)
	var b bytes.Buffer
	for _, table := range []string{"jobs", "job_specs", "executions", "attempts"} {
		rows, err := st.Pool().Query(context.Background(), "SELECT to_jsonb(r)::text FROM "+table+" r")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// A job's secret header reaches its HTTP target, and nothing else: not
// the API's answers, the rows in PostgreSQL, the messages on NATS, the
// nodes' logs or their metrics. An executor without the key fails the
// attempt for good; after a rotation (a new key first, tockd secrets
// reencrypt), an executor holding only the new key sends it.
func TestSecretHeadersEndToEnd(t *testing.T) {
	t.Parallel()
	e := nodetest.New(t)
	dir := t.TempDir()
	k1 := newKey(t, "k1")
	keys1 := writeKeys(t, dir, "keys1", k1)

	var logs logBuffer
	debug := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := e.StartWith(t, "api", func(c *node.Config) {
		c.Roles = node.RolesOf(node.RoleAPI, node.RoleScheduler, node.RoleRecorder)
		c.Logger, c.Secrets = debug, loadKeys(t, keys1)
	})
	base := n.URL
	startExecutor := func(id string, keys *secret.Keyring) *nodetest.Node {
		return e.StartWith(t, id, func(c *node.Config) {
			c.Roles = node.RolesOf(node.RoleExecutor)
			c.Logger, c.Secrets = debug, keys
		})
	}
	x1 := startExecutor("x1", loadKeys(t, keys1))

	// Every execution message, as NATS carries it.
	nc, err := nats.Connect(e.NATS.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var (
		msgMu sync.Mutex
		msgs  [][]byte
	)
	sub, err := nc.Subscribe("tock.exec.>", func(m *nats.Msg) {
		msgMu.Lock()
		defer msgMu.Unlock()
		msgs = append(msgs, append(bytes.Clone(m.Data), []byte(fmt.Sprint(m.Header))...))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	type hit struct{ auth, plain, team string }
	hits := make(chan hit, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- hit{r.Header.Get("Authorization"), r.Header.Get("X-Api-Token"), r.Header.Get("X-Team")}
		_, _ = io.WriteString(w, "ok")
	}))
	defer target.Close()

	xid := n.RunOnce(t, map[string]any{"name": "secret-hook", "retry": map[string]any{"max_attempts": 3},
		"handler": map[string]any{"type": "http", "url": target.URL + "/hook",
			"headers":        map[string]string{"X-Team": "payments", "X-Api-Token": e2ePlainSecret},
			"secret_headers": map[string]string{"Authorization": e2eSecret}}})
	x := n.WaitState(t, xid, "succeeded", 20*time.Second)
	if h := <-hits; h.auth != e2eSecret || h.plain != e2ePlainSecret || h.team != "payments" {
		t.Fatalf("the target got %+v", h)
	}

	// The API's answers: "***".
	jobPath := base + "/v1/jobs/" + x.JobId.String()
	for _, url := range []string{jobPath, base + "/v1/jobs", base + "/v1/executions/" + xid.String(), base + "/v1/jobs/" + x.JobId.String() + "/executions"} {
		noE2ESecret(t, "GET "+url, get(t, url), true)
	}
	if j := get(t, jobPath); !bytes.Contains(j, []byte(`"secret_headers":{"Authorization":"***"}`)) ||
		!bytes.Contains(j, []byte(`"X-Api-Token":"***"`)) {
		t.Errorf("GET job: %s", j)
	}
	// PATCH with "***" keeps the value: the next run sends it.
	if code := nodetest.Call(t, "PATCH", jobPath, map[string]any{"handler": map[string]any{"type": "http", "url": target.URL + "/hook2",
		"headers":        map[string]string{"X-Team": "ops", "X-Api-Token": "***"},
		"secret_headers": map[string]string{"Authorization": "***"}}}, nil); code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	run := func() uuid.UUID {
		t.Helper()
		resp, err := n.Client.RunJobWithResponse(context.Background(), x.JobId, nil)
		if err != nil || resp.StatusCode() != http.StatusAccepted {
			t.Fatalf("run: %v %d", err, nodetest.Code(resp, err))
		}
		return resp.JSON202.Id
	}
	n.WaitState(t, run(), "succeeded", 20*time.Second)
	if h := <-hits; h.auth != e2eSecret || h.plain != e2ePlainSecret || h.team != "ops" {
		t.Fatalf("after PATCH with ***, the target got %+v", h)
	}

	// The rows, the messages, the logs and the metrics.
	rows := storedRows(t, e.PG)
	noE2ESecret(t, "PostgreSQL", rows, false)
	if !bytes.Contains(rows, []byte(`"secret_headers": {"Authorization": {"ct": "`)) {
		t.Errorf("no sealed header in the rows:\n%s", rows)
	}
	msgMu.Lock()
	wire := bytes.Join(msgs, []byte("\n"))
	msgMu.Unlock()
	noE2ESecret(t, "the NATS messages", wire, false)
	if !bytes.Contains(wire, []byte(`"secret_headers":{"Authorization":{"kid":"k1","ct":"`)) {
		t.Errorf("no sealed header in the NATS messages:\n%s", wire)
	}
	noE2ESecret(t, "/metrics of the API node", get(t, base+"/metrics"), true)
	noE2ESecret(t, "/metrics of the executor", get(t, x1.URL+"/metrics"), true)
	if !bytes.Contains(get(t, x1.URL+"/metrics"), []byte(`tock_breaker_state{handler="http:127.0.0.1:`)) {
		t.Error("the executor's breaker metric does not name the target by host")
	}

	// An executor without the key: the attempt fails for good.
	x1.Stop()
	x0 := startExecutor("x0", nil)
	dead := n.WaitState(t, run(), "dead", 20*time.Second)
	if dead.Attempts != 1 || !strings.Contains(nodetest.Str(dead.Error), "this executor has no --secret-key-file") {
		t.Errorf("without the key: %d attempts, error %q", dead.Attempts, nodetest.Str(dead.Error))
	}
	x0.Stop()

	// Rotation: k2 first, k1 still there; reencrypt; then k2 alone opens
	// everything stored.
	k2 := newKey(t, "k2")
	keys21 := writeKeys(t, dir, "keys21", k2, k1)
	if out, err := nodetest.Command(t, "secrets", "reencrypt", "--postgres-url", e.PG, "--secret-key-file", keys21, "--batch", "1").CombinedOutput(); err != nil {
		t.Fatalf("tockd secrets reencrypt: %v\n%s", err, out)
	}
	rows = storedRows(t, e.PG)
	if bytes.Contains(rows, []byte(`"kid": "k1"`)) || !bytes.Contains(rows, []byte(`"kid": "k2"`)) {
		t.Errorf("after reencrypt, rows still under k1 (or none under k2):\n%s", rows)
	}
	startExecutor("x2", loadKeys(t, writeKeys(t, dir, "keys2", k2)))
	n.WaitState(t, run(), "succeeded", 20*time.Second)
	if h := <-hits; h.auth != e2eSecret || h.plain != e2ePlainSecret {
		t.Fatalf("after the rotation, the target got %+v", h)
	}

	if l := logs.Bytes(); !bytes.Contains(l, []byte("tockd started")) {
		t.Errorf("the nodes' logs were not captured: %s", l)
	} else {
		noE2ESecret(t, "the nodes' logs", l, true)
	}
}
