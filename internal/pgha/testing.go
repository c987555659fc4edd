package pgha

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tock-sched/tock/internal/testenv"
)

// Ensure installs Patroni (scripts/ensure-patroni.sh) if it is missing;
// the test fails if it cannot be.
func Ensure(t testing.TB) {
	t.Helper()
	if Available() == "" {
		return
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "ensure-patroni.sh")
	out, err := exec.Command(script).CombinedOutput()
	if err != nil {
		t.Fatalf("install patroni: %v\n%s", err, out)
	}
	if why := Available(); why != "" {
		t.Fatal(why)
	}
}

// Test starts a cluster for this test, on an embedded etcd of its own
// (synchronous unless cfg.Async); it stops at cleanup. With -v (or
// TOCK_PATRONI_LOG set) Patroni's output goes to stderr.
func Test(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	Ensure(t)
	if cfg.Etcd == "" {
		cfg.Etcd = testenv.Etcd(t).Endpoint()
	}
	if cfg.Log == nil && os.Getenv("TOCK_PATRONI_LOG") != "" {
		cfg.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
