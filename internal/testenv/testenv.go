package testenv

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/secret"
)

// Etcd starts an embedded etcd for this test; it is stopped when the test
// ends. The test may Stop and Start it again.
func Etcd(t testing.TB) *embedded.Etcd {
	t.Helper()
	e := &embedded.Etcd{Dir: t.TempDir()}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// NATS starts an embedded NATS server with JetStream for this test; it is
// stopped when the test ends. The test may Stop and Start it again.
func NATS(t testing.TB) *embedded.NATS {
	t.Helper()
	n := &embedded.NATS{Dir: t.TempDir()}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// EtcdCluster starts an embedded etcd cluster of 3 members for this test;
// it is stopped when the test ends. The test may Stop and Start members.
func EtcdCluster(t testing.TB) *embedded.EtcdCluster {
	t.Helper()
	c, err := embedded.NewEtcdCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	return c
}

// NATSCluster starts an embedded cluster of 3 NATS servers with
// clustered JetStream for this test; it is stopped when the test ends.
// The test may Stop and Start servers.
func NATSCluster(t testing.TB) *embedded.NATSCluster {
	t.Helper()
	c, err := embedded.NewNATSCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	return c
}

// JetStream starts an embedded NATS server for the test and returns a
// JetStream handle on a connection to it; both end with the test.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(NATS(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// WaitFor polls cond until it holds, failing the test after d. Tests wait
// on a condition with a deadline rather than sleep for a guessed time.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Deps lists the packages the package in the test's directory depends
// on (go list -deps), its own tests left out. go test puts its own
// GOROOT/bin first on PATH, so "go" is the toolchain running the test.
func Deps(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	return strings.Fields(string(out))
}

// Keyring is a keyring of one new key, k1, as a --secret-key-file of one
// line gives: for tests of secret headers.
func Keyring(t testing.TB) *secret.Keyring {
	t.Helper()
	line, err := secret.GenerateKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	k, err := secret.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
